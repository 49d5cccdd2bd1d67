"""Shim so that `python run_pretraining.py ...` works from a checkout."""
from albert_tf.run_pretraining import run

if __name__ == "__main__":
    run()
