"""The CLUE benchmark's classification tasks (Xu et al. 2020) as their downloads lay them out:
`<data_dir>/{train,dev,test}.json`, JSON Lines with each task's fields, the label lists of
CLUE's baselines (their order is the head's), and the `<task>_predict.json` submission."""

import dataclasses
import json
import os

from albert_tf.data import labeled_text

NLI = ("contradiction", "entailment", "neutral")
SPLIT_FILES = {"train": "train.json", "dev": "dev.json", "test": "test.json"}


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    text: tuple          # the field(s) read as the text (a pair with two)
    labels: tuple        # the baselines' label list, in their order


TASKS = {t.name: t for t in [
    Task("afqmc", ("sentence1", "sentence2"), ("0", "1")),
    Task("tnews", ("sentence",), tuple(str(100 + i) for i in range(17) if i not in (5, 11))),
    Task("iflytek", ("sentence",), tuple(str(i) for i in range(119))),
    Task("cmnli", ("sentence1", "sentence2"), NLI),
    Task("ocnli", ("sentence1", "sentence2"), NLI),
    Task("csl", ("keyword", "abst"), ("0", "1")),
    Task("cluewsc2020", ("text",), ("true", "false")),
]}
ALIASES = {"wsc": "cluewsc2020", "cluewsc": "cluewsc2020"}


def get_task(name):
    """The CLUE task called `name` (case-insensitive), else None."""
    key = (name or "").strip().lower()
    return TASKS.get(ALIASES.get(key, key))


def read_table(data_dir, task, split):
    """A split's rows, ready for `labeled_text`: CSL's keyword list joined by spaces (as CLUE's
    baseline reads it), CLUEWSC2020's spans marked in the text (the baseline's marks: _the
    noun_ and [the pronoun]), the NLI sets' unlabelled rows ("-") dropped from train and dev."""
    path = os.path.join(data_dir, SPLIT_FILES[split])
    table = labeled_text.read_table(path)
    rows, lines = [], []
    for row, line in zip(table.rows, table.lines):
        if split != "test" and str(row.get("label", "")).strip() == "-":
            continue
        if isinstance(row.get("keyword"), list):
            row = dict(row, keyword=" ".join(map(str, row["keyword"])))
        if task.name == "cluewsc2020":
            row = dict(row, text=_marked(row, f"{path}:{line}"))
        rows.append(row)
        lines.append(line)
    return dataclasses.replace(table, rows=rows, lines=lines)


def _marked(row, where):
    """The text with span1 (the noun) between underscores and span2 (the pronoun) in brackets,
    each checked against the text at its index."""
    text, target = str(row.get("text", "")), row.get("target") or {}
    spans = []
    for key, (left, right) in (("span1", ("_", "_")), ("span2", ("[", "]"))):
        span, start = target.get(f"{key}_text"), target.get(f"{key}_index")
        if not isinstance(span, str) or not isinstance(start, int) or \
                text[start:start + len(span)] != span:
            raise labeled_text.DataError(f"{where}: target.{key}_text {span!r} is not at "
                                         f"target.{key}_index {start!r} of the text")
        spans.append((start, start + len(span), left, right))
    for start, end, left, right in sorted(spans, reverse=True):  # the later span first
        text = text[:start] + left + text[start:end] + right + text[end:]
    return text


def read_splits(data_dir, task, splits, run_dir=None):
    """(LabelSet, {split: LabeledText}) of the wanted splits, the labels the task's list."""
    label_set = labeled_text.LabelSet("single_label", task.labels, name=task.name,
                                      labels_of=f"CLUE's {task.name.upper()} list")
    tables = {split: read_table(data_dir, task, split) for split in splits}
    return labeled_text.read_splits(tables, labeled_text.Columns(task.text, "label"),
                                    run_dir=run_dir, labels=label_set)


def submission(task, ids, labels):
    """`<task>_predict.json`'s text: {"id": …, "label": …} per line (TNEWS with an empty
    label_desc, as CLUE's baseline writes it)."""
    lines = []
    for i, label in zip(ids, labels):
        row = {"id": int(i) if str(i).isdigit() else i, "label": label}
        if task.name == "tnews":
            row["label_desc"] = ""
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    return "".join(lines)
