"""Shim so that `python run_race.py ...` works from a checkout."""
from albert_tf.run_race import run

if __name__ == "__main__":
    run()
