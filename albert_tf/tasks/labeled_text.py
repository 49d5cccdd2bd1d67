"""Fine-tuning on your own labelled text (data.labeled_text): single-label, multi-label or
regression, with the label names in every output, class weights, the data report, per-class
reports and predictions files beside the original's."""

import dataclasses
import functools
import hashlib
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data import labeled_text
from albert_tf.data.features import cached_features, select_examples
from albert_tf.data.glue import convert_examples
from albert_tf.modeling.classifier import head_outputs, pool_windows
from albert_tf.outputs import check_not_input
from albert_tf.tasks import reports
from albert_tf.tasks.classification import ClassificationTask
from albert_tf.tasks.classification_metrics import classification_metrics

SPLIT_FLAGS = {"train": "train_file", "dev": "validation_file", "test": "test_file"}
ACTIONS = {"train": "train", "dev": "eval", "test": "predict"}
LONG_TEXT = ("truncate", "windows")
# Training reads at most this many windows of one text (0: all), spread evenly over it.
MAX_WINDOWS_PER_TEXT = 8
WORST_EXAMPLES = 100
# Multi-label thresholds are picked from these on the dev set, per label, for the best F1.
THRESHOLDS = tuple(np.round(np.arange(0.05, 0.951, 0.05), 2))


def class_weights(label_set, examples, weights):
    """One loss weight per label: "balanced" (n / (labels x n_label), scikit-learn's rule;
    multi-label: each label's negatives / positives), or {name: weight} (unnamed labels
    weigh 1)."""
    if weights is None:
        return None
    if label_set.is_regression:
        raise labeled_text.DataError("--class_weights: a regression has no classes")
    names = label_set.labels
    if weights == "balanced":
        if label_set.is_multi_label:
            positives = np.array([sum(n in ex.label for ex in examples) for n in names], float)
            return tuple(float(x) for x in (len(examples) - positives) / np.maximum(positives, 1))
        counts = np.array([sum(ex.label == n for ex in examples) for n in names], float)
        return tuple(float(x) for x in len(examples) / (len(names) * np.maximum(counts, 1)))
    unknown = sorted(set(weights) - set(names))
    if unknown:
        raise labeled_text.DataError(f"--class_weights names {', '.join(unknown)}, not among the "
                                     f"labels ({', '.join(names)})")
    return tuple(float(weights.get(n, 1.0)) for n in names)


def parse_class_weights(text):
    """--class_weights: "balanced" or "name=weight,name=weight"."""
    if not text:
        return None
    if text == "balanced":
        return text
    weights = {}
    for part in text.split(","):
        name, sep, value = part.rpartition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            name = ""
        if not sep or not name.strip() or weights.get(name.strip(), 0) <= 0:
            raise labeled_text.DataError(f"--class_weights={text}: give 'balanced' or "
                                         f"label=weight pairs with positive weights")
    return weights


def _per_text(features):
    """label_ids, guids and host_token_counts of each text (its first row)."""
    rows = features.get("host_example")
    first = np.unique(rows, return_index=True)[1] if rows is not None else slice(None)
    return {k: features[k][first] for k in ("label_ids", "guids", "host_token_counts")}


def _loss(outputs, labels, label_set):
    """Each text's loss from its (pooled) outputs, as the head computes it."""
    if label_set.is_regression:
        std = label_set.target[1] if label_set.target else 1.0
        return ((outputs["predictions"] - labels) / std) ** 2
    p = np.clip(outputs["probabilities"].astype(np.float64), 1e-12, 1 - 1e-12)
    if label_set.is_multi_label:
        return -np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p), -1)
    return -np.log(p[np.arange(len(labels)), labels])


def best_thresholds(labels, probabilities):
    """Each label's threshold (among THRESHOLDS) with the best F1 on 0/1 `labels`."""
    truth = labels[None] > 0                                       # [1, n, labels]
    hit = probabilities[None] >= np.asarray(THRESHOLDS)[:, None, None]  # [thresholds, ...]
    tp = (hit & truth).sum(1)
    f1 = 2 * tp / np.maximum(hit.sum(1) + truth.sum(1), 1)          # [thresholds, labels]
    return tuple(float(THRESHOLDS[i]) for i in f1.argmax(0))


def _long_text(label_set, splits, max_seq_length, long_text, window_stride):
    """`label_set` with the windows `long_text` reads long texts in (none to truncate)."""
    long_text = long_text or ("windows" if label_set.window_stride else "truncate")
    if long_text not in LONG_TEXT:
        raise labeled_text.DataError(f"--long_text={long_text}: one of {', '.join(LONG_TEXT)}")
    if long_text == "windows":
        if any(len(s.text_columns) > 1 for s in splits.values()):
            raise labeled_text.DataError("--long_text=windows reads one text column, not a pair")
        window_stride = window_stride or label_set.window_stride or max(
            (max_seq_length - 2) // 2, 1)
        if not 1 <= window_stride <= max_seq_length - 2:
            raise labeled_text.DataError(f"--window_stride={window_stride}: between 1 and "
                                         f"--max_seq_length - 2 = {max_seq_length - 2}")
        return dataclasses.replace(label_set, window_stride=window_stride,
                                   window_length=max_seq_length)
    return dataclasses.replace(label_set, window_stride=None, window_length=None)


def capped_windows(rows, cap):
    """The rows (windows) training keeps of `rows` (each row's text; a text's rows
    consecutive): all of a text with at most `cap`, else `cap` spread evenly from its first to
    its last (0: every row)."""
    rows = np.asarray(rows)
    if not cap:
        return np.arange(len(rows))
    counts = np.bincount(rows)
    keep = np.ones(len(rows), bool)
    for text in np.flatnonzero(counts > cap):
        start, count = np.searchsorted(rows, text), counts[text]
        keep[start:start + count] = False
        keep[start + np.linspace(0, count - 1, cap).round().astype(int)] = True
    return np.flatnonzero(keep)


def _digest(examples):
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps([ex.guid, ex.text_a, ex.text_b, ex.label]).encode())
    return h.hexdigest()[:16]


class LabeledTextTask(ClassificationTask):
    """Your own labelled text for `run_finetuning`, from files or rows:

        task = LabeledTextTask.from_files(tokenizer, train="train.csv", dev="dev.csv",
                                          columns=Columns(text=("review",), label="stars"))

    `label_set` and `splits` are `data.labeled_text.read_splits`' answer; `weights` is None,
    "balanced" or {label name: weight}; `long_text` (default: as the run in `label_set` did,
    else "truncate"): "truncate" (the tokens past `max_seq_length` are dropped) or "windows"
    (read in windows `window_stride` tokens apart, default half a window, each trained on
    with its text's label; evaluation, predictions and the serving export average a text's
    window logits). `max_windows_per_text`: training reads at most this many windows of one
    text, spread evenly over it (0: all); evaluation and predictions read every window.
    """

    def __init__(self, label_set, splits, tokenizer, max_seq_length, cache_dir,
                 classifier_dropout=0.1, threshold_to_export=None, weights=None,
                 long_text=None, window_stride=None, max_windows_per_text=MAX_WINDOWS_PER_TEXT):
        label_set = _long_text(label_set, splits, max_seq_length, long_text, window_stride)
        if max_windows_per_text < 0:
            raise labeled_text.DataError(f"--max_windows_per_text={max_windows_per_text}: 0 "
                                         f"(every window) or more")
        self.max_windows_per_text = max_windows_per_text
        super().__init__(tokenizer, max_seq_length, cache_dir, classifier_dropout,
                         threshold_to_export)
        self.label_set = label_set
        self.name = label_set.name
        self.best_metric = label_set.metric
        self.splits = splits
        train = splits.get("train")
        if train and label_set.target:  # (without one, read_splits says where they came from)
            logging.info("Regression on %s: scores with mean %g and standard deviation %g (the "
                         "head learns them standardized)", train.path, *label_set.target)
        elif train:
            logging.info("%s labels from %s, in this order: %s",
                         label_set.problem_type.replace("_", "-").capitalize(),
                         label_set.labels_of or train.path, ", ".join(label_set.labels))
        self.class_weights = class_weights(label_set, train.examples if train else [], weights)
        if self.class_weights:
            logging.info("Class weights: %s", ", ".join(
                f"{n} {w:.3g}" for n, w in zip(label_set.labels, self.class_weights)))
        self._reported = set()

    @classmethod
    def from_files(cls, tokenizer, train=None, dev=None, test=None,
                   columns=labeled_text.Columns(), problem_type="auto", run_dir=None,
                   max_seq_length=128, cache_dir=None, **kwargs):
        """The task of files (paths, DataFrames or lists of dicts); labels from `train`, else
        from the run in `run_dir`."""
        label_set, splits = labeled_text.read_splits({"train": train, "dev": dev, "test": test},
                                                     columns, problem_type, run_dir)
        return cls(label_set, splits, tokenizer, max_seq_length, cache_dir or run_dir, **kwargs)

    @staticmethod
    def check_files(files, do_train=False, do_eval=False, do_predict=False):
        """Each action has its split: {"train"|"dev"|"test": source or None}."""
        for split, wanted in (("train", do_train), ("dev", do_eval), ("test", do_predict)):
            if wanted and files.get(split) is None:
                raise labeled_text.DataError(f"--do_{ACTIONS[split]} needs "
                                             f"--{SPLIT_FLAGS[split]}")

    def check_outputs(self, output_dir):
        """Refuses an --output_dir where a file this task writes would replace one of its
        input files (a test file called predictions.csv in it, ...)."""
        names = [labeled_text.LABELS_FILE, reports.REPORT_FILE, reports.CONFUSION_PICTURE,
                 "test_results.tsv", "submit_results.tsv", "eval_results.txt"]
        names += [f"{stem}.{self._format(data)}" for data in self.splits.values()
                  for stem in ("predictions", "worst_dev_examples")]
        inputs = {SPLIT_FLAGS[split]: data.path for split, data in self.splits.items()
                  if data.table.format != "rows"}
        for name in names:
            check_not_input(os.path.join(output_dir, name), "output_dir", inputs)

    def check_inputs(self, splits):
        self.check_files(self.splits, *(s in splits for s in ("train", "dev", "test")))

    @property
    def text_keys(self):
        """The serving inputs: one text or a pair, as the files (or the run's labels.json)
        have."""
        columns = next((s.text_columns for s in self.splits.values()),
                       self.label_set.text_columns)
        if not columns:
            raise labeled_text.DataError("name the text column(s) with --text_column_names (the "
                                         "run's labels.json names none)")
        return ("text_a",) if len(columns) == 1 else ("text_a", "text_b")

    def features(self, split):
        if split not in self.splits:
            raise labeled_text.DataError(f"no --{SPLIT_FLAGS[split]}")
        data = self.splits[split]
        stride = self.label_set.window_stride
        settings = dict(task=self.name, split=split, examples=_digest(data.examples),
                        labels=[self.label_set.problem_type, *self.label_set.labels],
                        max_seq_length=self.max_seq_length,
                        tokenizer=self.tokenizer.digest(),
                        do_lower_case=self.tokenizer.do_lower_case, window_stride=stride or 0)
        features = cached_features(
            self.cache_dir, f"{self.name}_{split}", settings,
            lambda: convert_examples(data.examples, self.label_set, self.tokenizer,
                                     self.max_seq_length, stride))
        if split not in self._reported:
            self._reported.add(split)
            texts = _per_text(features)
            counts = None if split == "test" or self.label_set.is_regression else \
                reports.label_counts(texts["label_ids"], self.label_set.labels,
                                     self.label_set.is_multi_label)
            reports.data_report(f"{split} ({data.path})", texts["host_token_counts"],
                                self.max_seq_length, counts,
                                windows=np.bincount(features["host_example"]) if stride
                                else None)
        return features

    def train_features(self):
        """The training features: with windows, at most max_windows_per_text of a text."""
        features = self.features("train")
        if not self.label_set.window_stride:
            return features
        rows = features["host_example"]
        kept = capped_windows(rows, self.max_windows_per_text)
        if len(kept) == len(rows):
            return features
        capped = np.count_nonzero(np.bincount(rows) > self.max_windows_per_text)
        division = reports.window_division(np.bincount(rows[kept]))
        logging.info("Training reads at most %d windows of a text (--max_windows_per_text), "
                     "spread evenly over it: %d of %d windows dropped, from %d text%s; %d "
                     "training windows, %.1f%% of them from the longest 1%% of the texts "
                     "(evaluation and predictions read every window)",
                     self.max_windows_per_text, len(rows) - len(kept), len(rows), capped,
                     "" if capped == 1 else "s", len(kept), 100 * division["longest_share"])
        return select_examples(features, kept)

    def eval_sets(self):
        return [("dev", self.features("dev"))]

    def predict_sets(self):
        return [("test", self.features("test"))]

    # ---- evaluation ---------------------------------------------------------------------------

    def serving_windows(self):
        stride, label_set = self.label_set.window_stride, self.label_set
        if not stride:
            return None
        return stride, functools.partial(pool_windows, regression=label_set.is_regression,
                                         multi_label=label_set.is_multi_label,
                                         target=label_set.target)

    def _texts(self, features, outputs):
        """Features and outputs per text: windows' logits averaged (as the serving export
        does) and the head's outputs and loss computed from them."""
        if not self.label_set.window_stride:
            return features, outputs
        rows = features["host_example"]
        texts = _per_text(features)
        count = len(texts["label_ids"])
        logits = np.zeros((count, outputs["logits"].shape[-1]))
        np.add.at(logits, rows, outputs["logits"])
        logits /= np.bincount(rows, minlength=count)[:, None]
        pooled = {k: v.numpy() for k, v in head_outputs(
            tf.constant(logits, tf.float32), self.label_set.is_regression,
            self.label_set.is_multi_label, self.label_set.target).items()}
        pooled["per_example_loss"] = _loss(pooled, texts["label_ids"], self.label_set)
        return texts, pooled

    def eval_metrics(self, name, features, outputs):
        features, outputs = self._texts(features, outputs)
        labels = features["label_ids"]
        names = self.label_set.labels
        if self.label_set.is_multi_label:
            result = {"eval_loss": float(np.mean(outputs["per_example_loss"]))}
            predicted = outputs["probabilities"] >= 0.5
            result.update(reports.multi_label_f1(labels, predicted))
            result.update(reports.f1_per_label(labels, predicted, names, multi_label=True))
            return result
        result = classification_metrics(labels, outputs, self.label_set.is_regression)
        if not self.label_set.is_regression:
            predicted = np.argmax(outputs["logits"], -1)
            result.update(reports.averaged_f1(labels, predicted, len(names)))
            result.update(reports.f1_per_label(labels, predicted, names))
        return result

    def pick_thresholds(self, name, features, outputs, output_dir):
        """Multi-label: each label's threshold for its best F1 on this eval set, which the
        report, the predictions and the export use from now on, kept in labels.json."""
        if not self.label_set.is_multi_label:
            return
        features, outputs = self._texts(features, outputs)
        thresholds = best_thresholds(features["label_ids"], outputs["probabilities"])
        self.label_set = dataclasses.replace(self.label_set, thresholds=thresholds)
        self.label_set.save(output_dir)

    def report(self, name, features, outputs, step, output_dir):
        """The best evaluation's report: per-class table and confusion matrix (text and
        picture), or per-label table and thresholds (multi-label); the worst-scored examples."""
        features, outputs = self._texts(features, outputs)
        labels, names = features["label_ids"], self.label_set.labels
        if self.label_set.is_multi_label:
            thresholds = self.label_set.thresholds or (0.5,) * len(names)
            predicted = outputs["probabilities"] >= np.asarray(thresholds)
            text = reports.multi_label_report(labels, predicted, names)
            text += "thresholds (picked on this set for each label's best F1): " + ", ".join(
                f"{n} {t:.2f}" for n, t in zip(names, thresholds)) + "\n"
            at_half = reports.multi_label_f1(labels, outputs["probabilities"] >= 0.5)
            text += "".join(f"{k} at these thresholds: {v:.4f} (at 0.5, as eval_results.txt "
                            f"scores every checkpoint: {at_half[k]:.4f})\n" for k, v in
                            reports.multi_label_f1(labels, predicted).items())
            reports.write_report(output_dir, name, text, step)
        elif not self.label_set.is_regression:
            text, matrix = reports.classification_report(
                labels, np.argmax(outputs["logits"], -1), names)
            reports.write_report(output_dir, name, text, step)
            reports.plot_confusion(matrix, names, os.path.join(
                output_dir, reports.CONFUSION_PICTURE if name == "dev" else
                f"confusion_matrix_{name}.png"))
        self._write_worst(name, features, outputs, output_dir)

    def _write_worst(self, name, features, outputs, output_dir):
        data = self.splits[name]
        worst = np.argsort(-outputs["per_example_loss"], kind="stable")[:WORST_EXAMPLES]
        rows = []
        for i in worst:
            ex = data.examples[i]
            row = {"id": ex.guid, **dict(zip(data.text_columns, (ex.text_a, ex.text_b))),
                   "label": self._label_text(ex.label)}
            row.update(self._prediction(outputs, i))
            row["loss"] = round(float(outputs["per_example_loss"][i]), 6)
            rows.append(row)
        path = os.path.join(output_dir, f"worst_{name}_examples.{self._format(data)}")
        labeled_text.write_table(path, rows)
        logging.info("The %d worst-scored %s examples (highest loss): %s", len(rows), name, path)

    # ---- predictions --------------------------------------------------------------------------

    def _label_text(self, label):
        if isinstance(label, tuple):
            return "|".join(label) if label else ""
        return label if isinstance(label, str) else f"{label:g}"

    def _prediction(self, outputs, i):
        """{prediction column: value} for example i: the label (names joined by | for
        multi-label) and each label's probability; regression: the score."""
        if self.label_set.is_regression:
            return {"prediction": round(float(outputs["predictions"][i]), 6)}
        p = outputs["probabilities"][i]
        if self.label_set.is_multi_label:
            thresholds = self.label_set.thresholds or (0.5,) * len(p)
            label = "|".join(n for n, q, t in zip(self.label_set.labels, p, thresholds) if q >= t)
        else:
            label = self.label_set.labels[int(np.argmax(p))]
        return {"prediction": label, **{f"p_{n}": round(float(q), 6)
                                        for n, q in zip(self.label_set.labels, p)}}

    @staticmethod
    def _format(data):
        return data.table.format if data.table.format != "rows" else "csv"

    def write_predictions(self, name, features, outputs, output_dir):
        """predictions.<csv|tsv|jsonl> (the input's other columns, its label column where it
        has labels, the predicted label and one probability column per label) beside the
        original's test_results.tsv."""
        data = self.splits[name]
        features, outputs = self._texts(features, outputs)
        if not self.label_set.is_multi_label:
            super().write_predictions(name, features, outputs, output_dir)
        gold = data.label_column if any(str(c).strip() for c in data.label_cells) else None
        rows = [{**extra, **({gold: data.label_cells[i]} if gold else {}),
                 **self._prediction(outputs, i)} for i, extra in enumerate(data.extras)]
        path = os.path.join(output_dir, f"predictions.{self._format(data)}")
        labeled_text.write_table(path, rows)
        logging.info("Wrote %d predictions to %s", len(rows), path)

