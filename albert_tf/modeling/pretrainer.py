"""AlbertPretrainer: the encoder with the masked-LM and sentence-order heads."""

import keras
import tensorflow as tf

from albert_tf.formats.checkpoints import PretrainedMixin
from albert_tf.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling import kernels
from albert_tf.modeling.step_kernels import traced_with
from albert_tf.modeling.heads import MaskedLMHead, SentenceOrderHead


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(PretrainedMixin, keras.Model):
    """Encoder + MLM head (tied to the word embeddings) + SOP head.

    Inputs: the encoder dict plus `masked_lm_positions` [batch, P]. Outputs: the encoder's plus
    `mlm_logits` [batch, P, vocab] and `sop_logits` [batch, 2], both float32. When training
    (with the fused kernels, see `kernels.unfused`), the last layer runs only where the losses
    look, [CLS] and the masked positions: the outputs are then the logits and `pooled_output`.
    """

    def __init__(self, config, sop_weight=1.0, step_kernels=None, **kwargs):
        kwargs.setdefault("name", "albert_pretrainer")
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        self.config = config
        self.step_kernels = step_kernels  # the encoder's and the MLM head's (step_kernels.py)
        policy = self.dtype_policy
        self.encoder = AlbertEncoder(config, dtype=policy)
        projection = (lambda: self.encoder.embeddings.word_projection) if (
            config.embedding_layout == "brightmart") else None
        self.masked_lm = MaskedLMHead(config, self.encoder.get_embedding_table, projection,
                                      name="cls_predictions", dtype=policy)
        self.sentence_order = SentenceOrderHead(config, name="cls_seq_relationship",
                                                dtype=policy)
        self.sop_weight = float(sop_weight)
        self._trackers = {name: keras.metrics.Mean(name=name) for name in METRIC_NAMES}

    def get_config(self):
        return {"config": self.config.to_dict(), "sop_weight": self.sop_weight, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, inputs, training=None):
        with traced_with(self.step_kernels):
            return self._predict(inputs, training)

    def _predict(self, inputs, training):
        positions = inputs["masked_lm_positions"]
        if kernels.enabled(training):
            encoded = self.encoder(inputs, training=training, output_positions=positions)
            outputs = {"pooled_output": encoded["pooled_output"],
                       "mlm_logits": self.masked_lm(encoded["sequence_output"])}
        else:
            outputs = dict(self.encoder(inputs, training=training))
            outputs["mlm_logits"] = self.masked_lm(outputs["sequence_output"], positions)
        outputs["sop_logits"] = self.sentence_order(outputs["pooled_output"])
        return outputs

    @property
    def metrics(self):
        return list(self._trackers.values())

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """MLM + sop_weight × SOP from the record features in `x`; `compile` needs no loss."""
        sums = self.loss_sums(x, y_pred)
        for name, value in self.metrics_from_sums(sums).items():
            self._trackers[name].update_state(value)
        return self.replica_loss(sums, sums)

    # The trainer's task protocol: sums that add up across replicas and micro-batches.
    LOSS_SUM_NAMES = ("mlm_loss_sum", "mlm_correct_sum", "mlm_weight_sum", "sop_loss_sum",
                      "sop_correct_sum", "sop_count")

    def denominators(self, features):
        """What the loss divides by, computable from the batch alone (all-reduced by the trainer)."""
        return {"mlm_weight_sum": tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                                        tf.float32)),
                "sop_count": tf.cast(tf.shape(features["next_sentence_labels"])[0], tf.float32)}

    def loss_sums(self, features, outputs):
        return pretraining_loss_sums(features, outputs)

    def replica_loss(self, sums, denominators):
        """This batch's share of the loss of the whole (global) batch the denominators describe:
        the original MLM loss Σ w·nll / (Σ w + 1e-5) plus sop_weight × the mean SOP loss."""
        mlm = sums["mlm_loss_sum"] / (denominators["mlm_weight_sum"] + 1e-5)
        return mlm + self.sop_weight * sums["sop_loss_sum"] / denominators["sop_count"]

    def metrics_from_sums(self, sums):
        """Loss and metrics with the original names, from sums over any number of batches."""
        mlm_weights = sums["mlm_weight_sum"] + 1e-5
        out = {"masked_lm_loss": sums["mlm_loss_sum"] / mlm_weights,
               "masked_lm_accuracy": sums["mlm_correct_sum"] / mlm_weights,
               "sentence_order_loss": sums["sop_loss_sum"] / sums["sop_count"],
               "sentence_order_accuracy": sums["sop_correct_sum"] / sums["sop_count"]}
        out["loss"] = out["masked_lm_loss"] + self.sop_weight * out["sentence_order_loss"]
        return out

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return {name: tracker.result() for name, tracker in self._trackers.items()}

    def tf1_weights(self):
        """Encoder weights plus the heads under their original `cls/...` names."""
        out = self.encoder.tf1_weights()
        mlm, sop = self.masked_lm, self.sentence_order
        out.update({
            "cls/predictions/transform/dense/kernel": mlm.dense.kernel,
            "cls/predictions/transform/dense/bias": mlm.dense.bias,
            "cls/predictions/transform/LayerNorm/gamma": mlm.layer_norm.gamma,
            "cls/predictions/transform/LayerNorm/beta": mlm.layer_norm.beta,
            "cls/predictions/output_bias": mlm.output_bias,
            "cls/seq_relationship/output_weights": sop.output_weights,
            "cls/seq_relationship/output_bias": sop.output_bias,
        })
        return out


METRIC_NAMES = ("loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy",
                "sentence_order_loss")


def pretraining_loss_sums(features, outputs):
    """Sums behind the original losses and accuracies, so that any split of a global batch
    (replicas, accumulation steps) can be normalised exactly: the MLM loss is
    Σ w·nll / Σ w over masked positions, the SOP loss a mean over sequences."""
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    mlm_ids = tf.cast(features["masked_lm_ids"], tf.int32)
    mlm_logits = outputs["mlm_logits"]
    mlm_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=mlm_ids, logits=mlm_logits)
    mlm_hit = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), mlm_ids),
                      tf.float32)
    sop_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    sop_logits = outputs["sop_logits"]
    sop_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sop_labels, logits=sop_logits)
    sop_hit = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), sop_labels),
                      tf.float32)
    return {"mlm_loss_sum": tf.reduce_sum(mlm_nll * weights),
            "mlm_correct_sum": tf.reduce_sum(mlm_hit * weights),
            "mlm_weight_sum": tf.reduce_sum(weights),
            "sop_loss_sum": tf.reduce_sum(sop_nll),
            "sop_correct_sum": tf.reduce_sum(sop_hit),
            "sop_count": tf.cast(tf.size(sop_labels), tf.float32)}
