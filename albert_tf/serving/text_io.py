"""Texts in and results out for the predict CLI: .csv, .tsv and JSON Lines files read by column
as run_classifier reads them, other files of one or two tab-separated columns; JSON lines or
readable text, embeddings as .npy."""

import json
import os
import sys

import numpy as np
from absl import logging

from albert_tf.data import labeled_text, race
from albert_tf.outputs import make_parent_dir
from albert_tf.serving.predictor import PredictError


def read_input_file(path, text_columns=None, delimiter=None, text_from="", pairs=True):
    """(texts, texts_b or None, each row's other columns or None). A .csv, .tsv or JSON Lines
    file is read as run_classifier reads a test file: `text_columns` (one, or two for pairs),
    else the first of labeled_text.DEFAULT_TEXT_COLUMNS it has (`text_from`: where
    `text_columns` came from, for errors); a .csv's `delimiter`, else detected. Any other file
    is one text per line, or with `pairs` two tab-separated texts (without, a tab is part of
    the line's text)."""
    if not labeled_text.is_table(path):
        return (*_read_lines(path, pairs), None)
    data = labeled_text.read_unlabeled(path, text_columns, delimiter, text_from)
    texts_b = [ex.text_b for ex in data.examples] if len(data.text_columns) > 1 else None
    return [ex.text_a for ex in data.examples], texts_b, data.extras


def _read_lines(path, pairs=True):
    """(texts, texts_b or None): with `pairs`, a second tab-separated column makes pairs (all
    or none)."""
    if not os.path.isfile(path):
        raise PredictError(f"--input_file={path} not found")
    rows, blank = [], []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise PredictError(f"--input_file={path}: line {number} is not UTF-8 ({e.reason} "
                                   f"at byte {e.start + 1}); convert the file to UTF-8") from None
            if line.strip():
                rows.append((number, line.split("\t") if pairs else [line]))
            else:
                blank.append(number)
    if blank and rows:
        shown = ", ".join(map(str, blank[:10])) + (", ..." if len(blank) > 10 else "")
        logging.warning("--input_file=%s: %d blank line%s skipped (line %s): the results follow "
                        "its %d non-blank lines", path, len(blank), "" if len(blank) == 1
                        else "s", shown, len(rows))
    if not rows:
        raise PredictError(f"--input_file={path} holds no text")
    first = len(rows[0][1])
    if first <= 2:
        number, other = next(((n, r) for n, r in rows if len(r) != first), (None, None))
        if number is None:
            return [r[0] for _, r in rows], [r[1] for _, r in rows] if first == 2 else None
    else:
        number, other = rows[0]
    raise PredictError(f"--input_file={path}: every line needs one text or two tab-separated "
                       f"texts, all lines alike: line {rows[0][0]} has {first}, line {number} "
                       f"{len(other)}")


def format_text(result):
    """A short human-readable rendering of one result (--format=text)."""
    pair = f"  |  {result['text_b']}" if "text_b" in result else ""
    if "masks" in result:
        filled = result["filled"] + (f"  |  {result['filled_b']}" if "filled_b" in result else "")
        lines = [filled]
        for mask in result["masks"]:
            lines.append(f"  [MASK] {mask['mask'] + 1}: " + "  ".join(
                f"{p['text'] or p['token']} {p['probability']:.4f}" for p in mask["predictions"]))
        return "\n".join(lines)
    if "prediction" in result:  # a multiple-choice answer
        probabilities = ", ".join(f"{race.letter(i)} {p:.4f}"
                                  for i, p in enumerate(result["probabilities"]))
        return f"{result['prediction']} ({probabilities})\t{_one_line(result['question'])}"
    if "answer" in result:
        if result["answer"]:  # a checkpoint's n-best probability, an export's score
            found = (f"{_one_line(result['answer'])} [{result['start']}:{result['end']}] " + (
                f"{result['probability']:.4f}" if "probability" in result else
                f"score {result['score']:.4f}"))
        elif "null_odds" in result:
            found = f"(no answer: null_odds {result['null_odds']:.4f})"
        else:
            found = "(no answer: no span in the context)"
        return f"{found}\t{_one_line(result['question'])}"
    if "tags" in result:
        entities = "  ".join(f"{e['type']}: {e['text']} [{e['start']}:{e['end']}]"
                             for e in result["entities"])
        tagged = " ".join(f"{w}/{t}" for w, t in zip(result["words"], result["tags"]))
        return f"{tagged}\n  {entities or '(no entity)'}"
    if "score" in result:
        return f"{result['score']:.4f}\t{result['text']}{pair}"
    if "label" in result:
        names = result.get("labels")
        if names:
            probabilities = ", ".join(f"{n} {p:.4f}"
                                      for n, p in zip(names, result["probabilities"]))
        else:
            probabilities = " ".join(f"{p:.4f}" for p in result["probabilities"])
        label = result["label"]
        if isinstance(label, list):  # multi-label: those at or above their thresholds
            label = "|".join(label) or "(no label)"
        return f"{label} ({probabilities})\t{result['text']}{pair}"
    vector = result["embedding"]
    head = " ".join(f"{x:.4f}" for x in vector[:8])
    more = " ..." if len(vector) > 8 else ""
    return f"[{head}{more}] ({len(vector)} dims)\t{result['text']}{pair}"


def _one_line(text):
    """`text` with its tabs and line breaks (any whitespace run) as one space: a field of a
    tab-separated line."""
    return " ".join(text.split())


def _carried(result, columns):
    """`result` after the input's other `columns`, one named as a result's field (a gold
    `label`) as input_<name>."""
    return {**{f"input_{k}" if k in result else k: v for k, v in columns.items()}, **result}


def _render(result, columns, output_format):
    if output_format == "text":
        head = "".join(f"{v}\t" for v in columns.values())
        return head + format_text(result)
    return json.dumps(_carried(result, columns), ensure_ascii=False)


def write_results(results, output_file=None, vectors=None, stream=None, output_format="json",
                  columns=None):
    """One line (JSON, or with output_format="text" readable) per result, each after its row's
    `columns` (the input file's other columns: in JSON as fields, in text as tab-separated
    values); to `output_file`, else `stream` (stdout). An .npy `output_file` gets `vectors`."""
    if output_file and output_file.endswith(".npy"):
        if vectors is None:
            raise PredictError("--output_file=*.npy is for --task=embed")
        make_parent_dir(output_file)
        np.save(output_file, vectors)
        return
    columns = columns or [{}] * len(results)
    lines = "".join(_render(r, c, output_format) + "\n" for r, c in zip(results, columns))
    if output_file:
        make_parent_dir(output_file)
        with open(output_file, "w", encoding="utf-8") as f:
            f.write(lines)
    else:
        (stream or sys.stdout).write(lines)
        (stream or sys.stdout).flush()
