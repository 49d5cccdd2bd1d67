"""AlbertSquad: the original SQuAD heads on the sequence output.

v1: `cls/squad/output_weights` [2, H] / `output_bias` [2] give start and end logits.
v2 (`v2_head="answer_class"`): the original's answerability head: start logits; end logits
from concat(h_t, h_start) (the gold start in training, each of the top `start_n_top` starts at
inference, keeping the top `end_n_top` ends of each); `cls_logits` from
concat(Σ softmax(start)·h, h_CLS). v2 (`v2_head="span"`): v1's head, the [CLS] span the answer
"none" (as BERT's SQuAD 2.0, TF Model Garden's and transformers' AlbertForQuestionAnswering,
whose SQuAD 2.0 models it loads); `null_logits` is that span's score.
Positions that cannot hold an answer (query, [SEP], padding: `p_mask` or `input_mask`) are
masked in both versions; [CLS] stays available as the no-answer position.
"""

import keras
import tensorflow as tf

from albert_tf.formats.checkpoints import assign_weights, read_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.modeling.task_model import (POOLER_PATHS, UNUSED_POOLER, TaskModel,
                                           example_weights)

V1_HEAD = ("cls/squad/",)
V2_HEAD = ("start_logits/", "end_logits/", "answer_class/")
V2_HEADS = ("answer_class", "span")  # the heads a v2 model may have: V2_HEAD, V1_HEAD
NEG_INF = -1e30


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSquad(TaskModel):
    """Span extraction for SQuAD v1.1 (`version_2=False`) or v2.0 (`version_2=True`, with
    the original's `v2_head="answer_class"` or v1's `"span"`).

    Training outputs: v1 and the v2 span head `start_logits`/`end_logits` [B, T]; the v2
    answer_class head `start_log_probs`, `end_log_probs` (given `start_positions`) and
    `cls_logits` [B]. Inference adds the fixed-size top-k outputs that `prediction_outputs`
    returns (and the v2 span head's `null_logits` [B]).
    """

    unreached = POOLER_PATHS

    def __init__(self, encoder, version_2=False, n_best_size=20, start_n_top=5, end_n_top=5,
                 dropout_prob=0.1, v2_head="answer_class", **kwargs):
        kwargs.setdefault("name", "albert_squad")
        super().__init__(encoder, **kwargs)
        if v2_head not in V2_HEADS:
            raise ValueError(f"v2_head={v2_head!r}: one of {', '.join(V2_HEADS)}")
        self.version_2, self.v2_head = bool(version_2), v2_head
        # The original's v2 head: a beam over starts and ends, and an answerability logit.
        self.beam = self.version_2 and v2_head == "answer_class"
        self.n_best_size, self.start_n_top, self.end_n_top = n_best_size, start_n_top, end_n_top
        self.dropout_prob = float(dropout_prob)
        h = self.config.hidden_size
        self._head = {}
        if not self.beam:
            self._add("cls/squad/output_weights", (2, h))
            self._add("cls/squad/output_bias", (2,), "zeros")
            return
        self._add("start_logits/dense/kernel", (h, 1))
        self._add("start_logits/dense/bias", (1,), "zeros")
        self._add("end_logits/dense_0/kernel", (2 * h, h))
        self._add("end_logits/dense_0/bias", (h,), "zeros")
        self._add("end_logits/LayerNorm/gamma", (h,), "ones")
        self._add("end_logits/LayerNorm/beta", (h,), "zeros")
        self._add("end_logits/dense_1/kernel", (h, 1))
        self._add("end_logits/dense_1/bias", (1,), "zeros")
        self._add("answer_class/dense_0/kernel", (2 * h, h))
        self._add("answer_class/dense_0/bias", (h,), "zeros")
        self._add("answer_class/dense_1/kernel", (h, 1))
        self.dropout = keras.layers.Dropout(self.dropout_prob, dtype="float32")

    def _add(self, name, shape, initializer=None):
        # The heads compute in float32 on the float32 sequence output under every policy:
        # autocast would hand them bfloat16/float16 copies inside `call`.
        initializer = initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        self._head[name] = self.add_weight(name=name.replace("/", "_"), shape=shape,
                                           initializer=initializer, dtype="float32",
                                           autocast=False)

    def keras_outputs(self):
        if self.beam:  # the end scores are given the gold start (`start_positions` in x)
            return ("start_log_probs", "end_log_probs", "cls_logits")
        return ("start_logits", "end_logits")

    @property
    def head_names(self):
        return V2_HEAD if self.beam else V1_HEAD

    def get_config(self):
        return {"encoder": self.config.to_dict(), "version_2": self.version_2,
                "n_best_size": self.n_best_size, "start_n_top": self.start_n_top,
                "end_n_top": self.end_n_top, "dropout_prob": self.dropout_prob,
                "v2_head": self.v2_head, "name": self.name}

    @classmethod
    def from_pretrained(cls, path, config=None, **kwargs):
        """Encoder (and head, when present) from any supported checkpoint."""
        arrays, config_path, _ = read_checkpoint(path)
        config = config or config_path
        if config is None:
            raise ValueError(f"no albert_config.json beside checkpoint {path}; pass config=")
        if isinstance(config, str):
            config = AlbertConfig.from_json_file(config)
        model = cls(config, **kwargs)
        model.load_checkpoint(path)
        return model

    def load_checkpoint(self, path, init_from_group0=False, allow_missing=(),
                        allow_reshaped=()):
        """Like PretrainedMixin's, ignoring the pretraining heads under cls/ and leaving an
        absent SQuAD head (and pooler) at its initial values."""
        arrays, _, fmt = read_checkpoint(path)
        arrays = {k: v for k, v in arrays.items()
                  if not k.startswith("cls/") or k.startswith("cls/squad/")}
        allowed = tuple(allow_missing) + self.head_names + UNUSED_POOLER
        return assign_weights(self, arrays, source=f"{fmt} checkpoint {path}",
                              init_from_group0=init_from_group0, allow_missing=allowed,
                              allow_reshaped=allow_reshaped)

    def tf1_weights(self):
        out = dict(self.encoder.tf1_weights())
        out.update(self._head)
        return out

    # ---- forward ------------------------------------------------------------------------

    def call(self, inputs, training=None):
        encoder_inputs = {k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
        sequence = self.encoder(encoder_inputs, training=training)["sequence_output"]
        sequence = tf.cast(sequence, tf.float32)
        invalid = 1 - tf.cast(inputs["input_mask"], tf.float32)
        if "p_mask" in inputs:
            invalid = tf.maximum(invalid, tf.cast(inputs["p_mask"], tf.float32))
        if not self.beam:
            return self._v1(sequence, invalid, training)
        return self._v2(sequence, invalid, inputs.get("start_positions"), training)

    def _v1(self, sequence, invalid, training):
        logits = tf.einsum("bth,kh->btk", sequence, self._head["cls/squad/output_weights"])
        logits += self._head["cls/squad/output_bias"]
        out = {"start_logits": _masked(logits[..., 0], invalid),
               "end_logits": _masked(logits[..., 1], invalid)}
        return out if training else self.eval_outputs(out)

    def eval_outputs(self, outputs):
        """v1 and the v2 span head: the outputs with the top n_best_size start and end logits
        and positions added (what prediction_outputs takes), from the start and end logits
        alone, e.g. an ids-in .tflite's, and for v2 `null_logits`, the [CLS] span's score; the
        answer_class head: as they are."""
        if self.beam:
            return outputs
        out, k = dict(outputs), self.n_best_size
        out["start_top_logits"], out["start_top_index"] = _top_k(out["start_logits"], k)
        out["end_top_logits"], out["end_top_index"] = _top_k(out["end_logits"], k)
        if self.version_2:
            out["null_logits"] = out["start_logits"][:, 0] + out["end_logits"][:, 0]
        return out

    def _dense(self, x, scope, activation=None):
        x = tf.matmul(x, self._head[f"{scope}/kernel"])
        if f"{scope}/bias" in self._head:
            x += self._head[f"{scope}/bias"]
        return activation(x) if activation else x

    def _end_log_probs(self, sequence, starts, invalid):
        """End log-probs given start features: starts [B, H] → [B, T]; [B, K, H] → [B, K, T]."""
        if starts.shape.rank == 2:
            seq, start = sequence, tf.broadcast_to(starts[:, None], tf.shape(sequence))
        else:
            shape = tf.concat([tf.shape(starts)[:2], tf.shape(sequence)[1:]], 0)
            seq = tf.broadcast_to(sequence[:, None], shape)
            start = tf.broadcast_to(starts[:, :, None], shape)
            invalid = invalid[:, None, :]
        x = self._dense(tf.concat([seq, start], -1), "end_logits/dense_0", tf.tanh)
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        x = (x - mean) * tf.math.rsqrt(variance + 1e-12)
        x = x * self._head["end_logits/LayerNorm/gamma"] + self._head["end_logits/LayerNorm/beta"]
        logits = tf.squeeze(self._dense(x, "end_logits/dense_1"), -1)
        return tf.nn.log_softmax(_masked(logits, invalid), -1)

    def _v2(self, sequence, invalid, start_positions, training):
        start_logits = _masked(tf.squeeze(self._dense(sequence, "start_logits/dense"), -1),
                               invalid)
        out = {"start_log_probs": tf.nn.log_softmax(start_logits, -1)}
        if start_positions is not None:
            positions = tf.cast(tf.reshape(start_positions, [-1]), tf.int32)
            gold = tf.gather(sequence, positions, batch_dims=1)
            out["end_log_probs"] = self._end_log_probs(sequence, gold, invalid)
        if not training:
            top_lp, top_index = _top_k(out["start_log_probs"], self.start_n_top)
            length = tf.shape(sequence)[1]
            starts = tf.gather(sequence, tf.minimum(top_index, length - 1), batch_dims=1)
            end_lp = self._end_log_probs(sequence, starts, invalid)
            end_top_lp, end_top_index = _top_k(end_lp, self.end_n_top)  # [B, k1, k2]
            k = self.start_n_top * self.end_n_top
            out.update(start_top_log_probs=top_lp, start_top_index=top_index,
                       end_top_log_probs=tf.reshape(end_top_lp, [-1, k]),
                       end_top_index=tf.reshape(end_top_index, [-1, k]))
        start_p = tf.nn.softmax(start_logits, -1)
        start_feature = tf.einsum("bt,bth->bh", start_p, sequence)
        x = self._dense(tf.concat([start_feature, sequence[:, 0]], -1), "answer_class/dense_0",
                        tf.tanh)
        x = self.dropout(x, training=training)
        out["cls_logits"] = tf.squeeze(self._dense(x, "answer_class/dense_1"), -1)
        return out

    # ---- the trainer's task protocol ------------------------------------------------------

    LOSS_SUM_NAMES = ("loss_sum", "example_count")

    def denominators(self, features):
        return {"example_count": tf.reduce_sum(example_weights(features))}

    def per_example_loss(self, features, outputs):
        """v1 and the v2 span head: (CE_start + CE_end) / 2 (an unanswerable question's span
        is [CLS]'s); the answer_class head: that plus 0.5 · sigmoid CE of cls_logits."""
        starts = tf.cast(tf.reshape(features["start_positions"], [-1]), tf.int32)
        ends = tf.cast(tf.reshape(features["end_positions"], [-1]), tf.int32)
        if not self.beam:
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits
            return 0.5 * (ce(labels=starts, logits=outputs["start_logits"])
                          + ce(labels=ends, logits=outputs["end_logits"]))
        span = -0.5 * (tf.gather(outputs["start_log_probs"], starts, batch_dims=1)
                       + tf.gather(outputs["end_log_probs"], ends, batch_dims=1))
        labels = tf.cast(tf.reshape(features["is_impossible"], [-1]), tf.float32)
        cls = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=outputs["cls_logits"])
        return span + 0.5 * cls

    def loss_sums(self, features, outputs):
        weights = example_weights(features)
        return {"loss_sum": tf.reduce_sum(self.per_example_loss(features, outputs) * weights),
                "example_count": tf.reduce_sum(weights)}

    def replica_loss(self, sums, denominators):
        return sums["loss_sum"] / tf.maximum(denominators["example_count"], 1.0)

    def metrics_from_sums(self, sums):
        return {"loss": sums["loss_sum"] / max(sums["example_count"], 1.0)}

    @property
    def top_outputs(self):
        """The names of the per-window top-k outputs the answers are picked from."""
        if self.beam:
            return ("start_top_log_probs", "start_top_index", "end_top_log_probs",
                    "end_top_index", "cls_logits")
        return ("start_top_logits", "start_top_index", "end_top_logits", "end_top_index") + (
            ("null_logits",) if self.version_2 else ())

    def prediction_outputs(self, features, outputs):
        """Fixed-size per-feature outputs: the top-k spans' scores (and v2's no-answer
        scores)."""
        out = {k: outputs[k] for k in self.top_outputs}
        out["is_real_example"] = example_weights(features)
        out["example_index"] = tf.reshape(features["example_index"], [-1])
        return out


def _masked(logits, invalid):
    return logits * (1 - invalid) + NEG_INF * invalid


def _top_k(values, k):
    """tf.math.top_k over the last axis, padded with NEG_INF when it is shorter than k."""
    short = tf.maximum(k - tf.shape(values)[-1], 0)
    paddings = tf.concat([tf.zeros([tf.rank(values) - 1, 2], tf.int32),
                          [[0, short]]], 0)
    return tf.math.top_k(tf.pad(values, paddings, constant_values=NEG_INF), k)

