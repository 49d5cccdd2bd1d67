"""Shim so that `python run_squad.py ...` works from a checkout."""
from albert_tf.run_squad import run

if __name__ == "__main__":
    run()
