"""AlbertEncoder: factorised embeddings, grouped shared transformer blocks, and the pooler."""

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.formats import tf1
from albert_tf.formats.checkpoints import PretrainedMixin
from albert_tf.modeling import kernels
from albert_tf.modeling.layers import AttentionFfnBlock, Dense, Embeddings, _initializer
from albert_tf.modeling.step_kernels import traced_with

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def attention_bias_from_mask(input_mask):
    """[batch, seq] 1/0 mask → additive bias [batch, 1, 1, seq]: 0 to keep, -10000 to drop."""
    mask = tf.cast(input_mask, tf.float32)
    # expand_dims, not [:, None, None, :]: LiteRT has no builtin for a slice that adds axes to
    # a tensor whose batch is not known (the tagger's windows).
    return tf.expand_dims(tf.expand_dims(1.0 - mask, 1), 1) * -10000.0


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(PretrainedMixin, keras.Model):
    """The ALBERT encoder, numerically the original `modeling.AlbertModel`.

    Call with a dict of int32 [batch, seq] tensors `input_word_ids`, `input_mask`,
    `input_type_ids`; returns `sequence_output` [batch, seq, H], `pooled_output` [batch, H] and
    `encoder_outputs` (one [batch, seq, H] tensor per block call: layers × inner_group_num).
    `step_kernels` (a `step_kernels.StepKernels`): the kernels its training calls trace with;
    None: the caller's.
    """

    def __init__(self, config, step_kernels=None, **kwargs):
        kwargs.setdefault("name", "albert_encoder")
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        self.config = config
        self.step_kernels = step_kernels
        policy, init = self.dtype_policy, _initializer(config)
        self.embeddings = Embeddings(config, name="embeddings", dtype=policy)
        self.embedding_projection = None
        if self.embeddings.width != config.hidden_size:
            self.embedding_projection = Dense(config.embedding_size, config.hidden_size, init,
                                              name="embedding_hidden_mapping_in", dtype=policy)
        self.groups = [
            [AttentionFfnBlock(config, name=f"group_{g}_inner_group_{i}", dtype=policy)
             for i in range(config.inner_group_num)]
            for g in range(config.num_hidden_groups)]
        self.pooler = Dense(config.hidden_size, config.hidden_size, init, activation=tf.tanh,
                            name="pooler", dtype=policy)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def get_embedding_table(self):
        return self.embeddings.word_embeddings

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, inputs, training=None, output_positions=None):
        """With `output_positions` [batch, P], the last block runs only at [CLS] and those
        positions: the result is then `sequence_output` [batch, P, H] (the hidden states at the
        positions) and `pooled_output`, nothing else. Pretraining needs no more."""
        with traced_with(self.step_kernels):
            return self._encode(inputs, training, output_positions)

    def pooled_output(self, inputs, training=None):
        """The pooled output alone ([CLS] through the pooler): when training with the fused
        kernels the last block runs at [CLS] only, which is all a sentence head reads."""
        if not kernels.enabled(training):
            return self(inputs, training=training)["pooled_output"]
        batch = tf.shape(_unpack_inputs(inputs)[0])[0]
        none = tf.zeros([batch, 0], tf.int32)
        return self(inputs, training=training, output_positions=none)["pooled_output"]

    def _encode(self, inputs, training, output_positions):
        word_ids, input_mask, type_ids = _unpack_inputs(inputs)
        # Static sizes where known (XLA and the fused attention want them), else tensors.
        batch, seq = (d or tf.shape(word_ids)[i] for i, d in enumerate(word_ids.shape))
        x = self.embeddings(word_ids, type_ids, training=training)
        x = tf.reshape(x, [batch * seq, self.embeddings.width])
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)
        bias = attention_bias_from_mask(input_mask)
        lengths = tf.reduce_sum(input_mask, axis=-1)  # the fused attention's padding mask
        hidden = self.config.hidden_size
        blocks = [block for layer_idx in range(self.config.num_hidden_layers)
                  for block in self.groups[self.config.group_of_layer(layer_idx)]]
        encoder_outputs = []
        # The shared blocks' weights are cast to the compute dtype once, not once per layer.
        with kernels.shared_weight_casts():
            for block in blocks[:-1]:
                x = block(x, bias, batch=batch, seq=seq, lengths=lengths, training=training)
                encoder_outputs.append(tf.reshape(x, [batch, seq, hidden]))
            positions = None
            if output_positions is not None:
                positions = tf.concat([tf.zeros([batch, 1], tf.int32),
                                       tf.cast(output_positions, tf.int32)], axis=1)
            x = blocks[-1](x, bias, batch=batch, seq=seq, lengths=lengths, training=training,
                           positions=positions)
        if positions is not None:
            x = tf.reshape(x, [batch, -1, hidden])
            return {"sequence_output": x[:, 1:], "pooled_output": self.pooler(x[:, 0])}
        encoder_outputs.append(tf.reshape(x, [batch, seq, hidden]))
        sequence_output = encoder_outputs[-1]
        pooled_output = self.pooler(sequence_output[:, 0, :])
        return {"sequence_output": sequence_output, "pooled_output": pooled_output,
                "encoder_outputs": encoder_outputs}

    def tf1_weights(self):
        """Our variables under their names in the original TF1 checkpoints (brightmart's
        layout: in brightmart/albert_zh's), in a fixed order."""
        return tf1.encoder_weights(self)


def _unpack_inputs(inputs):
    """Accepts the TF-Hub dict (mask and type ids optional) or a (ids, mask, type_ids) tuple."""
    if isinstance(inputs, dict):
        if "input_word_ids" not in inputs:
            raise ValueError(f"encoder inputs need 'input_word_ids'; got keys {sorted(inputs)}")
        word_ids = inputs["input_word_ids"]
        mask, type_ids = inputs.get("input_mask"), inputs.get("input_type_ids")
    elif isinstance(inputs, (list, tuple)):
        word_ids, mask, type_ids = (list(inputs) + [None, None])[:3]
    else:
        word_ids, mask, type_ids = inputs, None, None
    word_ids = tf.cast(word_ids, tf.int32)
    mask = tf.ones_like(word_ids) if mask is None else tf.cast(mask, tf.int32)
    type_ids = tf.zeros_like(word_ids) if type_ids is None else tf.cast(type_ids, tf.int32)
    return word_ids, mask, type_ids
