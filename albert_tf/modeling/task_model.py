"""What the fine-tuning models share: the encoder they wrap and the weight of each example."""

import keras
import tensorflow as tf

from albert_tf.formats.checkpoints import PretrainedMixin
from albert_tf.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder


class TaskModel(PretrainedMixin, keras.Model):
    """An encoder plus a task head. `encoder` is an AlbertConfig (or its dict; a new
    AlbertEncoder is built) or any encoder layer with the TF-Hub call API, `config` and
    `tf1_weights()` (AlbertEncoder, formats.hub.HubEncoder)."""

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        if isinstance(encoder, dict):
            encoder = AlbertConfig.from_dict(encoder)
        if isinstance(encoder, AlbertConfig):
            encoder = AlbertEncoder(encoder, dtype=self.dtype_policy)
        self.encoder = encoder
        self.config = encoder.config

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config


def example_weights(features):
    """1.0 for real examples, 0.0 for the padding examples that complete eval batches."""
    if "is_real_example" in features:
        return tf.cast(tf.reshape(features["is_real_example"], [-1]), tf.float32)
    return tf.ones([tf.shape(features["input_word_ids"])[0]], tf.float32)
