"""Shim so that `python run_squad_v1.py ...` works from a checkout, as the original's did."""
from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads, as `python -m albert_tf.run_squad_v1` does

from albert_tf.run_squad_v1 import run  # noqa: E402

if __name__ == "__main__":
    run()
