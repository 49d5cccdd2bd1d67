"""Shim so that `python create_pretraining_data.py ...` works from a checkout."""
from albert_tf.create_pretraining_data import run

if __name__ == "__main__":
    run()
