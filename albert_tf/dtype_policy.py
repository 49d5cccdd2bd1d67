"""Keras's global dtype policy held at float32 for a block: weights read or written as they are
stored, whatever mixed precision the run set (training/distribution sets it)."""

import contextlib

import keras


@contextlib.contextmanager
def float32_policy():
    """Keras's global policy float32 within the block, the caller's again after it."""
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(policy)
