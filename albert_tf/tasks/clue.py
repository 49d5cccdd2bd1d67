"""CLUE's classification tasks (data.clue) on the own-data task: their fields and label lists,
accuracy, and the `<task>_predict.json` submission beside the usual predictions."""

import os

import numpy as np
from absl import logging

from albert_tf.data import clue
from albert_tf.files import atomic_write_text
from albert_tf.tasks.labeled_text import LabeledTextTask


class ClueTask(LabeledTextTask):
    """`task`: a `data.clue.Task`; `label_set`, `splits`: `data.clue.read_splits`' answer."""

    def __init__(self, task, label_set, splits, tokenizer, max_seq_length, cache_dir, **kwargs):
        super().__init__(label_set, splits, tokenizer, max_seq_length, cache_dir, **kwargs)
        self.clue = task

    def write_predictions(self, name, features, outputs, output_dir):
        super().write_predictions(name, features, outputs, output_dir)
        features, outputs = self._texts(features, outputs)
        labels = [self.label_set.labels[i] for i in np.argmax(outputs["probabilities"], -1)]
        path = os.path.join(output_dir, f"{self.clue.name}_predict.json")
        atomic_write_text(path, clue.submission(self.clue, features["guids"], labels))
        logging.info("Wrote the CLUE submission %s", path)
