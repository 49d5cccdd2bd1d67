"""Shim so that `python run_ner.py ...` works from a checkout."""
from albert_tf.run_ner import run

if __name__ == "__main__":
    run()
