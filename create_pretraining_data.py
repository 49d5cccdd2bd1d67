"""Shim so that `python create_pretraining_data.py ...` works from a checkout."""
from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads, as `python -m albert_tf.create_pretraining_data` does

from albert_tf.create_pretraining_data import run  # noqa: E402

if __name__ == "__main__":
    run()
