"""Shim so that `python run_pretraining.py ...` works from a checkout."""
from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads, as `python -m albert_tf.run_pretraining` does

from albert_tf.run_pretraining import run  # noqa: E402

if __name__ == "__main__":
    run()
