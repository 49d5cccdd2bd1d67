"""albert_tf: ALBERT pretraining, fine-tuning and export on TensorFlow 2 / Keras 3.

The public names load lazily, so tools that need no TensorFlow (the data builder) start fast.
"""

import importlib
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"
_EXPORTS = {
    "AlbertConfig": "albert_tf.config",
    "AlbertEncoder": "albert_tf.modeling.encoder",
    "AlbertPretrainer": "albert_tf.modeling.pretrainer",
    "AlbertClassifier": "albert_tf.modeling.classifier",
    "AdamWeightDecay": "albert_tf.optimization",
    "Lamb": "albert_tf.optimization",
    "WarmupPolynomialDecay": "albert_tf.optimization",
    "create_optimizer": "albert_tf.optimization",
    "FullTokenizer": "albert_tf.tokenization",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
