"""What the sentence classification tasks (GLUE, your own data) share: the classifier head from
a `LabelSet`, labels.json, the stuck-run checks, the original's prediction files and the
raw-string serving export."""

import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data.labeled_text import saved_labels
from albert_tf.files import atomic_write_text
from albert_tf.formats.resolve import resolve_checkpoint
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tasks.base import FinetuningTask
from albert_tf.training.stuck import constant_loss


def checkpoint_labels(init_checkpoint):
    """(LabelSet or None, the directory it would be read from) of the classifier at
    `init_checkpoint`: its labels.json, or a Hugging Face id2label, beside it."""
    _, _, config = resolve_checkpoint(init_checkpoint)  # the model's files are beside it
    directory = os.path.dirname(config) if config else None
    return (saved_labels(directory) if directory else None), directory or init_checkpoint


class ClassificationTask(FinetuningTask):
    """A task that classifies (or scores) one text or a pair with `AlbertClassifier`.

    A subclass gives `label_set` (a `data.labeled_text.LabelSet`: problem type, label names,
    multi-label thresholds, regression target, windows) and `text_keys` (the serving inputs:
    `text_a`, plus `text_b` for pairs), and may give `class_weights` (one loss weight per label)
    and `serving_windows()`. `threshold_to_export`: a constant the serving export also returns
    as `threshold`.
    """

    head_names = ("output_weights", "output_bias")
    exportable = True
    class_weights = None
    last_block_rows = 1  # a sentence head: the last block runs at [CLS] only

    def __init__(self, tokenizer, max_seq_length, cache_dir, classifier_dropout=0.1,
                 threshold_to_export=None):
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.cache_dir = cache_dir
        self.classifier_dropout = classifier_dropout
        self.threshold_to_export = threshold_to_export

    def write_labels(self, output_dir):
        """labels.json: the label names (and problem type) that `predict`, the conversions and
        the exports read."""
        self.label_set.save(output_dir)

    def align_warm_head(self, model, init_checkpoint):
        """A classifier head whose labels (its labels.json, a Hugging Face id2label) are this
        task's in another order gets its rows reordered to this task's (a row is a label, not a
        position); one with other labels is said to be read by position."""
        theirs, _ = checkpoint_labels(init_checkpoint)
        ours = self.label_set.labels
        # (another count: the head was left at its initial values, allow_reshaped)
        if (not theirs or self.label_set.is_regression or theirs.is_regression
                or len(theirs.labels) != len(ours) or tuple(theirs.labels) == tuple(ours)):
            return
        if sorted(theirs.labels) != sorted(ours):
            logging.warning("The head of %s was trained for the labels %s; this task's are %s: "
                            "its rows are read in that order", init_checkpoint,
                            ", ".join(theirs.labels), ", ".join(ours))
            return
        order = [list(theirs.labels).index(name) for name in ours]
        model.output_weights.assign(tf.gather(model.output_weights, order))
        model.output_bias.assign(tf.gather(model.output_bias, order))
        logging.info("The head of %s orders its labels %s: its rows reordered to this task's "
                     "%s", init_checkpoint, ", ".join(theirs.labels), ", ".join(ours))

    def build_model(self, encoder):
        label_set = self.label_set
        return AlbertClassifier(encoder, label_set.num_labels, self.classifier_dropout,
                                regression=label_set.is_regression,
                                multi_label=label_set.is_multi_label,
                                class_weights=self.class_weights, target=label_set.target)

    def constant_loss(self, features):
        """The training loss of predicting the label frequencies whatever the input."""
        labels = features["label_ids"]
        if self.label_set.target:  # the head's loss is in standard deviations
            labels = (labels - self.label_set.target[0]) / self.label_set.target[1]
        return constant_loss(labels, self.label_set.is_regression,
                             self.label_set.is_multi_label)

    def predicted_classes(self, features, outputs):
        """The predicted labels (None for regression and multi-label)."""
        if self.label_set.is_regression or self.label_set.is_multi_label:
            return None
        return np.asarray(self.label_set.labels)[np.argmax(outputs["logits"], -1)]

    def serving_windows(self):
        """(stride, pool) when the serving export reads long texts in windows, else None."""
        return None

    def export(self, model, export_dir, lite_options=None, output_dir=None):
        """The raw-string serving SavedModel (probabilities and label strings; regression:
        predictions; multi-label: each label's `above_threshold`), export_dir/classifier.tflite
        (ids in, probabilities/predictions and logits out, at [1, max_seq_length]),
        classifier_text.tflite (the same from strings) and, for one-text classification,
        classifier_task_library.tflite (the TFLite Task Library's BertNLClassifier runs it)."""
        # serving.finetuned loads tensorflow-text: only runs that export import it.
        from albert_tf.serving.finetuned import export_finetuned

        regression, multi_label = self.label_set.is_regression, self.label_set.is_multi_label
        task_library = None
        if (regression or multi_label or len(self.text_keys) > 1
                or not self.tokenizer.do_lower_case):
            logging.info("No classifier_task_library.tflite: the TFLite Task Library's "
                         "BertNLClassifier takes one lowercased text and gives one class")
        else:
            task_library = {"probabilities": "probability"}
        written = export_finetuned(
            model, export_dir, self.tokenizer.asset_file, self.tokenizer.do_lower_case,
            self.max_seq_length, self.text_keys, self._serving_outputs,
            tflite_name="classifier.tflite", tflite_output_fn=self._numeric_outputs,
            pad_to_longest=True, lite_options=lite_options,
            labels=None if regression else self.label_set.labels, task_library=task_library,
            windows=self.serving_windows())
        self.write_labels(export_dir)
        return written

    def _numeric_outputs(self, outputs):
        if self.label_set.is_regression:
            return {"predictions": outputs["predictions"], "logits": outputs["logits"]}
        return {"probabilities": outputs["probabilities"], "logits": outputs["logits"]}

    def _serving_outputs(self, outputs):
        label_set = self.label_set
        if label_set.is_regression:
            out = {"predictions": outputs["predictions"]}
        elif label_set.is_multi_label:  # one column per label: at or above that label's threshold
            thresholds = label_set.thresholds or (0.5,) * len(label_set.labels)
            out = {"probabilities": outputs["probabilities"],
                   "above_threshold": outputs["probabilities"] >= tf.constant(thresholds)}
        else:
            out = {"probabilities": outputs["probabilities"],
                   "labels": tf.gather(tf.constant(label_set.labels),
                                       tf.argmax(outputs["logits"], -1))}
        if self.threshold_to_export is not None:
            out["threshold"] = tf.fill(tf.shape(outputs["logits"])[:1],
                                       tf.constant(self.threshold_to_export, tf.float32))
        return out

    def write_predictions(self, name, features, outputs, output_dir):
        """The original's test_results<suffix>.tsv (each class's probability; regression: the
        score) and submit_results<suffix>.tsv (id and predicted label)."""
        suffix = "" if name == "test" else name[len("test"):] if name.startswith("test") else (
            "_" + name)
        guids = features["guids"]
        if self.label_set.is_regression:
            values = outputs["predictions"]
            results = "".join(f"{v:.6f}\n" for v in values)
            submit = "".join(f"{g}\t{v:.3f}\n" for g, v in zip(guids, values))
        else:
            probabilities = outputs["probabilities"]
            labels = [self.label_set.labels[i] for i in np.argmax(probabilities, -1)]
            results = "".join("\t".join(f"{p:.6f}" for p in row) + "\n" for row in probabilities)
            submit = "".join(f"{g}\t{label}\n" for g, label in zip(guids, labels))
        atomic_write_text(os.path.join(output_dir, f"test_results{suffix}.tsv"), results)
        atomic_write_text(os.path.join(output_dir, f"submit_results{suffix}.tsv"),
                          "index\tprediction\n" + submit)
        logging.info("Wrote %d %s predictions to %s", len(guids), name,
                     os.path.join(output_dir, f"submit_results{suffix}.tsv"))
