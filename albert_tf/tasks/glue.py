"""GLUE fine-tuning: the task (features, metrics under the original names, MNLI's extra sets)
on the shared classification task."""

import os

import numpy as np
from absl import logging

from albert_tf.data.features import cached_features
from albert_tf.data.labeled_text import LabelSet
from albert_tf.files import file_digest
from albert_tf.tasks.classification import ClassificationTask
from albert_tf.tasks.classification_metrics import (classification_metrics, f1_score,
                                                    matthews_corrcoef)


def glue_metrics(task, labels, outputs):
    """Metrics under the original names (eval_accuracy, eval_loss, matthew_corr, pearson, MSE)
    plus f1 (MRPC, QQP) and spearman (STS-B)."""
    result = classification_metrics(labels, outputs, task.is_regression)
    if task.is_regression:
        return result
    predictions = np.argmax(outputs["logits"], -1)
    if task.name == "cola":
        result["matthew_corr"] = matthews_corrcoef(labels, predictions)
    if task.name in ("mrpc", "qqp"):
        result["f1"] = f1_score(labels, predictions)
    return result


class GlueTask(ClassificationTask):
    """A GLUE task (or your data in a GLUE format) for `run_finetuning`.

    task: a `data.glue.Task` (`glue.get_task("mrpc")`); tokenizer: a FullTokenizer;
    features are cached in `cache_dir`. `threshold_to_export`: a constant the serving export
    also returns as `threshold`.
    """

    def __init__(self, task, data_dir, tokenizer, max_seq_length, cache_dir,
                 classifier_dropout=0.1, threshold_to_export=None):
        super().__init__(tokenizer, max_seq_length, cache_dir, classifier_dropout,
                         threshold_to_export)
        self.task = task
        self.name = task.name
        self.best_metric = task.metric
        self.data_dir = data_dir

    @property
    def label_set(self):
        return LabelSet("regression" if self.task.is_regression else "single_label",
                        tuple(self.task.labels))

    def check_inputs(self, splits):
        """The data files of `splits` (train, dev, test; MNLI's other dev and test sets) exist
        and parse (before any training)."""
        from albert_tf.data import glue
        for split in splits:
            for _, task in self._sets(split):
                self._split_path(split, task)
                glue.read_examples(self.data_dir, task, split)

    def _sets(self, split, warn=False):
        """[(name, GLUE task)] of what a split reads: MNLI's dev adds the mismatched set, its
        test the mismatched set and AX, where their files exist (with `warn`, missing ones
        are logged)."""
        from albert_tf.data import glue
        sets = [(split, self.task)]
        others = {"dev": (("dev_mismatched", "mismnli"),),
                  "test": (("test_mismatched", "mismnli"), ("ax", "ax"))}
        for name, other in others.get(split, ()) if self.name == "mnli" else ():
            path = glue.split_path(self.data_dir, glue.TASKS[other], split)
            if os.path.isfile(path):
                sets.append((name, glue.TASKS[other]))
            elif warn and split == "test":  # AX, GLUE's diagnostic set, is extra: said only
                (logging.info if name == "ax" else logging.warning)(
                    "%s not found: no %s predictions", path, name)
        return sets

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
        return [(name, self.features("dev", task)) for name, task in self._sets("dev")]

    def eval_metrics(self, name, features, outputs):
        return glue_metrics(self.task, features["label_ids"], outputs)

    def predict_sets(self):
        """(name, features); MNLI adds the mismatched test set and AX when their files exist."""
        return [(name, self.features("test", task))
                for name, task in self._sets("test", warn=True)]

    @property
    def text_keys(self):
        """The serving inputs: `text_a`, plus `text_b` for sentence-pair tasks."""
        return ("text_a",) if self.task.splits["train"].text_b is None else ("text_a", "text_b")
