"""Your own labelled text: CSV, TSV and JSON Lines files (or rows from Python) read by column
name, the label set discovered from the training file and saved with the run, and the checks
that stop a run on bad input before anything is written.

Examples are `glue.Example`s, so features, caching and the trainer are the GLUE path's; a
multi-label example's label is a tuple of names.
"""

import contextlib
import csv
import dataclasses
import difflib
import io
import json
import math
import os
import re
import statistics

import tensorflow as tf
from absl import flags, logging

from albert_tf.data.glue import Example, unlimited_csv_fields
from albert_tf.data.text_files import read_text
from albert_tf.files import atomic_write_text

DELIMITERS = {".csv": ",", ".tsv": "\t"}
# A .csv's delimiter, when not given: whichever of these splits its header into the most fields.
CSV_DELIMITERS = (",", ";", "\t", "|")
DELIMITER_NAMES = {"tab": "\t", "\\t": "\t"}
JSON_LINES = (".jsonl", ".json", ".ndjson")
PROBLEM_TYPES = ("single_label", "multi_label", "regression")
LABELS_FILE = "labels.json"
# Column names tried, in order, when --text_column_names is not given.
DEFAULT_TEXT_COLUMNS = (("text",), ("sentence",), ("sentence1", "sentence2"), ("text_a", "text_b"))
ID_COLUMNS = ("id", "idx", "guid")
MAX_PROBLEMS = 20  # bad rows listed when a run stops; the rest are counted
WHOLE_FLOAT = re.compile(r"([+-]?\d+)\.0*")  # 1.0, 2.00: a whole number written as a float


class DataError(ValueError):
    """Input a run cannot use, said in one line naming the file (and line) at fault."""
    several_lines = False


class InputProblems(DataError):
    """Several bad rows: a line that counts them, then one line each (cli keeps the lines)."""
    several_lines = True

    def __init__(self, lines):
        more = len(lines) - MAX_PROBLEMS
        head = f"{len(lines)} problems in the input" + (
            f"; the first {MAX_PROBLEMS}, in file order:" if more > 0 else ", in file order:")
        super().__init__("\n".join([head, *lines[:MAX_PROBLEMS]]
                                   + ([f"and {more} more"] if more > 0 else [])))


class BadValue(ValueError):
    """What is wrong with one cell; the reader adds the file and line."""


class _Stop(Exception):
    """Nothing more of the input can be checked; the problems found say why."""


class Problems:
    """The bad rows found in one pass over the input files, each a line `file:line: what`,
    raised together by `raise_found` in file order (files in the order they were first seen)."""

    def __init__(self):
        self.files, self.found = {}, {}

    def start(self, path):
        self.files.setdefault(path, len(self.files))

    def add(self, path, line, what):
        self.start(path)
        self.found.setdefault((self.files[path], line, f"{path}:{line}: {what}"), len(self.found))

    def row(self, table, i, what):
        self.add(table.path, table.lines[i], what)

    def stop(self, path, message):
        """Stops the checks with `message` about the file `path`, or, when rows of it were bad
        (which may be why), with those."""
        if any(key[0] == self.files.get(path) for key in self.found):
            raise _Stop
        raise DataError(message)

    def raise_found(self, error=None):
        """Raises what was found, `error` (what stopped the reading) last; nothing if nothing."""
        lines = [key[2] for key in sorted(self.found, key=lambda k: (k[0], k[1], self.found[k]))]
        if error is not None:
            if not lines:
                raise error
            lines.append(str(error))
        if len(lines) == 1:
            raise DataError(lines[0])
        if lines:
            raise InputProblems(lines)


@contextlib.contextmanager
def _collecting(problems):
    """`problems`, or a Problems of the block's own, raised when the block ends (after the bad
    rows found before it, the error that ended the block)."""
    if problems is not None:
        yield problems
        return
    problems = Problems()
    try:
        yield problems
    except _Stop:
        pass
    except DataError as e:
        problems.raise_found(e)
    problems.raise_found()


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


def is_table(path):
    """Whether `path` names a file read by column (.csv, .tsv, JSON Lines)."""
    return os.path.splitext(path)[1].lower() in (*DELIMITERS, *JSON_LINES)


def table_format(path):
    ext = os.path.splitext(path)[1].lower()
    if is_table(path):
        return ext[1:] if ext in DELIMITERS else "jsonl"
    raise DataError(f"{path}: unknown file type {ext or '(no extension)'!r}; name it .csv, .tsv "
                    f"or .jsonl (JSON Lines: one object per line)")


def read_table(source, name=None, delimiter=None, problems=None):
    """A Table from a .csv/.tsv/.jsonl path, a pandas DataFrame or a list of dicts (`name` is
    what errors call the latter). A .csv file's delimiter is `delimiter`, else detected from its
    header. Bad rows are left out and raised together at the end (with `problems`, added
    there)."""
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
    text = read_text(path, DataError)
    with _collecting(problems) as problems:
        if kind == "jsonl":
            return _read_json_lines(path, text, problems)
        with unlimited_csv_fields():
            return _read_delimited(path, text, _delimiter(path, kind, text, delimiter), kind,
                                   problems)


def _delimiter(path, kind, text, given):
    """A .tsv's tab; a .csv's `given` delimiter (one character, or tab), else the one of
    CSV_DELIMITERS that splits its header line into the most fields (a comma on a tie)."""
    if kind == "tsv":
        return DELIMITERS[".tsv"]
    if given:
        given = DELIMITER_NAMES.get(given.lower(), given)
        if len(given) != 1:
            raise DataError(f"--delimiter={given}: one character (or tab)")
        if given in '"\r\n':
            raise DataError(f"--delimiter={given!r}: not a quote or a line break, which CSV "
                            f"reserves")
        return given
    header = text.split("\n", 1)[0].rstrip("\r")
    found = max(CSV_DELIMITERS, key=lambda d: _field_count(header, d))
    logging.info("%s: fields separated by %r (detected from its header; --delimiter sets it)",
                 path, found)
    return found


def _field_count(line, delimiter):
    try:
        return len(next(csv.reader([line], delimiter=delimiter), []))
    except csv.Error:
        return 0


def _read_delimited(path, text, delimiter, kind, problems):
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise DataError(f"{path}:{reader.line_num}: {e}") from None
    if not header or not any(h.strip() for h in header):
        raise DataError(f"{path}: no header line; the first line must name the columns")
    header = [h.strip() for h in header]
    rows, lines = [], []
    last = reader.line_num
    try:
        for row in reader:
            first, last = last + 1, reader.line_num  # a quoted field may span lines
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                problems.add(path, first, f"{len(row)} fields, the header has "
                             f"{len(header)} ({', '.join(header)})"
                             + (f" (a text holding the delimiter {delimiter!r} must be quoted)"
                                if len(row) > len(header) else "")
                             + (f"; a quote opened here runs to line {last}: is it closed?"
                                if last > first else ""))
                continue
            rows.append(dict(zip(header, row)))
            lines.append(first)
    except csv.Error as e:  # the rest of the file cannot be read
        problems.add(path, reader.line_num, str(e))
    return Table(path, header, rows, lines, kind)


def _read_json_lines(path, text, problems):
    rows, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            hint = " (a JSON array? write one object per line)" if line.strip() == "[" else ""
            problems.add(path, number, f"not a JSON object: {e.msg}{hint}")
            continue
        if not isinstance(row, dict):
            problems.add(path, number, f"a JSON {type(row).__name__}, not an object (column "
                                       f"name -> value)")
            continue
        rows.append(row)
        lines.append(number)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return Table(path, columns, rows, lines, "jsonl")


def define_column_flags(define):
    """The flags that say where a file's texts are, which run_classifier and predict share,
    through `define(kind, name, default, help)` (a script's flag-definition helper)."""
    define(flags.DEFINE_list, "text_column_names", None,
           "The text column, or two for a text pair; default: those the run (predict: --model) "
           "was trained on, else text, sentence, sentence1,sentence2 or text_a,text_b, "
           "whichever the file has.")
    define(flags.DEFINE_string, "delimiter", None,
           "The field delimiter of .csv files: one character, or 'tab'; default: whichever of "
           ", ; tab | splits the header line into the most fields.")


def _missing_column(table, column, flag):
    close = difflib.get_close_matches(column, table.columns, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if not close and table.format != "jsonl" and any(" " in c.strip() for c in table.columns):
        hint = (" (its first line is read as the header: add a header line naming the "
                "columns, or give the texts one per line in a .txt file)")
    return DataError(f"{table.path} has no column {column!r} (--{flag}); its columns: "
                     f"{', '.join(table.columns) or 'none'}{hint}")


def text_columns(table, names=None, named_by=""):
    """The one or two text columns: `names` (what `named_by` says, for errors: "the run's
    labels.json names them"), or the first of DEFAULT_TEXT_COLUMNS the file has."""
    if names:
        names = tuple(names)
        if len(names) > 2:
            raise DataError(f"--text_column_names={','.join(names)}: one text column, or two for "
                            f"a text pair")
        for name in names:
            if name not in table.columns:
                raise _missing_column(table, name, "text_column_names" + (
                    f", as {named_by}" if named_by else ""))
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
    standardized); `text_columns` are the columns a run read its texts from (the default of
    later runs and of `predict` on that run or its export)."""
    problem_type: str
    labels: tuple = ()
    thresholds: tuple = ()
    window_stride: int = None  # long texts read in windows this many tokens apart,
    window_length: int = None  # each of this many tokens with [CLS] and [SEP]
    target: tuple = None  # regression: the training scores' (mean, standard deviation)
    name: str = "text_classification"
    metric: str = ""
    text_columns: tuple = ()
    labels_of: str = ""  # a task's fixed list (CLUE's), named so; else the training file's

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
        if self.text_columns:
            value["text_columns"] = list(self.text_columns)
        return value

    @classmethod
    def from_json(cls, value):
        return cls(value["problem_type"], tuple(value.get("labels", ())),
                   tuple(value.get("thresholds", ())), value.get("window_stride"),
                   value.get("window_length"), (value["target_mean"], value["target_std"])
                   if "target_mean" in value else None,
                   text_columns=tuple(value.get("text_columns", ())))

    def save(self, directory):
        atomic_write_text(os.path.join(directory, LABELS_FILE),
                          json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n")


def saved_labels(directory):
    """The LabelSet a run saved in `directory` (labels.json), else a Hugging Face sequence
    classifier's there (config.json: id2label, problem_type), else None."""
    path = os.path.join(directory, LABELS_FILE) if directory else None
    if path and tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            return LabelSet.from_json(json.load(f))
    return _hf_classifier_labels(os.path.join(directory, "config.json")) if directory else None


def _hf_classifier_labels(path):
    """The labels of transformers' AlbertForSequenceClassification config.json at `path` (its
    id2label names, as its pipelines name the outputs), else None."""
    try:
        with tf.io.gfile.GFile(path) as f:
            config = json.load(f)
    except (ValueError, tf.errors.OpError):
        return None
    if not isinstance(config, dict) or "AlbertForSequenceClassification" not in (
            config.get("architectures") or ()):
        return None
    id2label = config.get("id2label") or {}
    count = len(id2label) or int(config.get("num_labels", 2))
    names = tuple(str(id2label.get(str(i), f"LABEL_{i}")) for i in range(count))
    problem = (config.get("problem_type") or ("regression" if count == 1 else
                                              "single_label_classification"))
    problem = problem.removesuffix("_classification")
    return LabelSet(problem, () if problem == "regression" else names)


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
    return text.lstrip("+-").isdigit() or bool(WHOLE_FLOAT.fullmatch(text))


def _written_as_float(value):
    return isinstance(value, float) or isinstance(value, str) and "." in value


def _label_name(value, fold_case=False):
    """A single label's name: whole numbers written as integers ("1", not "1.0"), surrounding
    space dropped, with `fold_case` in lower case."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value).strip()
    whole = WHOLE_FLOAT.fullmatch(text)
    text = whole.group(1) if whole else text
    return text.lower() if fold_case else text


def _label_list(value, delimiter):
    """A multi-label cell's labels as written: a JSON list, a JSON-list string, or
    `delimiter`-joined."""
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
        return tuple(value)
    return None


def _kind(value):
    """What a cell holds that is neither a text nor a number."""
    if isinstance(value, dict):
        return f"an object (keys: {', '.join(map(str, value)) or 'none'})"
    return "a list" if isinstance(value, (list, tuple)) else json.dumps(value)


def _cell_labels(value, column, problem_type, delimiter):
    """The labels of one cell as written: a multi-label cell's list, else the one label."""
    if problem_type == "multi_label":
        labels = _label_list(value, delimiter)
        if labels is None:
            raise BadValue(f"{value!r} in column {column!r} is not a list of labels (a JSON "
                           f"list, or give --label_delimiter)")
        return labels
    if isinstance(value, (dict, list, tuple)):
        raise BadValue(f"column {column!r} holds {_kind(value)}, not a label")
    return (value,)


def _score(value, column):
    if not _is_number(value):
        raise BadValue(f"{value!r} in column {column!r} is not a number (a regression target)")
    return float(value)


def _blank(value):
    return value is None or (isinstance(value, str) and not value.strip())


def _sorted_names(names):
    if all(_is_integer(n) for n in names):
        return tuple(sorted(names, key=lambda n: int(n)))
    return tuple(sorted(names))


def discover_labels(table, column, problem_type="auto", delimiter=None, fold_case=False,
                    problems=None):
    """The LabelSet of a training table: the problem type (a column of lists, or with
    `delimiter`: multi-label; numbers written with a fraction: regression; else single-label,
    whole numbers written as floats included) and the label names, integers in numeric
    order, else sorted as strings (with `fold_case`, in lower case). Labels that differ only
    by case or surrounding space are logged, as a warning without `fold_case`. Bad rows are
    raised together at the end (with `problems`, added there)."""
    if column not in table.columns:
        raise _missing_column(table, column, "label_column_name")
    if not table.rows:
        raise DataError(f"{table.path}: no examples (only a header line)")
    with _collecting(problems) as problems:
        values = {}
        for i, row in enumerate(table.rows):
            if _blank(row.get(column)):
                problems.row(table, i, f"no label in column {column!r}")
            else:
                values[i] = row[column]
        if table.rows and not values:
            raise _Stop
        if problem_type == "auto":
            problem_type = _problem_type(table.path, list(values.values()), delimiter)
        if problem_type == "regression":
            return _regression(table, column, values, problems)
        return _classes(table, column, values, problem_type, delimiter, fold_case, problems)


def _problem_type(path, values, delimiter):
    if delimiter or all(_label_list(v, None) is not None for v in values):
        return "multi_label"
    if all(_is_number(v) for v in values):
        if not all(_is_integer(v) for v in values):
            return "regression"
        floats = sorted({str(v).strip() for v in values if _written_as_float(v)})
        if floats:
            logging.info("%s: every label is a whole number, some written as floats (%s): "
                         "classes, not scores (--problem_type=regression reads them as scores)",
                         path, ", ".join(floats[:3]))
    return "single_label"


def _regression(table, column, values, problems):
    scores = []
    for i, value in values.items():
        try:
            scores.append(_score(value, column))
        except BadValue as e:
            problems.row(table, i, str(e))
    if not scores:
        raise _Stop
    std = statistics.pstdev(scores)
    if not std:
        problems.stop(table.path, f"{table.path}: every training example has the score "
                                  f"{scores[0]:g}; a regression needs different ones")
    return LabelSet("regression", target=(statistics.fmean(scores), std))


def _classes(table, column, values, problem_type, delimiter, fold_case, problems):
    names, written = set(), set()
    for i, value in values.items():
        try:
            labels = _cell_labels(value, column, problem_type, delimiter)
        except BadValue as e:
            problems.row(table, i, str(e))
            continue
        written.update(str(n) for n in labels)
        names.update(_label_name(n, fold_case) for n in labels)
    _log_case_variants(table.path, written, fold_case)
    if problem_type == "multi_label":
        if len(names) < 2:
            problems.stop(table.path, f"{table.path}: the training examples use {len(names)} "
                                      f"label(s) ({', '.join(sorted(names))}); multi-label needs "
                                      f"at least two")
        return LabelSet("multi_label", _sorted_names(names))
    if not names:
        raise _Stop  # every label was bad
    if len(names) < 2:
        problems.stop(table.path, f"{table.path}: every training example has the label "
                                  f"{next(iter(names))!r}; a classifier needs at least two labels")
    return LabelSet("single_label", _sorted_names(names))


def _log_case_variants(path, written, fold_case):
    """One line naming the labels written differently only in case or surrounding space."""
    spellings = {}
    for name in written:
        spellings.setdefault(name.strip().lower(), set()).add(name)
    variants = ", ".join(" / ".join(map(repr, sorted(s))) for _, s in sorted(spellings.items())
                         if len(s) > 1)
    if not variants:
        return
    if fold_case:
        logging.info("%s: labels that differ only in case or surrounding space: %s; each read "
                     "as one label, in lower case (--fold_label_case)", path, variants)
    else:
        logging.warning("%s: labels that differ only in case or surrounding space: %s; the "
                        "space is dropped, but each case is a label of its own "
                        "(--fold_label_case reads them as one, in lower case)", path, variants)


def _parse_label(value, column, label_set, delimiter, fold_case):
    if label_set.is_regression:
        return _score(value, column)
    names = tuple(_label_name(n, fold_case) for n in _cell_labels(
        value, column, label_set.problem_type, delimiter))
    unknown = [n for n in names if n not in label_set.labels]
    if unknown:
        raise BadValue(f"label {unknown[0]!r} is not among "
                       f"{label_set.labels_of or 'the training file'}'s labels "
                       f"({', '.join(label_set.labels)})")
    return names if label_set.is_multi_label else names[0]


@dataclasses.dataclass(frozen=True)
class Columns:
    """Which columns hold what (transformers' flag names): the text(s), the label, the id; how
    a multi-label cell joins its labels, a .csv file's delimiter (None: detected), and whether
    labels are read in lower case."""
    text: tuple = ()
    label: str = "label"
    id: str = None
    label_delimiter: str = None
    delimiter: str = None
    fold_label_case: bool = False
    text_from: str = ""  # where `text` came from when no flag named it, for the errors


@dataclasses.dataclass
class LabeledText:
    """One split: examples (text, pair, label), the other columns of each row (kept for the
    predictions), each row's label cell as the file has it (`label_cells`, under
    `label_column`; [] where the file has no label column) and where they came from."""
    table: Table
    examples: list
    text_columns: tuple
    extra_columns: list
    extras: list
    label_column: str = None
    label_cells: list = dataclasses.field(default_factory=list)

    @property
    def path(self):
        return self.table.path


def read_examples(table, label_set, columns=Columns(), labeled=True, optional=False,
                  problems=None):
    """LabeledText of a table; every example has a text (a string or number, not blank), and
    with `labeled` a label the LabelSet knows (with `optional`, or none: a test file's blank
    cells). Bad rows are left out and raised together at the end (with `problems`, added
    there)."""
    text = text_columns(table, columns.text, columns.text_from)
    if labeled and columns.label not in table.columns:
        raise _missing_column(table, columns.label, "label_column_name")
    if columns.id and columns.id not in table.columns:
        raise _missing_column(table, columns.id, "id_column_name")
    id_column = columns.id or next((c for c in ID_COLUMNS if c in table.columns), None)
    extra_columns = [c for c in table.columns if c not in text and c != columns.label]
    label_column = columns.label if columns.label in table.columns else None
    examples, extras, label_cells = [], [], []
    with _collecting(problems) as problems:
        for i, row in enumerate(table.rows):
            try:
                texts = [_text(row.get(c), c) for c in text]
                label = _row_label(row, label_set, columns, labeled, optional)
            except BadValue as e:
                problems.row(table, i, str(e))
                continue
            guid = str(row.get(id_column, i)) if id_column else str(i)
            examples.append(Example(guid, texts[0], texts[1] if len(texts) > 1 else None, label))
            extras.append({c: row.get(c, "") for c in extra_columns})
            if label_column:
                label_cells.append(row.get(label_column, ""))
        if not table.rows:
            problems.stop(table.path, f"{table.path} holds no examples")
    return LabeledText(table, examples, text, extra_columns, extras, label_column, label_cells)


def _text(value, column):
    if isinstance(value, (dict, list, tuple, bool)):
        raise BadValue(f"column {column!r} holds {_kind(value)}, not a text (a string or "
                       f"number)")
    text = "" if value is None else str(value)
    if not text.strip():
        raise BadValue(f"empty text in column {column!r}")
    return text


def _row_label(row, label_set, columns, labeled, optional):
    """The row's label: None unless `labeled`, or when blank and `optional`."""
    if not labeled:
        return None
    value = row.get(columns.label)
    if not _blank(value):
        return _parse_label(value, columns.label, label_set, columns.label_delimiter,
                            columns.fold_label_case)
    if not optional:
        raise BadValue(f"no label in column {columns.label!r}")
    return None


def read_unlabeled(source, text_columns=(), delimiter=None, text_from=""):
    """LabeledText of a file without labels (what predict reads): `text_columns` (one, or two
    for pairs; `text_from` says where they came from), else the first of DEFAULT_TEXT_COLUMNS
    it has; every bad row found in one pass, then all raised together."""
    with _collecting(None) as problems:
        table = read_table(source, delimiter=delimiter, problems=problems)
        problems.start(table.path)
        data = read_examples(table, None, Columns(tuple(text_columns or ()), label=None,
                                                  text_from=text_from),
                             labeled=False, problems=problems)
    return data


def read_splits(files, columns=Columns(), problem_type="auto", run_dir=None, labels=None,
                model_labels=None):
    """(LabelSet, {split: LabeledText}) of `files` ({"train"|"dev"|"test": path, Table,
    DataFrame or rows}). The labels are `labels` (a LabelSet: a benchmark's fixed list), else
    come from the training split, else from the LabelSet a training run saved in `run_dir`,
    else from `model_labels()` (those of the classifier the run starts from: a (LabelSet or
    None, what it is) pair, asked for only here); one that differs from the saved one is
    refused (its head would not fit). The text columns
    are `columns.text`, else those of the labels' run (without a training file), else the
    first file's of DEFAULT_TEXT_COLUMNS; the LabelSet returned names them. Every check runs
    here, before anything is written: every bad row of every file is found, then all are
    raised together."""
    with _collecting(None) as problems:
        tables = {}
        for split, source in files.items():
            if source is not None:
                tables[split] = read_table(source, f"{split} rows", columns.delimiter, problems)
                problems.start(tables[split].path)
        label_set = _label_set(tables, columns, problem_type, run_dir, labels, problems,
                               model_labels)
        if not columns.text and label_set.text_columns:
            columns = dataclasses.replace(columns, text=label_set.text_columns,
                                          text_from="the run's labels.json names them")
        splits = {}
        for split, table in tables.items():
            labeled = split != "test" or columns.label in table.columns  # a test file's are checked
            splits[split] = read_examples(table, label_set, columns, labeled=labeled,
                                          optional=split == "test", problems=problems)
            if columns.text and len(splits[split].text_columns) != len(columns.text):
                raise DataError(f"{table.path}: text columns "
                                f"{', '.join(splits[split].text_columns)}; the training file's "
                                f"are {', '.join(columns.text)}")
            columns = dataclasses.replace(columns, text=splits[split].text_columns)
    return dataclasses.replace(label_set, text_columns=columns.text), splits


def _label_set(tables, columns, problem_type, run_dir, labels, problems, model_labels):
    """`labels`, else the training table's, else the run's in `run_dir`, checked against the
    run's, else the model's."""
    saved = saved_labels(run_dir)
    if labels is not None:
        label_set = labels
        if saved and (saved.problem_type, saved.labels) != (labels.problem_type, labels.labels):
            raise DataError(f"the run in {run_dir} was trained on other labels "
                            f"({_describe(saved)}); use another --output_dir")
    elif "train" in tables:
        label_set = discover_labels(tables["train"], columns.label, problem_type,
                                    columns.label_delimiter, columns.fold_label_case, problems)
        path = tables["train"].path
        if saved and (saved.problem_type, saved.labels, saved.target) != (
                label_set.problem_type, label_set.labels, label_set.target):
            problems.stop(path, f"{path}: its labels ({_describe(label_set)}) differ from those "
                                f"the run in {run_dir} was trained on ({_describe(saved)}); use "
                                f"another --output_dir")
    elif saved:
        label_set = saved
        logging.info("The labels of the run in %s (no training file): %s", run_dir,
                     _describe(label_set))
    else:
        label_set, model = model_labels() if model_labels else (None, None)
        if label_set is None:
            beside = f", nor beside {model}" if model else ""
            raise DataError(f"no training file and no {LABELS_FILE} in --output_dir={run_dir}"
                            f"{beside}: the labels come from the training file, the run that "
                            f"used it, or the labels.json or Hugging Face id2label beside "
                            f"--init_checkpoint")
        logging.info("The labels of %s (no training file): %s", model, _describe(label_set))
    if problem_type not in ("auto", label_set.problem_type):
        raise DataError(f"--problem_type={problem_type}, but the run in {run_dir} is "
                        f"{label_set.problem_type}")
    return label_set


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
