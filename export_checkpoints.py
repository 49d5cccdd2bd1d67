"""Shim so that `python export_checkpoints.py ...` works from a checkout, as the original's did."""
from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads, as `python -m albert_tf.export_checkpoints` does

from albert_tf.export_checkpoints import run  # noqa: E402

if __name__ == "__main__":
    run()
