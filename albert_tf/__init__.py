"""albert_tf: ALBERT pretraining, fine-tuning and export on TensorFlow 2 / Keras 3."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from albert_tf.config import AlbertConfig  # noqa: E402
from albert_tf.modeling.encoder import AlbertEncoder  # noqa: E402
from albert_tf.modeling.pretrainer import AlbertPretrainer  # noqa: E402
from albert_tf.optimization import (AdamWeightDecay, Lamb, WarmupPolynomialDecay,  # noqa: E402
                                    create_optimizer)

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer", "AdamWeightDecay", "Lamb",
           "WarmupPolynomialDecay", "create_optimizer"]
__version__ = "0.1.0"
