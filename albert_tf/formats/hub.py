"""TF-Hub text encoders (TF2 SavedModels with the TF-Hub encoder API) as trainable layers."""

import os
import re

import keras
import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.formats.names import local_model_path


def resolve_hub_handle(handle):
    """A local SavedModel directory for a path, a TF-Hub handle or any model name."""
    return local_model_path(handle)


class HubEncoder(keras.layers.Layer):
    """A TF2 SavedModel with the TF-Hub text-encoder API as a trainable encoder layer.

    Its variables are tracked (and checkpointed) as `hub/<index>/<name>`; `config` is the
    module's assets/albert_config.json, the given config, or one inferred from a probe call.
    """

    def __init__(self, handle, config=None, **kwargs):
        kwargs.setdefault("name", "hub_encoder")
        super().__init__(**kwargs)
        self.handle = handle
        path = resolve_hub_handle(handle)
        self._module = tf.saved_model.load(path)
        if not callable(self._module):
            raise ValueError(f"the hub module {handle} is not callable; it needs the TF-Hub "
                             f"text-encoder API (a TF1 hub.Module is not supported)")
        self._names = {}
        trainable = {id(v) for v in getattr(self._module, "trainable_variables", [])}
        for i, v in enumerate(getattr(self._module, "variables", [])):
            name = f"hub/{i:04d}/{v.name.split(':')[0]}"
            wrapped = keras.Variable(v, trainable=id(v) in trainable, dtype=v.dtype,
                                     shape=v.shape, name=re.sub(r"[/:]", "_", v.name))
            self._track_variable(wrapped)
            self._names[name] = wrapped
        if not trainable:
            raise ValueError(f"the hub module {handle} exposes no trainable_variables")
        self.config = config or self._find_config(path)

    def _find_config(self, path):
        candidate = os.path.join(path, "assets", "albert_config.json")
        if tf.io.gfile.exists(candidate):
            return AlbertConfig.from_json_file(candidate)
        ids = tf.constant([[2, 3]], tf.int32)
        out = self.call({"input_word_ids": ids, "input_mask": tf.ones_like(ids),
                         "input_type_ids": tf.zeros_like(ids)}, training=False)
        hidden = int(out["pooled_output"].shape[-1])
        logging.warning("the hub module %s has no assets/albert_config.json; the written "
                        "albert_config.json only records hidden_size=%d", self.handle, hidden)
        return AlbertConfig(vocab_size=1, hidden_size=hidden, num_attention_heads=1,
                            intermediate_size=hidden)

    def call(self, inputs, training=None):
        feed = {k: tf.cast(inputs[k], tf.int32)
                for k in ("input_word_ids", "input_mask", "input_type_ids")}
        outputs = self._module(feed, training=bool(training))
        return {"pooled_output": outputs["pooled_output"],
                "sequence_output": outputs["sequence_output"]}

    def pooled_output(self, inputs, training=None):
        return self(inputs, training=training)["pooled_output"]

    def tf1_weights(self):
        return dict(self._names)
