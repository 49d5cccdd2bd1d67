"""AlbertTokenClassifier: sequence output → dropout → a tag for every piece (NER, POS)."""

import keras
import tensorflow as tf

from albert_tf.modeling.heads import float32_logits
from albert_tf.modeling.task_model import (POOLER_PATHS, UNUSED_POOLER, TaskModel,
                                           example_weights)

HEAD_NAMES = ("token_classifier/",)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(TaskModel):
    """Token classification: `logits` and `probabilities` [batch, length, num_labels] (float32)
    on every piece of the sequence output. The head is `token_classifier/output_weights`
    [num_labels, hidden] and `token_classifier/output_bias` in checkpoints.

    Its objective (the scripts', and `compile` without a loss) reads `tag_ids` (label + 1 on
    the pieces that carry a label, 0 elsewhere) and `tag_mask` (1 on each word's scored first
    piece) from the features: cross-entropy averaged over the labelled pieces of the batch.
    """

    unreached = POOLER_PATHS

    def __init__(self, encoder, num_labels, classifier_dropout=0.1, **kwargs):
        kwargs.setdefault("name", "albert_token_classifier")
        super().__init__(encoder, **kwargs)
        self.num_labels = int(num_labels)
        self.classifier_dropout = float(classifier_dropout)
        self.dropout = keras.layers.Dropout(self.classifier_dropout, dtype=self.dtype_policy)
        self.output_weights = self.add_weight(
            name="token_classifier_output_weights",
            shape=(self.num_labels, self.config.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02))
        self.output_bias = self.add_weight(name="token_classifier_output_bias",
                                           shape=(self.num_labels,), initializer="zeros")

    @classmethod
    def from_pretrained(cls, path, config=None, num_labels=2, **kwargs):
        """Encoder (and head, when the checkpoint has one of this shape) from any checkpoint."""
        return super().from_pretrained(path, config=config, num_labels=num_labels,
                                       allow_missing=HEAD_NAMES + UNUSED_POOLER, **kwargs)

    def get_config(self):
        return {"encoder": self.config.to_dict(), "num_labels": self.num_labels,
                "classifier_dropout": self.classifier_dropout, "name": self.name}

    def call(self, inputs, training=None):
        encoder_inputs = {k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")
                          if k in inputs}
        sequence = self.encoder(encoder_inputs, training=training)["sequence_output"]
        sequence = self.dropout(sequence, training=training)
        logits = float32_logits(sequence, self.output_weights, self.output_bias)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, -1)}

    # The trainer's task protocol: sums over labelled pieces, so any split of a batch gives
    # the global mean.
    LOSS_SUM_NAMES = ("loss_sum", "correct_sum", "token_count")

    def _labels(self, features):
        """(label ids, weight per piece): weight 1 on labelled scored pieces of real examples."""
        tags = tf.cast(features["tag_ids"], tf.int32)
        labelled = tf.cast(features["tag_mask"], tf.float32) * tf.cast(tags > 0, tf.float32)
        return tf.maximum(tags - 1, 0), labelled * example_weights(features)[:, None]

    def denominators(self, features):
        return {"token_count": tf.reduce_sum(self._labels(features)[1])}

    def _token_sums(self, features, outputs):
        labels, weights = self._labels(features)
        logits = outputs["logits"]
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        hit = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
        return nll * weights, hit * weights, weights

    def loss_sums(self, features, outputs):
        loss, hit, weights = self._token_sums(features, outputs)
        return {"loss_sum": tf.reduce_sum(loss), "correct_sum": tf.reduce_sum(hit),
                "token_count": tf.reduce_sum(weights)}

    def replica_loss(self, sums, denominators):
        return sums["loss_sum"] / tf.maximum(denominators["token_count"], 1.0)

    def metrics_from_sums(self, sums):
        count = max(sums["token_count"], 1.0)
        return {"loss": sums["loss_sum"] / count, "accuracy": sums["correct_sum"] / count}

    def prediction_outputs(self, features, outputs):
        """Per window: the best tag and its probability at every piece (padded to
        max_position_embeddings, so that batches and replicas of any length stack), and the
        window's loss sum and labelled-piece count."""
        loss, _, weights = self._token_sums(features, outputs)
        probabilities = outputs["probabilities"]
        pad = [[0, 0], [0, self.config.max_position_embeddings - tf.shape(probabilities)[1]]]
        return {"tag_ids": tf.pad(tf.argmax(probabilities, -1, output_type=tf.int32), pad),
                "tag_probability": tf.pad(tf.reduce_max(probabilities, -1), pad),
                "loss_sum": tf.reduce_sum(loss, -1), "token_count": tf.reduce_sum(weights, -1),
                "is_real_example": example_weights(features),
                "example_index": tf.reshape(features["example_index"], [-1])}

    def tf1_weights(self):
        out = dict(self.encoder.tf1_weights())
        out["token_classifier/output_weights"] = self.output_weights
        out["token_classifier/output_bias"] = self.output_bias
        return out
