"""GLUE tasks: the original processors (files, columns, labels) and [CLS] A [SEP] B [SEP] ids."""

import contextlib
import csv
import dataclasses
import io
import os
import sys

import numpy as np

from albert_tf.data.text_files import read_text

MNLI_LABELS = ("contradiction", "entailment", "neutral")
BINARY = ("0", "1")
NLI2 = ("entailment", "not_entailment")


@contextlib.contextmanager
def unlimited_csv_fields():
    """csv reads fields of any length within the block (its default stops at 128 KiB), the
    process's limit again after it."""
    limit = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


@dataclasses.dataclass(frozen=True)
class Split:
    """One file of a task: where it is and which columns hold what (indexes may be negative)."""
    filename: str
    text_a: int
    text_b: int = None
    label: int = None        # None: an unlabelled (test) split
    guid: int = None         # column of the id written to submissions; None: the row number
    header: bool = True
    skip_short_rows: bool = False  # QQP: the original skipped rows it could not index


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    directory: str
    labels: tuple            # () for regression
    splits: dict             # split name -> Split
    metric: str              # the model-selection key in eval_results.txt
    submission_name: str     # GLUE leaderboard file stem

    @property
    def is_regression(self):
        return not self.labels

    @property
    def num_labels(self):
        return len(self.labels) or 1

    @property
    def is_pair(self):
        return any(split.text_b is not None for split in self.splits.values())


def _pair(a, b, label, test_a=None, test_b=None, test_guid=0):
    test_a = a if test_a is None else test_a
    test_b = b if test_b is None else test_b
    return {"train": Split("train.tsv", a, b, label), "dev": Split("dev.tsv", a, b, label),
            "test": Split("test.tsv", test_a, test_b, None, guid=test_guid)}


def _mnli(suffix):
    return {"train": Split("train.tsv", 8, 9, -1, guid=0),
            "dev": Split(f"dev_{suffix}.tsv", 8, 9, -1, guid=0),
            "test": Split(f"test_{suffix}.tsv", 8, 9, None, guid=0)}


TASKS = {t.name: t for t in [
    Task("cola", "CoLA", BINARY, {
        "train": Split("train.tsv", 3, None, 1, header=False),
        "dev": Split("dev.tsv", 3, None, 1, header=False),
        "test": Split("test.tsv", 1, None, None, guid=0)}, "matthew_corr", "CoLA"),
    Task("sst-2", "SST-2", BINARY, {
        "train": Split("train.tsv", 0, None, 1), "dev": Split("dev.tsv", 0, None, 1),
        "test": Split("test.tsv", 1, None, None, guid=0)}, "eval_accuracy", "SST-2"),
    Task("mrpc", "MRPC", BINARY, _pair(3, 4, 0), "eval_accuracy", "MRPC"),
    Task("sts-b", "STS-B", (), _pair(7, 8, -1), "pearson", "STS-B"),
    Task("qqp", "QQP", BINARY, {
        "train": Split("train.tsv", 3, 4, 5, skip_short_rows=True),
        "dev": Split("dev.tsv", 3, 4, 5, skip_short_rows=True),
        "test": Split("test.tsv", 1, 2, None, guid=0)}, "eval_accuracy", "QQP"),
    Task("mnli", "MNLI", MNLI_LABELS, _mnli("matched"), "eval_accuracy", "MNLI-m"),
    Task("mismnli", "MNLI", MNLI_LABELS, _mnli("mismatched"), "eval_accuracy", "MNLI-mm"),
    Task("qnli", "QNLI", NLI2, _pair(1, 2, -1), "eval_accuracy", "QNLI"),
    Task("rte", "RTE", NLI2, _pair(1, 2, -1), "eval_accuracy", "RTE"),
    Task("wnli", "WNLI", BINARY, _pair(1, 2, -1), "eval_accuracy", "WNLI"),
    Task("ax", "diagnostic", MNLI_LABELS, {
        "test": Split("diagnostic.tsv", 1, 2, None, guid=0)}, "eval_accuracy", "AX"),
]}
ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "mnli-mm": "mismnli", "mnli_mismatched": "mismnli",
           "diagnostic": "ax"}


def find_task(name):
    """The task for a --task_name, or None for none or a name that is not a GLUE task's."""
    try:
        return get_task(name) if name else None
    except ValueError:
        return None


def get_task(name):
    """The task for a --task_name (case-insensitive); a clear error listing the valid names."""
    key = (name or "").strip().lower()
    key = ALIASES.get(key, key)
    if key not in TASKS:
        raise ValueError(f"unknown --task_name={name!r}; valid names: {', '.join(TASKS)}")
    return TASKS[key]


@dataclasses.dataclass
class Example:
    guid: str
    text_a: str
    text_b: str = None
    label: object = None     # label string, float (regression) or None


def split_path(data_dir, task, split):
    if split not in task.splits:
        raise ValueError(f"task {task.name} has no {split} split (it has "
                         f"{', '.join(task.splits)})")
    return os.path.join(data_dir, task.directory, task.splits[split].filename)


def read_examples(data_dir, task, split):
    """Examples of one split. Malformed rows are errors naming file, line and expected columns."""
    spec = task.splits[split] if split in task.splits else None
    path = split_path(data_dir, task, split)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{task.name} {split} file not found: {path} (--data_dir should "
                                f"hold {task.directory}/{spec.filename})")
    return read_split_file(path, task, spec)


def split_of_file(task, path):
    """The split of `task` whose file has `path`'s name (GLUE's dev.tsv, test_matched.tsv, ...),
    or None."""
    name = os.path.basename(path)
    return next((spec for spec in task.splits.values() if spec.filename == name), None)


def read_split_file(path, task, spec):
    """Examples of `path` read as `task`'s split `spec` lays its columns out."""
    needed = [c for c in (spec.text_a, spec.text_b, spec.label, spec.guid) if c is not None]
    # Columns counted from the end come after those counted from the start.
    width = max(c + 1 for c in needed if c >= 0)
    if any(c < 0 for c in needed):
        width = max(width + 1, max(-c for c in needed if c < 0))
    examples = []
    with unlimited_csv_fields():
        rows = list(csv.reader(io.StringIO(read_text(path), newline=""), delimiter="\t",
                               quotechar=None))
    for line, row in enumerate(rows, 1):
        if spec.header and line == 1:
            continue
        if not row:
            continue
        if len(row) < width:
            if spec.skip_short_rows:
                continue
            raise ValueError(f"{path}:{line}: expected at least {width} tab-separated columns "
                             f"({_describe(spec)}), found {len(row)}")
        guid = row[spec.guid] if spec.guid is not None else str(len(examples))
        label = None
        if spec.label is not None:
            label = row[spec.label].strip()
            if task.is_regression:
                try:
                    label = float(label)
                except ValueError:
                    raise ValueError(f"{path}:{line}: the score in column {spec.label} is "
                                     f"{label!r}, not a number") from None
            elif label not in task.labels:
                raise ValueError(f"{path}:{line}: label {label!r} in column {spec.label} is not "
                                 f"one of {', '.join(task.labels)}")
        text_b = row[spec.text_b] if spec.text_b is not None else None
        examples.append(Example(guid, row[spec.text_a], text_b, label))
    if not examples:
        raise ValueError(f"{path} holds no examples")
    return examples


def _describe(spec):
    parts = [f"text_a in column {spec.text_a}"]
    if spec.text_b is not None:
        parts.append(f"text_b in column {spec.text_b}")
    if spec.label is not None:
        parts.append(f"label in column {spec.label}")
    return ", ".join(parts)


def truncate_pair(tokens_a, tokens_b, max_length):
    """Longest-first truncation, popping from the end (in place), as the original."""
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()


def window_starts(length, budget, stride):
    """Where the windows of `budget` tokens over a text of `length` tokens start: every
    `stride` tokens until one reaches the end (one window when the text fits)."""
    return range(0, max(length - budget, 0) + stride, stride)


def convert_examples(examples, task, tokenizer, max_seq_length, window_stride=None):
    """Unpadded features: a dict of numpy arrays in the cache layout (see finetuning.Features).

    With `window_stride` (one-text examples only), a text longer than `max_seq_length` becomes
    overlapping windows, each a row with its example's label; `host_example` maps rows to
    examples. `host_token_counts` is each row's example's length before any cut."""
    ids = tokenizer.special_ids()
    cls_id, sep_id = ids["[CLS]"], ids["[SEP]"]
    word_ids, type_ids, lengths, token_counts, rows = [], [], [], [], []
    budget = max_seq_length - 2
    for index, ex in enumerate(examples):
        a = tokenizer.encode(ex.text_a)
        b = tokenizer.encode(ex.text_b) if ex.text_b is not None else None
        count = len(a) + 2 + (len(b) + 1 if b is not None else 0)
        if b is not None:
            truncate_pair(a, b, max_seq_length - 3)
            pieces = [([cls_id] + a + [sep_id] + b + [sep_id],
                       [0] * (len(a) + 2) + [1] * (len(b) + 1))]
        else:
            starts = window_starts(len(a), budget, window_stride) if window_stride else [0]
            pieces = [([cls_id] + a[s:s + budget] + [sep_id], [0] * (len(a[s:s + budget]) + 2))
                      for s in starts]
        for seq, types in pieces:
            word_ids.extend(seq)
            type_ids.extend(types)
            lengths.append(len(seq))
            token_counts.append(count)
            rows.append(index)
    rows = np.asarray(rows, np.int32)
    return {"input_word_ids": np.asarray(word_ids, np.int32),
            "input_type_ids": np.asarray(type_ids, np.int8),
            "lengths": np.asarray(lengths, np.int32),
            "label_ids": label_ids(examples, task)[rows],
            "guids": np.asarray([ex.guid for ex in examples], dtype=str)[rows],
            "host_token_counts": np.asarray(token_counts, np.int32),
            "host_example": rows}


def label_ids(examples, task):
    """Class ids [n] int32; regression: scores [n] float32; multi-label (a task with
    `is_multi_label`): 0/1 rows [n, labels] float32. Unlabelled examples get zeros."""
    if task.is_regression:
        return np.asarray([0.0 if ex.label is None else float(ex.label) for ex in examples],
                          np.float32)
    index = {label: i for i, label in enumerate(task.labels)}
    if getattr(task, "is_multi_label", False):
        rows = np.zeros((len(examples), len(task.labels)), np.float32)
        for row, ex in zip(rows, examples):
            row[[index[label] for label in ex.label or ()]] = 1.0
        return rows
    return np.asarray([0 if ex.label is None else index[ex.label] for ex in examples], np.int32)
