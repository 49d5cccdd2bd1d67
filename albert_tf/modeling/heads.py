"""Pretraining heads: masked-LM (tied to the word embeddings) and sentence-order prediction."""

import keras
import tensorflow as tf

from albert_tf.modeling.layers import Dense, LayerNorm, _initializer


def float32_logits(x, weights, bias):
    """x [..., H] · weights [L, H]ᵀ + bias [L] in float32 whatever x's dtype: a head's logits
    under bfloat16 would keep ~3 significant digits (a regression's scores near 2.5 land on
    steps of 1/64)."""
    logits = tf.einsum("...h,lh->...l", tf.cast(x, tf.float32), tf.cast(weights, tf.float32))
    return logits + tf.cast(bias, tf.float32)


class MaskedLMHead(keras.layers.Layer):
    """Dense H→E with the config's activation, LayerNorm, then logits over the tied vocabulary.
    brightmart's layout: dense H→H and LayerNorm, then back through the word projection
    (`projection_fn()` [E, H], transposed) to E, then the tied vocabulary."""

    def __init__(self, config, embedding_table_fn, projection_fn=None, **kwargs):
        super().__init__(**kwargs)
        policy = self.dtype_policy
        # A getter, not the variable: the table belongs to (and is tracked by) the encoder.
        self._embedding_table_fn = embedding_table_fn
        self._projection_fn = projection_fn
        width = config.hidden_size if projection_fn else config.embedding_size
        self.dense = Dense(config.hidden_size, width, _initializer(config),
                           activation=config.hidden_act, name="dense",
                           dtype=policy)
        self.layer_norm = LayerNorm(width,
                                    config.mlm_layer_norm_eps or config.layer_norm_eps,
                                    name="LayerNorm", dtype=policy)
        self.output_bias = self.add_weight(shape=(config.vocab_size,), initializer="zeros",
                                           name="output_bias")

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, sequence_output, positions=None):
        """sequence_output [B, T, H], positions [B, P] → float32 logits [B, P, vocab].

        Without `positions`, sequence_output holds the hidden states at the positions already.
        """
        x = sequence_output
        if positions is not None:
            x = tf.gather(sequence_output, tf.cast(positions, tf.int32), batch_dims=1)
        batch, num = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, [batch * num, -1])
        # The vocabulary projection runs in float32: the logits feed a softmax over V classes.
        x = tf.cast(self.layer_norm(self.dense(x)), tf.float32)
        if self._projection_fn:
            x = tf.matmul(x, tf.cast(self._projection_fn(), tf.float32), transpose_b=True)
        logits = tf.matmul(x, tf.cast(self._embedding_table_fn(), tf.float32), transpose_b=True)
        logits = tf.nn.bias_add(logits, tf.cast(self.output_bias, tf.float32))
        return tf.reshape(logits, [batch, num, -1])


class SentenceOrderHead(keras.layers.Layer):
    """pooled_output [B, H] → float32 logits [B, 2]; weights stored [2, H] as in the original."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.output_weights = self.add_weight(shape=(2, config.hidden_size),
                                              initializer=_initializer(config),
                                              name="output_weights")
        self.output_bias = self.add_weight(shape=(2,), initializer="zeros", name="output_bias")

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, pooled_output):
        x = tf.cast(pooled_output, tf.float32)
        logits = tf.matmul(x, tf.cast(self.output_weights, tf.float32), transpose_b=True)
        return tf.nn.bias_add(logits, tf.cast(self.output_bias, tf.float32))
