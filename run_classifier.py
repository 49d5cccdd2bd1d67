"""Shim so that `python run_classifier.py ...` works from a checkout."""
from albert_tf.run_classifier import run

if __name__ == "__main__":
    run()
