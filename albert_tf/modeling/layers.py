"""Building blocks of ALBERT: dense, LayerNorm, embeddings and the shared attention-FFN block.

Weights keep the original TF1 shapes (2-D attention kernels, [vocab, E] tables), so checkpoint
conversion is a rename. Hidden states travel as [batch * seq, width] matrices: every projection
is then one plain 2-D matmul, the fastest form on CPU and accelerators alike.
"""

import math

import keras
import tensorflow as tf

from albert_tf.modeling import attention, kernels

_TANH_GELU = ("gelu", "gelu_new", "gelu_pytorch_tanh")
_FUSED_GELU = {**{name: True for name in _TANH_GELU}, "gelu_exact": False}  # → approximate


def get_activation(name):
    """The activation function for a config's `hidden_act`."""
    if name in _TANH_GELU:
        return lambda x: tf.nn.gelu(x, approximate=True)
    if name == "gelu_exact":
        return lambda x: tf.nn.gelu(x, approximate=False)
    fns = {"relu": tf.nn.relu, "tanh": tf.math.tanh, "linear": tf.identity,
           "swish": tf.nn.silu, "silu": tf.nn.silu}
    if name not in fns:
        raise ValueError(f"unsupported activation {name!r}")
    return fns[name]


def _initializer(config):
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


class Dense(keras.layers.Layer):
    """x @ kernel + bias over the last axis, with the kernel stored [in, out] as in TF1.

    `activation` is a callable or a config `hidden_act` name; the GELUs then run as one fused
    kernel with the bias when training.
    """

    def __init__(self, in_dim, out_dim, initializer, activation=None, use_bias=True, **kwargs):
        # No autocast: the fused bias + GELU kernel takes the float32 bias as stored.
        super().__init__(autocast=False, **kwargs)
        self.kernel = self.add_weight(shape=(in_dim, out_dim), initializer=initializer,
                                      name="kernel")
        self.bias = (self.add_weight(shape=(out_dim,), initializer="zeros", name="bias")
                     if use_bias else None)
        self._gelu_approximate = _FUSED_GELU.get(activation) if use_bias else None
        self.activation = get_activation(activation) if isinstance(activation, str) else activation

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, x, training=None, with_bias=True):
        """`with_bias=False` leaves the bias out: the caller adds it in a fused kernel."""
        x = tf.cast(x, self.compute_dtype)
        y = tf.matmul(x, kernels.cast_weight(self.kernel, x.dtype))
        if self._gelu_approximate is not None and kernels.gelu_enabled(training):
            return kernels.bias_gelu(y, tf.convert_to_tensor(self.bias), self._gelu_approximate)
        if self._gelu_approximate is not None and kernels.rewritten("gelu", training):
            y = kernels.bias_add(y, tf.convert_to_tensor(self.bias))
            return kernels.gelu(y, self._gelu_approximate)
        if self.bias is not None and with_bias:
            y = kernels.bias_add(y, tf.convert_to_tensor(self.bias))
        return self.activation(y) if self.activation else y


class LayerNorm(keras.layers.Layer):
    """LayerNorm over the last axis, computed in float32 whatever the policy (TF1 names gamma/beta).

    Called as `ln(x, residual, bias)` it normalises x + residual + bias (one fused kernel when
    training).
    """

    def __init__(self, dim, epsilon=1e-12, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.epsilon = epsilon
        self.gamma = self.add_weight(shape=(dim,), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(dim,), initializer="zeros", name="beta")

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, x, residual=None, bias=None, training=None):
        parts = (x,) if residual is None else (x, residual)
        args = (parts, tf.convert_to_tensor(self.gamma), tf.convert_to_tensor(self.beta),
                self.epsilon, self.compute_dtype, bias)
        if kernels.enabled(training):
            return kernels.layer_norm(*args)
        return kernels.layer_norm_reference(*args)


class Embeddings(keras.layers.Layer):
    """Word + position + token-type embeddings at width E, then LayerNorm and dropout; in
    brightmart's layout the word vectors (E) go through `word_embeddings_2` [E, H] first and
    the rest is H wide."""

    def __init__(self, config, **kwargs):
        # No autocast: the three tables are summed in float32 before the LayerNorm.
        super().__init__(autocast=False, **kwargs)
        init = _initializer(config)
        self.word_projection = None
        e = config.embedding_size
        if config.embedding_layout == "brightmart":
            self.word_projection = self.add_weight(shape=(e, config.hidden_size),
                                                   initializer=init, name="word_embeddings_2")
            e = config.hidden_size
        self.width = e
        self.max_positions = config.max_position_embeddings
        self.word_embeddings = self.add_weight(shape=(config.vocab_size, config.embedding_size),
                                               initializer=init, name="word_embeddings")
        self.token_type_embeddings = self.add_weight(shape=(config.type_vocab_size, e),
                                                     initializer=init, name="token_type_embeddings")
        self.position_embeddings = self.add_weight(shape=(config.max_position_embeddings, e),
                                                   initializer=init, name="position_embeddings")
        self.layer_norm = LayerNorm(e, config.layer_norm_eps, name="LayerNorm",
                                    dtype=self.dtype_policy)
        self.dropout = keras.layers.Dropout(config.hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, word_ids, type_ids, training=None):
        seq_len = tf.shape(word_ids)[1]
        tf.debugging.assert_less_equal(
            seq_len, self.max_positions,
            message=f"sequence length exceeds max_position_embeddings={self.max_positions}")
        x = tf.gather(self.word_embeddings, word_ids)
        if self.word_projection is not None:
            x = tf.matmul(x, tf.convert_to_tensor(self.word_projection))
        x += tf.gather(self.token_type_embeddings, type_ids)
        x += self.position_embeddings[tf.newaxis, :seq_len, :]
        return self.dropout(self.layer_norm(x, training=training), training=training)


class AttentionFfnBlock(keras.layers.Layer):
    """One post-LayerNorm transformer block (the original `attention_ffn_block`), or with
    `config.ln_type="preln"` brightmart's pre-LayerNorm block: x + attention(LN(x)), then
    h + FFN(LN(h)).

    Works on hidden states flattened to [batch * seq, H]; `attention_bias` is the additive mask
    [batch, 1, 1, seq] (0 for real tokens, -10000 for padding).
    """

    def __init__(self, config, **kwargs):
        # No autocast: the fused LayerNorms take the float32 biases of the projections.
        super().__init__(autocast=False, **kwargs)
        init, h, policy = _initializer(config), config.hidden_size, self.dtype_policy
        self.pre_ln = config.ln_type == "preln"
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.scale = 1.0 / math.sqrt(config.head_size)
        self.query = Dense(h, h, init, name="query", dtype=policy)
        self.key = Dense(h, h, init, name="key", dtype=policy)
        self.value = Dense(h, h, init, name="value", dtype=policy)
        self.attention_output = Dense(h, h, init, name="attention_output", dtype=policy)
        self.attention_layer_norm = LayerNorm(h, config.layer_norm_eps, name="LayerNorm",
                                              dtype=policy)
        self.intermediate = Dense(h, config.intermediate_size, init,
                                  activation=config.hidden_act,
                                  name="intermediate", dtype=policy)
        self.ffn_output = Dense(config.intermediate_size, h, init, name="ffn_output",
                                dtype=policy)
        self.output_layer_norm = LayerNorm(h, config.layer_norm_eps, name="LayerNorm_1",
                                           dtype=policy)
        self.attention_dropout = keras.layers.Dropout(config.attention_probs_dropout_prob,
                                                      dtype=policy)
        self.hidden_dropout = keras.layers.Dropout(config.hidden_dropout_prob, dtype=policy)

    def _split_heads(self, x, batch, seq):
        x = tf.reshape(x, [batch, seq, self.num_heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, x, attention_bias, batch, seq, training=None, positions=None, lengths=None):
        """→ [batch * seq, H]; with `positions` [batch, P] only those rows are computed (their
        queries still attend over the whole sequence) → [batch * P, H]. `batch` and `seq` are
        ints when the shapes are static, and `lengths` [batch] the tokens of each sequence (the
        fused attention needs both)."""
        inputs = self.attention_layer_norm(x, training=training) if self.pre_ln else x
        context, x = self._self_attention(inputs, x, attention_bias, batch, seq, training,
                                          positions, lengths)
        if self.pre_ln:  # x + attention(LN(x)), then h + FFN(LN(h))
            h = x + tf.cast(self._project(self.attention_output, context, False, training),
                            x.dtype)
            ffn = self.intermediate(self.output_layer_norm(h, training=training),
                                    training=training)
            return h + tf.cast(self._project(self.ffn_output, ffn, False, training), h.dtype)
        # Without dropout between them, a projection's bias joins the residual LayerNorm kernel.
        fold = kernels.enabled(training) and self.hidden_dropout.rate == 0
        attn = self._project(self.attention_output, context, fold, training)
        bias = self._bias(self.attention_output, fold)
        if self._value_bias_folded(training):  # attention's rows sum to one: P(v + b) = Pv + b
            bias += tf.linalg.matvec(tf.convert_to_tensor(self.attention_output.kernel),
                                     tf.convert_to_tensor(self.value.bias), transpose_a=True)
        attn = self.attention_layer_norm(attn, x, bias, training=training)
        ffn = self.intermediate(attn, training=training)
        ffn = self._project(self.ffn_output, ffn, fold, training)
        return self.output_layer_norm(ffn, attn, self._bias(self.ffn_output, fold),
                                      training=training)

    def _self_attention(self, inputs, residual, attention_bias, batch, seq, training, positions,
                        lengths):
        """(attention context, the residual) at the computed rows: keys and values from every
        row of `inputs`, queries (and the residual) at `positions` when given."""
        k = self.key(inputs, with_bias=not kernels.rewritten("key_bias", training))
        if kernels.rewritten("key_bias", training):  # softmax ignores a shift of a query's scores
            k = kernels.unused_bias(k, tf.convert_to_tensor(self.key.bias))
        v = self.value(inputs, with_bias=not self._value_bias_folded(training))
        if self._value_bias_folded(training):
            v = kernels.unused_bias(v, tf.convert_to_tensor(self.value.bias))
        rows = seq
        if positions is not None:
            rows = positions.shape[1] or tf.shape(positions)[1]

            def pick(t):
                t = tf.gather(tf.reshape(t, [batch, seq, -1]), positions, batch_dims=1)
                return tf.reshape(t, [batch * rows, -1])
            same = inputs is residual
            residual = pick(residual)
            inputs = residual if same else pick(inputs)
        q = self.query(inputs)
        if attention.use_fused(q.dtype, batch, rows, seq, self.head_size,
                               self.attention_dropout.rate, kernels.enabled(training)):
            q_lengths = lengths if positions is None else tf.fill([batch], rows)
            return self._fused_attention(q, k, v, batch, rows, seq, q_lengths, lengths), residual
        return self._attention(q, k, v, attention_bias, batch, rows, seq, training), residual

    def _attention(self, q, k, v, attention_bias, batch, rows, seq, training):
        k = self._split_heads(k, batch, seq)
        v = self._split_heads(v, batch, seq)
        fused = kernels.enabled(training)
        if not fused:  # the kernel scales the scores for free; here q is the smaller tensor
            q *= tf.cast(self.scale, q.dtype)
        scores = tf.matmul(self._split_heads(q, batch, rows), k, transpose_b=True)
        # Masked softmax in float32: bfloat16/float16 scores lose the small probabilities.
        bias = tf.cast(attention_bias, tf.float32)
        probs = (kernels.masked_softmax(scores, bias, self.scale) if fused
                 else kernels.softmax_reference(scores, bias))
        probs = self.attention_dropout(probs, training=training)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
        return tf.reshape(context, [batch * rows, self.num_heads * self.head_size])

    def _fused_attention(self, q, k, v, batch, rows, seq, q_lengths, kv_lengths):
        heads = [self.num_heads, self.head_size]
        context = attention.fused_attention(
            tf.reshape(q, [batch, rows, *heads]), tf.reshape(k, [batch, seq, *heads]),
            tf.reshape(v, [batch, seq, *heads]), q_lengths, kv_lengths, self.scale,
            self.attention_dropout.rate)
        return tf.reshape(context, [batch * rows, self.num_heads * self.head_size])

    def _value_bias_folded(self, training):
        """The value bias joins the output projection's (b_v·W_o, into the LayerNorm kernel):
        exact where attention's probabilities sum to one (no attention dropout)."""
        return (kernels.rewritten("value_bias", training) and not self.pre_ln
                and self.hidden_dropout.rate == 0 and self.attention_dropout.rate == 0)

    def _project(self, dense, x, fold, training):
        return self.hidden_dropout(dense(x, with_bias=not fold), training=training)

    @staticmethod
    def _bias(dense, fold):
        return tf.convert_to_tensor(dense.bias) if fold else None
