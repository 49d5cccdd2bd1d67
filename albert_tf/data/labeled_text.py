"""Your own labelled text: CSV, TSV and JSON Lines files (or rows from Python) read by column
name, the label set discovered from the training file and saved with the run, and the checks
that stop a run on bad input before anything is written.

Examples are `glue.Example`s, so features, caching and the trainer are the GLUE path's; a
multi-label example's label is a tuple of names.
"""

import codecs
import csv
import dataclasses
import difflib
import io
import json
import math
import os
import statistics

import tensorflow as tf

from albert_tf.data.glue import Example, unlimited_csv_fields
from albert_tf.files import atomic_write_text

DELIMITERS = {".csv": ",", ".tsv": "\t"}
JSON_LINES = (".jsonl", ".json", ".ndjson")
PROBLEM_TYPES = ("single_label", "multi_label", "regression")
LABELS_FILE = "labels.json"
# Column names tried, in order, when --text_column_names is not given.
DEFAULT_TEXT_COLUMNS = (("text",), ("sentence",), ("sentence1", "sentence2"), ("text_a", "text_b"))
ID_COLUMNS = ("id", "idx", "guid")


class DataError(ValueError):
    """Input a run cannot use, said in one line naming the file (and line) at fault."""


@dataclasses.dataclass
class Table:
    """A file's rows as dicts by column name; `lines[i]` is row i's line in the file."""
    path: str
    columns: list
    rows: list
    lines: list
    format: str  # csv, tsv or jsonl

    def where(self, i):
        return f"{self.path}:{self.lines[i]}"


def table_format(path):
    ext = os.path.splitext(path)[1].lower()
    if ext in DELIMITERS:
        return ext[1:]
    if ext in JSON_LINES:
        return "jsonl"
    raise DataError(f"{path}: unknown file type {ext or '(no extension)'!r}; name it .csv, .tsv "
                    f"or .jsonl (JSON Lines: one object per line)")


def _decode(path, data):
    """UTF-8 text with any byte-order mark removed; anything else is one line naming the first
    byte that is not UTF-8."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise DataError(f"{path} is UTF-16 text; save it as UTF-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}:{line}: byte {e.start} (0x{data[e.start]:02x}, column {column}) "
                        f"is not UTF-8; save the file as UTF-8") from None


def read_table(source, name=None):
    """A Table from a .csv/.tsv/.jsonl path, a pandas DataFrame or a list of dicts (`name` is
    what errors call the latter)."""
    if isinstance(source, Table):
        return source
    if not isinstance(source, (str, os.PathLike)):
        records = source.to_dict("records") if hasattr(source, "to_dict") else list(source)
        name = name or "rows"
        if not all(isinstance(r, dict) for r in records):
            raise DataError(f"{name}: expected rows as dicts (column name -> value)")
        columns = list(dict.fromkeys(k for r in records for k in r))
        return Table(name, columns, records, list(range(1, len(records) + 1)), "rows")
    path = os.fspath(source)
    kind = table_format(path)
    if not tf.io.gfile.exists(path):
        raise DataError(f"{path}: no such file")
    with tf.io.gfile.GFile(path, "rb") as f:
        text = _decode(path, f.read())
    if kind == "jsonl":
        return _read_json_lines(path, text)
    with unlimited_csv_fields():
        return _read_delimited(path, text, DELIMITERS["." + kind], kind)


def _read_delimited(path, text, delimiter, kind):
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise DataError(f"{path}: no header line; the first line must name the columns")
        header = [h.strip() for h in header]
        rows, lines = [], []
        for row in reader:
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise DataError(f"{path}:{reader.line_num}: {len(row)} fields, the header has "
                                f"{len(header)} ({', '.join(header)})"
                                + (" (a text holding the delimiter must be quoted)"
                                   if len(row) > len(header) else ""))
            rows.append(dict(zip(header, row)))
            lines.append(reader.line_num)
    except csv.Error as e:
        raise DataError(f"{path}:{reader.line_num}: {e}") from None
    return Table(path, header, rows, lines, kind)


def _read_json_lines(path, text):
    rows, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            hint = " (a JSON array? write one object per line)" if line.strip() == "[" else ""
            raise DataError(f"{path}:{number}: not a JSON object: {e.msg}{hint}") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{number}: a JSON {type(row).__name__}, not an object "
                            f"(column name -> value)")
        rows.append(row)
        lines.append(number)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return Table(path, columns, rows, lines, "jsonl")


def _missing_column(table, column, flag):
    close = difflib.get_close_matches(column, table.columns, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return DataError(f"{table.path} has no column {column!r} (--{flag}); its columns: "
                     f"{', '.join(table.columns) or 'none'}{hint}")


def text_columns(table, names=None):
    """The one or two text columns: `names`, or the first of DEFAULT_TEXT_COLUMNS the file
    has."""
    if names:
        names = tuple(names)
        if len(names) > 2:
            raise DataError(f"--text_column_names={','.join(names)}: one text column, or two for "
                            f"a text pair")
        for name in names:
            if name not in table.columns:
                raise _missing_column(table, name, "text_column_names")
        return names
    for candidate in DEFAULT_TEXT_COLUMNS:
        if all(c in table.columns for c in candidate):
            return candidate
    raise DataError(f"{table.path}: name the text column(s) with --text_column_names; its "
                    f"columns: {', '.join(table.columns)}")


# ---- labels -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LabelSet:
    """What a run predicts: its problem type, the label names in output order (none for
    regression), for multi-label each label's decision threshold, with `window_stride` that
    long texts are read in windows (`glue.window_starts`) whose logits are averaged, and for
    regression the training scores' mean and standard deviation (the head learns them
    standardized)."""
    problem_type: str
    labels: tuple = ()
    thresholds: tuple = ()
    window_stride: int = None  # long texts read in windows this many tokens apart,
    window_length: int = None  # each of this many tokens with [CLS] and [SEP]
    target: tuple = None  # regression: the training scores' (mean, standard deviation)
    name: str = "text_classification"
    metric: str = ""

    def __post_init__(self):
        if self.problem_type not in PROBLEM_TYPES:
            raise DataError(f"unknown problem type {self.problem_type!r}; one of "
                            f"{', '.join(PROBLEM_TYPES)}")
        if not self.metric:
            object.__setattr__(self, "metric", {"single_label": "eval_accuracy",
                                                "multi_label": "micro_f1",
                                                "regression": "pearson"}[self.problem_type])

    @property
    def is_regression(self):
        return self.problem_type == "regression"

    @property
    def is_multi_label(self):
        return self.problem_type == "multi_label"

    @property
    def num_labels(self):
        return len(self.labels) or 1

    def to_json(self):
        value = {"problem_type": self.problem_type, "labels": list(self.labels)}
        if self.thresholds:
            value["thresholds"] = list(self.thresholds)
        if self.window_stride:
            value.update(window_stride=self.window_stride, window_length=self.window_length)
        if self.target:
            value.update(target_mean=self.target[0], target_std=self.target[1])
        return value

    @classmethod
    def from_json(cls, value):
        return cls(value["problem_type"], tuple(value.get("labels", ())),
                   tuple(value.get("thresholds", ())), value.get("window_stride"),
                   value.get("window_length"), (value["target_mean"], value["target_std"])
                   if "target_mean" in value else None)

    def save(self, directory):
        atomic_write_text(os.path.join(directory, LABELS_FILE),
                          json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n")


def saved_labels(directory):
    """The LabelSet a run saved in `directory`, else None."""
    path = os.path.join(directory, LABELS_FILE) if directory else None
    if not path or not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return LabelSet.from_json(json.load(f))


def _is_number(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _is_integer(value):
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, int):
        return True
    text = str(value).strip()
    return text.lstrip("+-").isdigit()


def _label_name(value):
    """A single label's name: integers written as integers ("1", not "1.0")."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _label_list(value, delimiter):
    """A multi-label cell's names: a JSON list, a JSON-list string, or `delimiter`-joined."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = None
        if isinstance(value, str):
            return tuple(s.strip() for s in text.split(delimiter) if s.strip()) if delimiter \
                else None
    if isinstance(value, (list, tuple)):
        return tuple(_label_name(v) for v in value)
    return None


def _sorted_names(names):
    if all(_is_integer(n) for n in names):
        return tuple(sorted(names, key=lambda n: int(n)))
    return tuple(sorted(names))


def discover_labels(table, column, problem_type="auto", delimiter=None):
    """The LabelSet of a training table: the problem type (a column of lists, or with
    `delimiter`: multi-label; numbers written with a fraction: regression; else single-label)
    and the label names, integers in numeric order, else sorted as strings."""
    if column not in table.columns:
        raise _missing_column(table, column, "label_column_name")
    values = []
    for i, row in enumerate(table.rows):
        value = row.get(column)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise DataError(f"{table.where(i)}: no label in column {column!r}")
        values.append(value)
    if problem_type == "auto":
        if delimiter or all(_label_list(v, None) is not None for v in values):
            problem_type = "multi_label"
        elif all(_is_number(v) for v in values) and not all(_is_integer(v) for v in values):
            problem_type = "regression"
        else:
            problem_type = "single_label"
    if problem_type == "regression":
        scores = []
        for i, value in enumerate(values):
            if not _is_number(value):
                raise DataError(f"{table.where(i)}: {value!r} in column {column!r} is not a "
                                f"number (a regression target)")
            scores.append(float(value))
        std = statistics.pstdev(scores)
        if not std:
            raise DataError(f"{table.path}: every training example has the score {scores[0]:g}; "
                            f"a regression needs different ones")
        return LabelSet("regression", target=(statistics.fmean(scores), std))
    if problem_type == "multi_label":
        names = set()
        for i, value in enumerate(values):
            labels = _label_list(value, delimiter)
            if labels is None:
                raise DataError(f"{table.where(i)}: {value!r} in column {column!r} is not a list "
                                f"of labels (a JSON list, or give --label_delimiter)")
            names.update(labels)
        if len(names) < 2:
            raise DataError(f"{table.path}: the training examples use {len(names)} label(s) "
                            f"({', '.join(sorted(names))}); multi-label needs at least two")
        return LabelSet("multi_label", _sorted_names(names))
    names = {_label_name(v) for v in values}
    if len(names) < 2:
        raise DataError(f"{table.path}: every training example has the label "
                        f"{next(iter(names))!r}; a classifier needs at least two labels")
    return LabelSet("single_label", _sorted_names(names))


def _parse_label(table, i, value, column, label_set, delimiter):
    where = table.where(i)
    if label_set.is_regression:
        if not _is_number(value):
            raise DataError(f"{where}: {value!r} in column {column!r} is not a number "
                            f"(a regression target)")
        return float(value)
    if label_set.is_multi_label:
        labels = _label_list(value, delimiter)
        if labels is None:
            raise DataError(f"{where}: {value!r} in column {column!r} is not a list of labels")
        unknown = [n for n in labels if n not in label_set.labels]
        if unknown:
            raise DataError(f"{where}: label {unknown[0]!r} is not among the training file's "
                            f"labels ({', '.join(label_set.labels)})")
        return tuple(labels)
    name = _label_name(value)
    if name not in label_set.labels:
        raise DataError(f"{where}: label {name!r} is not among the training file's labels "
                        f"({', '.join(label_set.labels)})")
    return name


@dataclasses.dataclass
class LabeledText:
    """One split: examples (text, pair, label), the other columns of each row (kept for the
    predictions) and where they came from."""
    table: Table
    examples: list
    text_columns: tuple
    extra_columns: list
    extras: list

    @property
    def path(self):
        return self.table.path


def read_examples(table, label_set, columns=None, label_column="label", id_column=None,
                  labeled=True, delimiter=None, optional=False):
    """LabeledText of a table; every example has a non-empty text, and with `labeled` a label
    the LabelSet knows (with `optional`, or none: a test file's blank cells)."""
    columns = text_columns(table, columns)
    if labeled and label_column not in table.columns:
        raise _missing_column(table, label_column, "label_column_name")
    if id_column and id_column not in table.columns:
        raise _missing_column(table, id_column, "id_column_name")
    id_column = id_column or next((c for c in ID_COLUMNS if c in table.columns), None)
    extra_columns = [c for c in table.columns if c not in columns and c != label_column]
    examples, extras = [], []
    for i, row in enumerate(table.rows):
        texts = []
        for column in columns:
            value = row.get(column)
            text = "" if value is None else str(value)
            if not text.strip():
                raise DataError(f"{table.where(i)}: empty text in column {column!r}")
            texts.append(text)
        label = None
        if labeled:
            value = row.get(label_column)
            if value is None or (isinstance(value, str) and not value.strip()):
                if not optional:
                    raise DataError(f"{table.where(i)}: no label in column {label_column!r}")
            else:
                label = _parse_label(table, i, value, label_column, label_set, delimiter)
        guid = str(row.get(id_column, i)) if id_column else str(i)
        examples.append(Example(guid, texts[0], texts[1] if len(texts) > 1 else None, label))
        extras.append({c: row.get(c, "") for c in extra_columns})
    if not examples:
        raise DataError(f"{table.path} holds no examples")
    return LabeledText(table, examples, columns, extra_columns, extras)


@dataclasses.dataclass(frozen=True)
class Columns:
    """Which columns hold what (transformers' flag names): the text(s), the label, the id."""
    text: tuple = ()
    label: str = "label"
    id: str = None
    label_delimiter: str = None


def read_splits(files, columns=Columns(), problem_type="auto", run_dir=None, labels=None):
    """(LabelSet, {split: LabeledText}) of `files` ({"train"|"dev"|"test": path, Table,
    DataFrame or rows}). The labels are `labels` (a LabelSet: a benchmark's fixed list), else
    come from the training split, else from the LabelSet a training run saved in `run_dir`;
    one that differs from the saved one is refused (its head would not fit). Every check runs
    here, before anything is written."""
    saved = saved_labels(run_dir)
    tables = {split: read_table(source, f"{split} rows") for split, source in files.items()
              if source is not None}
    if labels is not None:
        label_set = labels
        if saved and (saved.problem_type, saved.labels) != (labels.problem_type, labels.labels):
            raise DataError(f"the run in {run_dir} was trained on other labels "
                            f"({_describe(saved)}); use another --output_dir")
    elif "train" in tables:
        label_set = discover_labels(tables["train"], columns.label, problem_type,
                                    columns.label_delimiter)
        if saved and (saved.problem_type, saved.labels, saved.target) != (
                label_set.problem_type, label_set.labels, label_set.target):
            raise DataError(f"{tables['train'].path}: its labels ({_describe(label_set)}) differ "
                            f"from those the run in {run_dir} was trained on "
                            f"({_describe(saved)}); use another --output_dir")
    elif saved:
        label_set = saved
    else:
        raise DataError(f"no training file and no {LABELS_FILE} in --output_dir={run_dir}: the "
                        f"labels come from the training file (or from the run that used it)")
    if problem_type not in ("auto", label_set.problem_type):
        raise DataError(f"--problem_type={problem_type}, but the run in {run_dir} is "
                        f"{label_set.problem_type}")
    splits, text = {}, columns.text
    for split, table in tables.items():
        labeled = split != "test" or columns.label in table.columns  # a test file's are checked
        splits[split] = read_examples(table, label_set, text, columns.label, columns.id,
                                      labeled=labeled, delimiter=columns.label_delimiter,
                                      optional=split == "test")
        if text and len(splits[split].text_columns) != len(text):
            raise DataError(f"{table.path}: text columns {', '.join(splits[split].text_columns)}; "
                            f"the training file's are {', '.join(text)}")
        text = splits[split].text_columns
    return label_set, splits


def _describe(label_set):
    if label_set.target:
        return "regression: mean {:g}, standard deviation {:g}".format(*label_set.target)
    return label_set.problem_type + (": " + ", ".join(label_set.labels) if label_set.labels
                                     else "")


def write_table(path, rows):
    """Rows (dicts with the same keys) as CSV or TSV with a header, or as JSON Lines, by
    `path`'s extension."""
    kind = table_format(path)
    if kind == "jsonl":
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [],
                                delimiter=DELIMITERS["." + kind], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    atomic_write_text(path, text)
