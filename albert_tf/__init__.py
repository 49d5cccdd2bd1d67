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
    "AlbertSquad": "albert_tf.modeling.squad",
    "AlbertMultipleChoice": "albert_tf.modeling.multiple_choice",
    "AlbertPreprocessor": "albert_tf.serving.preprocessor",
    "AdamWeightDecay": "albert_tf.modeling.optimizers",
    "Lamb": "albert_tf.modeling.optimizers",
    "WarmupPolynomialDecay": "albert_tf.modeling.optimizers",
    "create_optimizer": "albert_tf.modeling.optimizers",
    "finetuning_optimizer": "albert_tf.modeling.optimizers",
    "FullTokenizer": "albert_tf.tokenization",
    "load_tokenizer": "albert_tf.formats.tokenizers",
    "GlueTask": "albert_tf.tasks",
    "SquadTask": "albert_tf.tasks",
    "RaceTask": "albert_tf.tasks",
    "LabeledTextTask": "albert_tf.tasks",
    "FinetuningOptions": "albert_tf.tasks",
    "finetuning_options": "albert_tf.tasks",
    "run_finetuning": "albert_tf.tasks",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
