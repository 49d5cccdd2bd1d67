"""AlbertMultipleChoice (RACE): each choice's pooled output → dropout → the original
`output_weights` [1, H] / `output_bias` [1] score, softmax over the choices."""

import keras
import tensorflow as tf

from albert_tf.modeling.heads import float32_logits
from albert_tf.modeling.task_model import TaskModel, example_weights

HEAD_NAMES = ("output_weights", "output_bias")
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(TaskModel):
    """Scores [batch, choices, length] inputs; outputs `logits` [batch, choices] float32 and
    `probabilities`. `encoder` is an AlbertConfig or an encoder layer (TaskModel).
    Features may carry `label_ids` (the right choice) and `is_real_example` (weight)."""

    def __init__(self, encoder, dropout_prob=0.1, **kwargs):
        kwargs.setdefault("name", "albert_multiple_choice")
        super().__init__(encoder, **kwargs)
        self.dropout_prob = float(dropout_prob)
        self.dropout = keras.layers.Dropout(self.dropout_prob, dtype=self.dtype_policy)
        self.output_weights = self.add_weight(
            name="output_weights", shape=(1, self.config.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02))
        self.output_bias = self.add_weight(name="output_bias", shape=(1,), initializer="zeros")

    @classmethod
    def from_pretrained(cls, path, config=None, **kwargs):
        """Encoder (and head, when the checkpoint has one) from any checkpoint."""
        return super().from_pretrained(path, config=config, allow_missing=HEAD_NAMES, **kwargs)

    def get_config(self):
        return {"encoder": self.config.to_dict(), "dropout_prob": self.dropout_prob,
                "name": self.name}

    def call(self, inputs, training=None):
        ids = inputs["input_word_ids"]
        shape = tf.shape(ids)
        flat = {k: tf.reshape(inputs[k], [-1, shape[-1]]) for k in ENCODER_INPUTS if k in inputs}
        pooled = self.encoder.pooled_output(flat, training=training)
        pooled = self.dropout(pooled, training=training)
        scores = float32_logits(pooled, self.output_weights, self.output_bias)
        logits = tf.reshape(scores, shape[:-1])
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, -1)}

    # The trainer's task protocol: weighted sums, so any split of a batch gives the global mean.
    LOSS_SUM_NAMES = ("loss_sum", "correct_sum", "example_count")

    def denominators(self, features):
        return {"example_count": tf.reduce_sum(example_weights(features))}

    def per_example_loss(self, features, outputs):
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                              logits=outputs["logits"])

    def loss_sums(self, features, outputs):
        weights = example_weights(features)
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
        hit = tf.equal(tf.argmax(outputs["logits"], -1, output_type=tf.int32), labels)
        return {"loss_sum": tf.reduce_sum(self.per_example_loss(features, outputs) * weights),
                "correct_sum": tf.reduce_sum(tf.cast(hit, tf.float32) * weights),
                "example_count": tf.reduce_sum(weights)}

    def replica_loss(self, sums, denominators):
        return sums["loss_sum"] / tf.maximum(denominators["example_count"], 1.0)

    def metrics_from_sums(self, sums):
        count = max(sums["example_count"], 1.0)
        return {"loss": sums["loss_sum"] / count, "accuracy": sums["correct_sum"] / count}

    def prediction_outputs(self, features, outputs):
        """Per-example tensors that Trainer.predict gathers."""
        return {"logits": outputs["logits"], "probabilities": outputs["probabilities"],
                "per_example_loss": self.per_example_loss(features, outputs),
                "label_ids": tf.reshape(features["label_ids"], [-1]),
                "is_real_example": example_weights(features),
                "example_index": tf.reshape(features["example_index"], [-1])}

    def tf1_weights(self):
        """Encoder weights plus the original top-level head `output_weights`, `output_bias`."""
        out = dict(self.encoder.tf1_weights())
        out["output_weights"] = self.output_weights
        out["output_bias"] = self.output_bias
        return out

