"""AlbertClassifier: pooled output → dropout → the original output_weights/output_bias head."""

import keras
import tensorflow as tf

from albert_tf.modeling.heads import float32_logits
from albert_tf.modeling.task_model import TaskModel, example_weights

HEAD_NAMES = ("output_weights", "output_bias")


def head_outputs(logits, regression=False, multi_label=False, target=None):
    """The head's outputs from its logits [batch, labels]: `predictions` [batch] (regression:
    the logit, or with `target` (mean, std) the logit in those units), or `probabilities`
    (sigmoid per label for multi-label, else softmax)."""
    if regression:
        mean, std = target or (0.0, 1.0)
        return {"logits": logits, "predictions": tf.squeeze(logits, -1) * std + mean}
    if multi_label:
        return {"logits": logits, "probabilities": tf.sigmoid(logits)}
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, -1)}


def pool_windows(outputs, example, count, regression=False, multi_label=False, target=None):
    """A text's outputs from those of its windows (`example`: each window's text, of `count`):
    the head's outputs of the windows' mean logits."""
    logits = tf.math.unsorted_segment_mean(outputs["logits"], example, count)
    return head_outputs(logits, regression, multi_label, target)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(TaskModel):
    """Sentence(-pair) classification, with `num_labels=1, regression=True` regression (STS-B),
    or with `multi_label=True` multi-label classification (a sigmoid per label, `label_ids`
    0/1 rows [batch, num_labels], binary cross-entropy averaged over the labels).

    `encoder` is an AlbertConfig (a new AlbertEncoder is built) or any encoder layer with the
    TF-Hub call API (TaskModel says what it needs; AlbertEncoder, formats.hub.HubEncoder).
    Outputs `logits` [batch, num_labels] float32 and `probabilities` (softmax; regression:
    `predictions` [batch]). Features may carry `label_ids` and `is_real_example` (weight).
    `class_weights` (one per label) scale each example's loss by its label's weight; multi-label:
    they weigh each label's positive examples (the negatives weigh 1). `target` (mean, std)
    of a regression's training scores: the head learns them standardized (its loss is the
    squared error in standard deviations) and predicts in their units.
    With a `preprocessor` (serving.AlbertPreprocessor) it also takes raw strings [batch] or a
    pair of them, tokenized in the graph: `fit(strings, labels)`, `predict(strings)`.
    """

    def __init__(self, encoder, num_labels, classifier_dropout=0.1, regression=False,
                 preprocessor=None, multi_label=False, class_weights=None, target=None,
                 **kwargs):
        kwargs.setdefault("name", "albert_classifier")
        super().__init__(encoder, **kwargs)
        self.num_labels = int(num_labels)
        self.regression = bool(regression)
        if self.regression and self.num_labels != 1:
            raise ValueError(f"regression needs num_labels=1, got {num_labels}")
        self.multi_label = bool(multi_label)
        if self.multi_label and self.regression:
            raise ValueError("a head is multi-label or regression, not both")
        self.class_weights = None if class_weights is None else tuple(map(float, class_weights))
        self.target = None if target is None else tuple(map(float, target))
        if self.target is not None and not (self.regression and self.target[1] > 0):
            raise ValueError(f"target (mean, std > 0) is a regression's, got {target}")
        if self.class_weights is not None and (self.regression or
                                               len(self.class_weights) != self.num_labels):
            raise ValueError(f"class_weights: one per label ({self.num_labels}) of a classifier, "
                             f"got {class_weights}")
        self.classifier_dropout = float(classifier_dropout)
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        self.preprocessor = preprocessor
        self.dropout = keras.layers.Dropout(self.classifier_dropout, dtype=self.dtype_policy)
        hidden = self.config.hidden_size
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_labels, hidden),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_labels,),
                                           initializer="zeros")

    @classmethod
    def from_pretrained(cls, path, config=None, num_labels=2, **kwargs):
        """Encoder (and head, when the checkpoint has one of this shape) from any checkpoint."""
        return super().from_pretrained(path, config=config, num_labels=num_labels,
                                       allow_missing=HEAD_NAMES, **kwargs)

    def keras_outputs(self):
        return ("predictions",) if self.regression else ("logits",)

    def get_config(self):
        return {"encoder": self.config.to_dict(), "num_labels": self.num_labels,
                "classifier_dropout": self.classifier_dropout, "regression": self.regression,
                "multi_label": self.multi_label, "class_weights": self.class_weights,
                "target": self.target,
                "preprocessor": (None if self.preprocessor is None else
                                 keras.saving.serialize_keras_object(self.preprocessor)),
                "name": self.name}

    def call(self, inputs, training=None):
        if self.preprocessor is not None and not isinstance(inputs, dict):
            inputs = self.preprocessor(inputs)  # raw strings (a tuple of two for pairs)
        encoder_inputs = {k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")
                          if k in inputs}
        pooled = self.encoder.pooled_output(encoder_inputs, training=training)
        pooled = self.dropout(pooled, training=training)
        return head_outputs(float32_logits(pooled, self.output_weights, self.output_bias),
                            self.regression, self.multi_label, self.target)

    # The trainer's task protocol: weighted sums, so any split of a batch gives the global mean.
    LOSS_SUM_NAMES = ("loss_sum", "correct_sum", "example_count")

    def denominators(self, features):
        return {"example_count": tf.reduce_sum(example_weights(features))}

    def per_example_loss(self, features, outputs):
        if self.regression:
            labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.float32)
            std = self.target[1] if self.target else 1.0
            return tf.square((outputs["predictions"] - labels) / std)
        if self.multi_label:
            labels = tf.cast(tf.reshape(features["label_ids"], [-1, self.num_labels]), tf.float32)
            if self.class_weights is None:
                loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                               logits=outputs["logits"])
            else:
                loss = tf.nn.weighted_cross_entropy_with_logits(
                    labels, outputs["logits"], tf.constant(self.class_weights, tf.float32))
            return tf.reduce_mean(loss, -1)
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                              logits=outputs["logits"])
        if self.class_weights is not None:
            loss *= tf.gather(tf.constant(self.class_weights, tf.float32), labels)
        return loss

    def loss_sums(self, features, outputs):
        weights = example_weights(features)
        sums = {"loss_sum": tf.reduce_sum(self.per_example_loss(features, outputs) * weights),
                "example_count": tf.reduce_sum(weights)}
        if self.regression:
            sums["correct_sum"] = tf.zeros([])
        elif self.multi_label:  # the share of labels right at 0.5
            labels = tf.cast(tf.reshape(features["label_ids"], [-1, self.num_labels]), tf.bool)
            hit = tf.reduce_mean(tf.cast(tf.equal(outputs["logits"] > 0, labels), tf.float32), -1)
            sums["correct_sum"] = tf.reduce_sum(hit * weights)
        else:
            labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
            hit = tf.equal(tf.argmax(outputs["logits"], -1, output_type=tf.int32), labels)
            sums["correct_sum"] = tf.reduce_sum(tf.cast(hit, tf.float32) * weights)
        return sums

    def replica_loss(self, sums, denominators):
        return sums["loss_sum"] / tf.maximum(denominators["example_count"], 1.0)

    def metrics_from_sums(self, sums):
        count = max(sums["example_count"], 1.0)
        out = {"loss": sums["loss_sum"] / count}
        if not self.regression:
            out["accuracy"] = sums["correct_sum"] / count
        return out

    def prediction_outputs(self, features, outputs):
        """Per-example tensors that Trainer.predict gathers: outputs, loss, labels, bookkeeping."""
        out = {"logits": outputs["logits"],
               "per_example_loss": self.per_example_loss(features, outputs),
               "label_ids": tf.reshape(features["label_ids"],
                                       [-1, self.num_labels] if self.multi_label else [-1]),
               "is_real_example": example_weights(features),
               "example_index": tf.reshape(features["example_index"], [-1])}
        out.update({k: outputs[k] for k in ("probabilities", "predictions") if k in outputs})
        return out

    def tf1_weights(self):
        """Encoder weights plus the original top-level head `output_weights`, `output_bias`."""
        out = dict(self.encoder.tf1_weights())
        out["output_weights"] = self.output_weights
        out["output_bias"] = self.output_bias
        return out
