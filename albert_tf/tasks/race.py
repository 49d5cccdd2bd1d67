"""RACE fine-tuning: the task and its accuracies per level."""

import hashlib
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data.features import cached_features
from albert_tf.files import atomic_write_text
from albert_tf.tasks.base import FinetuningTask
from albert_tf.training.results import write_eval_results
from albert_tf.training.stuck import constant_loss


def accuracies(levels, labels, outputs, prefix="eval_"):
    """Accuracy and loss over all questions plus accuracy per level present (RACE's middle and
    high, C3's dialogue and mixed)."""
    hits = np.argmax(outputs["logits"], -1) == labels
    result = {f"{prefix}accuracy": float(np.mean(hits)),
              f"{prefix}loss": float(np.mean(outputs["per_example_loss"]))}
    for level in dict.fromkeys(np.asarray(levels).tolist()):
        result[f"{prefix}accuracy_{level}"] = float(np.mean(hits[levels == level]))
    return result


def answered_accuracies(features, outputs, output_dir):
    """(accuracies of the predicted questions that have answers, written to predict_results.txt
    where any has; which have). Features cached before `answered` existed all had answers."""
    answered = (features["answered"] == "yes" if "answered" in features
                else np.ones(len(features["label_ids"]), bool))
    if not answered.any():
        return {}, answered
    result = accuracies(features["levels"][answered], features["label_ids"][answered],
                        {k: v[answered] for k, v in outputs.items()})
    write_eval_results(os.path.join(output_dir, "predict_results.txt"), result)
    return result, answered


class RaceTask(FinetuningTask):
    """RACE (4-way multiple choice) for `run_finetuning`: features from the released files or
    all.txt (cached in `cache_dir`), accuracy over all/middle/high, per-question predictions."""

    name = "race"
    best_metric = "eval_accuracy"
    head_names = ("output_weights", "output_bias")
    last_block_rows = 1  # a sentence head: the last block runs at [CLS] only

    def __init__(self, data_dir, tokenizer, max_seq_length, max_qa_length, cache_dir,
                 high_only=False, middle_only=False, dropout_prob=0.1, feature_files=None):
        """feature_files: {split: path} of the original's feature files (--train_file,
        --eval_file, --predict_file): features written there once and read back after."""
        from albert_tf.data import race
        self.levels = race.levels(high_only, middle_only)
        self.sequences_per_example = race.NUM_CHOICES
        race.check_lengths(max_seq_length, max_qa_length)
        self.data_dir = data_dir
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self.cache_dir = cache_dir
        self.high_only, self.middle_only = high_only, middle_only
        self.dropout_prob = dropout_prob
        self.feature_files = {k: v for k, v in (feature_files or {}).items() if v}

    def build_model(self, encoder):
        from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
        return AlbertMultipleChoice(encoder, self.dropout_prob)

    def data_digest(self, split):
        """A digest of the files a split's features are built from."""
        from albert_tf.data import race
        return _tree_digest(race.split_dir(self.data_dir, split), self.levels)

    def read(self, split):
        """A split's examples (its files parsed)."""
        from albert_tf.data import race
        return race.read_examples(self.data_dir, split, self.high_only, self.middle_only)

    def convert(self, split):
        from albert_tf.data import race
        return race.convert_examples(self.read(split), self.tokenizer, self.max_seq_length,
                                     self.max_qa_length)

    def check_inputs(self, splits):
        """The files of `splits` parse (before any training), where no feature file given
        (--train_file, --eval_file, --predict_file) stands in for them."""
        for split in splits:
            try:
                self.read(split)
            except FileNotFoundError:
                if not self._feature_file_stands_in(split):
                    raise

    def _data(self, split):
        """The digest of a split's files; None where they are gone but its feature file
        (built before from them) is there."""
        try:
            return self.data_digest(split)
        except FileNotFoundError:
            if not self._feature_file_stands_in(split):
                raise
            return None

    def _feature_file_stands_in(self, split):
        feature_file = self.feature_files.get(split)
        return bool(feature_file) and tf.io.gfile.exists(feature_file)

    def cache_stem(self, split):
        return "race_" + split + ("" if len(self.levels) == 2 else "_" + self.levels[0])

    def features(self, split):
        # data None: built before from data that is gone; the other settings are checked
        settings = dict(task=self.name, split=split, data=self._data(split),
                        levels=self.levels, max_seq_length=self.max_seq_length,
                        max_qa_length=self.max_qa_length,
                        tokenizer=self.tokenizer.digest(),
                        do_lower_case=self.tokenizer.do_lower_case)
        flag = {"train": "train_file", "dev": "eval_file", "test": "predict_file"}[split]
        return cached_features(self.cache_dir, self.cache_stem(split), settings,
                               lambda: self.convert(split), path=self.feature_files.get(split),
                               flag=flag)

    def train_features(self):
        return self.features("train")

    def eval_sets(self):
        return [("dev", self.features("dev"))]

    def eval_metrics(self, name, features, outputs):
        return accuracies(features["levels"], features["label_ids"], outputs)

    def constant_loss(self, features):
        """The training loss of predicting the answer letters' frequencies."""
        return constant_loss(features["label_ids"])

    def predicted_classes(self, features, outputs):
        from albert_tf.data.race import LETTERS
        return np.asarray(list(LETTERS))[np.argmax(outputs["logits"], -1)]

    def predict_sets(self):
        return [("test", self.features("test"))]

    def write_predictions(self, name, features, outputs, output_dir):
        """predict_results.txt (the accuracies of the questions with answers, the original's
        file) and <name>_predictions.jsonl (one line per question: id, level, prediction,
        answer where known, probabilities)."""
        from albert_tf.data.race import LETTERS
        result, answered = answered_accuracies(features, outputs, output_dir)
        lines = []
        for guid, level, label, known, probs in zip(
                features["guids"], features["levels"], features["label_ids"], answered,
                outputs["probabilities"]):
            lines.append(json.dumps({"id": str(guid), "level": str(level),
                                     "prediction": LETTERS[int(np.argmax(probs))],
                                     "answer": LETTERS[int(label)] if known else None,
                                     "probabilities": [round(float(p), 6) for p in probs]}))
        path = os.path.join(output_dir, f"{name}_predictions.jsonl")
        atomic_write_text(path, "".join(line + "\n" for line in lines))
        logging.info("RACE %s: %d predictions in %s%s", name, len(lines), path, "".join(
            f"; {k} {v:.4f}" for k, v in sorted(result.items())))
        return result


def _tree_digest(root, levels):
    """A digest of the file names, sizes and contents a split's features are built from."""
    digest = hashlib.sha256()
    for level in levels:
        directory = os.path.join(root, level)
        if not os.path.isdir(directory):
            continue  # read_examples reports it
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not name.startswith("."):
                with open(path, "rb") as f:
                    digest.update(f"{level}/{name}\0".encode() + f.read() + b"\0")
    return digest.hexdigest()
