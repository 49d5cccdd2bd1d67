"""GLUE fine-tuning: the task (features, metrics under the original names, prediction files,
serving export) and its metrics."""

import os

import numpy as np
from absl import logging

from albert_tf.data.features import cached_features
from albert_tf.data.labeled_text import LabelSet
from albert_tf.files import atomic_write_text, file_digest
from albert_tf.training.stuck import constant_loss


def matthews_corrcoef(labels, predictions):
    tp = float(np.sum((predictions == 1) & (labels == 1)))
    tn = float(np.sum((predictions == 0) & (labels == 0)))
    fp = float(np.sum((predictions == 1) & (labels == 0)))
    fn = float(np.sum((predictions == 0) & (labels == 1)))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def f1_score(labels, predictions, positive=1):
    tp = float(np.sum((predictions == positive) & (labels == positive)))
    fp = float(np.sum((predictions == positive) & (labels != positive)))
    fn = float(np.sum((predictions != positive) & (labels == positive)))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def pearson(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator else 0.0


def _ranks(x):
    """Ranks with ties given their average rank."""
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(x, y):
    return pearson(_ranks(x), _ranks(y))


def glue_metrics(task, labels, outputs):
    """Metrics under the original names (eval_accuracy, eval_loss, matthew_corr, pearson, MSE)
    plus f1 (MRPC, QQP) and spearman (STS-B)."""
    result = {"eval_loss": float(np.mean(outputs["per_example_loss"]))}
    if task.is_regression:
        predictions = outputs["predictions"]
        result.update(pearson=pearson(predictions, labels), spearman=spearman(predictions, labels),
                      MSE=float(np.mean((predictions - labels) ** 2)))
        return result
    predictions = np.argmax(outputs["logits"], -1)
    result["eval_accuracy"] = float(np.mean(predictions == labels))
    if task.name == "cola":
        result["matthew_corr"] = matthews_corrcoef(labels, predictions)
    if task.name in ("mrpc", "qqp"):
        result["f1"] = f1_score(labels, predictions)
    return result


class GlueTask:
    """A GLUE task (or your data in a GLUE format) for `run_finetuning`.

    task: a `data.glue.Task` (`glue.get_task("mrpc")`); tokenizer: a FullTokenizer;
    features are cached in `cache_dir`. `threshold_to_export`: a constant the serving export
    also returns as `threshold`.
    """

    head_names = ("output_weights", "output_bias")

    def __init__(self, task, data_dir, tokenizer, max_seq_length, cache_dir,
                 classifier_dropout=0.1, threshold_to_export=None):
        self.task = task
        self.threshold_to_export = threshold_to_export
        self.name = task.name
        self.best_metric = task.metric
        self.data_dir = data_dir
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.cache_dir = cache_dir
        self.classifier_dropout = classifier_dropout

    @property
    def label_set(self):
        return LabelSet("regression" if self.task.is_regression else "single_label",
                        tuple(self.task.labels))

    def write_labels(self, output_dir):
        """labels.json: the label names (and problem type) that `predict`, the conversions and
        the exports read."""
        self.label_set.save(output_dir)

    def build_model(self, encoder):
        from albert_tf.modeling.classifier import AlbertClassifier
        return AlbertClassifier(encoder, self.task.num_labels, self.classifier_dropout,
                                regression=self.task.is_regression)

    def check_inputs(self, splits):
        """The data files of `splits` (train, dev, test) exist (before any training)."""
        for split in splits:
            self._split_path(split, self.task)

    def _split_path(self, split, task):
        from albert_tf.data import glue
        path = glue.split_path(self.data_dir, task, split)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{task.name} {split} file not found: {path}")
        return path

    def features(self, split, task=None):
        from albert_tf.data import glue
        task = task or self.task
        path = self._split_path(split, task)
        settings = dict(task=task.name, split=split, file=file_digest(path),
                        max_seq_length=self.max_seq_length,
                        tokenizer=self.tokenizer.digest(),
                        do_lower_case=self.tokenizer.do_lower_case)
        return cached_features(
            self.cache_dir, f"{task.name}_{split}", settings,
            lambda: glue.convert_examples(glue.read_examples(self.data_dir, task, split), task,
                                          self.tokenizer, self.max_seq_length))

    def train_features(self):
        return self.features("train")

    def eval_sets(self):
        from albert_tf.data import glue
        sets = [("dev", self.features("dev"))]
        if self.name == "mnli":
            mismatched = glue.TASKS["mismnli"]
            if os.path.isfile(glue.split_path(self.data_dir, mismatched, "dev")):
                sets.append(("dev_mismatched", self.features("dev", mismatched)))
        return sets

    def eval_metrics(self, name, features, outputs):
        return glue_metrics(self.task, features["label_ids"], outputs)

    def constant_loss(self, features):
        """The training loss of predicting the label frequencies whatever the input."""
        return constant_loss(features["label_ids"], self.task.is_regression)

    def predicted_classes(self, features, outputs):
        """The predicted labels (None for regression)."""
        if self.task.is_regression:
            return None
        return np.asarray(self.task.labels)[np.argmax(outputs["logits"], -1)]

    def predict_sets(self):
        """(name, features); MNLI adds the mismatched test set and AX when their files exist."""
        from albert_tf.data import glue
        sets = [("test", self.features("test"))]
        if self.name == "mnli":
            for name, other in (("test_mismatched", glue.TASKS["mismnli"]),
                                ("ax", glue.TASKS["ax"])):
                if os.path.isfile(glue.split_path(self.data_dir, other, "test")):
                    sets.append((name, self.features("test", other)))
                else:
                    logging.warning("%s not found: no %s predictions",
                                    glue.split_path(self.data_dir, other, "test"), name)
        return sets

    @property
    def text_keys(self):
        """The serving inputs: `text_a`, plus `text_b` for sentence-pair tasks."""
        return ("text_a",) if self.task.splits["train"].text_b is None else ("text_a", "text_b")

    def export(self, model, export_dir, lite_options=None):
        """The raw-string serving SavedModel (probabilities and label strings; STS-B:
        predictions), export_dir/classifier.tflite (ids in, probabilities/predictions and
        logits out, at [1, max_seq_length]), classifier_text.tflite (the same from strings)
        and, for one-text classification, classifier_task_library.tflite (the TFLite Task
        Library's BertNLClassifier runs it)."""
        import tensorflow as tf

        from albert_tf.serving.finetuned import export_finetuned

        regression, labels = self.task.is_regression, self.task.labels
        multi_label = getattr(self.task, "is_multi_label", False)
        threshold = self.threshold_to_export

        def numeric(outputs):
            if regression:
                return {"predictions": outputs["predictions"], "logits": outputs["logits"]}
            return {"probabilities": outputs["probabilities"], "logits": outputs["logits"]}

        def serving(outputs):
            if regression:
                out = {"predictions": outputs["predictions"]}
            elif multi_label:  # one column per label: at or above that label's threshold
                thresholds = self.task.thresholds or (0.5,) * len(labels)
                out = {"probabilities": outputs["probabilities"],
                       "above_threshold": outputs["probabilities"] >= tf.constant(thresholds)}
            else:
                out = {"probabilities": outputs["probabilities"],
                       "labels": tf.gather(tf.constant(labels), tf.argmax(outputs["logits"], -1))}
            if threshold is not None:
                out["threshold"] = tf.fill(tf.shape(outputs["logits"])[:1],
                                           tf.constant(threshold, tf.float32))
            return out

        task_library = None
        if (regression or multi_label or len(self.text_keys) > 1
                or not self.tokenizer.do_lower_case):
            logging.info("No classifier_task_library.tflite: the TFLite Task Library's "
                         "BertNLClassifier takes one lowercased text and gives one class")
        else:
            task_library = {"probabilities": "probability"}
        written = export_finetuned(
            model, export_dir, self.tokenizer.asset_file, self.tokenizer.do_lower_case,
            self.max_seq_length, self.text_keys, serving, tflite_name="classifier.tflite",
            tflite_output_fn=numeric, pad_to_longest=True, lite_options=lite_options,
            labels=None if regression else labels, task_library=task_library,
            windows=self.serving_windows())
        self.write_labels(export_dir)
        return written

    def serving_windows(self):
        """(stride, pool) when the serving export reads long texts in windows, else None."""
        return None

    def write_predictions(self, name, features, outputs, output_dir):
        suffix = "" if name == "test" else name[len("test"):] if name.startswith("test") else (
            "_" + name)
        guids = features["guids"]
        if self.task.is_regression:
            values = outputs["predictions"]
            results = "".join(f"{v:.6f}\n" for v in values)
            submit = "".join(f"{g}\t{v:.3f}\n" for g, v in zip(guids, values))
        else:
            probabilities = outputs["probabilities"]
            labels = [self.task.labels[i] for i in np.argmax(probabilities, -1)]
            results = "".join("\t".join(f"{p:.6f}" for p in row) + "\n" for row in probabilities)
            submit = "".join(f"{g}\t{label}\n" for g, label in zip(guids, labels))
        atomic_write_text(os.path.join(output_dir, f"test_results{suffix}.tsv"), results)
        atomic_write_text(os.path.join(output_dir, f"submit_results{suffix}.tsv"),
                          "index\tprediction\n" + submit)
        logging.info("Wrote %d %s predictions to %s", len(guids), name,
                     os.path.join(output_dir, f"submit_results{suffix}.tsv"))
