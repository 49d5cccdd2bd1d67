"""Your own data: CSV / TSV / JSON Lines by column name, labels discovered and carried into every
output, single-label / multi-label / regression, class weights, reports, and one line for each
bad input before anything is written."""

import csv
import json
import random
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from absl import app

from albert_tf import predict, run_classifier
from albert_tf.conversion import convert
from albert_tf.data import labeled_text
from albert_tf.data.glue import window_starts
from albert_tf.data.labeled_text import Columns, DataError, read_splits, read_table
from albert_tf.serving.classify import Classifier
from albert_tf.serving.text_io import format_text
from albert_tf.tasks import driver, reports
from albert_tf.tasks.labeled_text import (LabeledTextTask, capped_windows, class_weights,
                                          parse_class_weights)
from albert_tf.tokenization.loader import open_vocabulary
from albert_tf.training.checkpoint_files import record_run
from conftest import assert_step_compiled, memoized_runs, peers, run_main
from test_run_classifier import _sentence, assets, write_cola  # noqa: F401 (a fixture)
from tool_runner import run_tool_captured, run_tool_logged

ANIMALS, PLACES = ("cat", "dog"), ("house",)
PLAIN = [w for w in ("the sat on a mat while ran far away and sang in near by old saw young "
                     "walk home slowly today").split()]


# ---- reading ------------------------------------------------------------------------------------

def _write(path, rows, header=("id", "review", "label")):
    """rows of tuples as .csv/.tsv (csv module quoting) or .jsonl."""
    if str(path).endswith(".jsonl"):
        path.write_text("".join(json.dumps(dict(zip(header, r))) + "\n" for r in rows))
        return path
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t" if str(path).endswith(".tsv") else ",")
        writer.writerow(header)
        writer.writerows(rows)
    return path


ROWS = [("a1", "a dog, a cat", "pos"), ("a2", 'he said "no"', "neg"), ("a3", "tab\tin text", "pos")]


@pytest.mark.parametrize("ext", ["csv", "tsv", "jsonl"])
def test_each_format_reads_the_same_examples(tmp_path, ext):
    path = _write(tmp_path / f"train.{ext}", ROWS)
    label_set, splits = read_splits({"train": str(path)}, Columns(text=("review",)))
    assert label_set.labels == ("neg", "pos") and label_set.problem_type == "single_label"
    data = splits["train"]
    assert [(e.guid, e.text_a, e.label) for e in data.examples] == [
        (i, t, y) for i, t, y in ROWS]
    assert data.extra_columns == ["id"] and data.table.format == ext


def test_a_run_remembers_its_text_columns_for_later_files(tmp_path):
    """labels.json names the text columns a run read: a later predict-only run's test file
    with those columns needs no --text_column_names; an older labels.json, the defaults."""
    run = tmp_path / "run"
    run.mkdir()
    train = _write(tmp_path / "train.csv", ROWS, ("id", "body", "label"))
    label_set, _ = read_splits({"train": str(train)}, Columns(text=("body",)), run_dir=str(run))
    assert label_set.text_columns == ("body",)
    label_set.save(str(run))
    assert json.loads((run / "labels.json").read_text()) == {
        "problem_type": "single_label", "labels": ["neg", "pos"], "text_columns": ["body"]}
    test = _write(tmp_path / "test.jsonl", [("t1", "a new text")], ("id", "body"))
    saved, splits = read_splits({"test": str(test)}, run_dir=str(run))
    assert saved.text_columns == ("body",) and splits["test"].text_columns == ("body",)
    assert [e.text_a for e in splits["test"].examples] == ["a new text"]
    other = _write(tmp_path / "other.csv", [("t1", "a new text")], ("id", "review"))
    with pytest.raises(DataError, match=r"other.csv has no column 'body' \(--text_column_names, "
                                        r"as the run's labels.json names them\); its columns: "
                                        r"id, review$"):
        read_splits({"test": str(other)}, run_dir=str(run))
    (run / "labels.json").write_text('{"problem_type": "single_label", "labels": ["neg", "pos"]}')
    with pytest.raises(DataError, match=r"test.jsonl: name the text column\(s\) with "
                                        r"--text_column_names; its columns: id, body"):
        read_splits({"test": str(test)}, run_dir=str(run))
    test = _write(tmp_path / "test.csv", [("t1", "a new text")], ("id", "text"))
    assert read_splits({"test": str(test)}, run_dir=str(run))[1]["test"].text_columns == (
        "text",)


def test_a_byte_order_mark_rows_and_dataframes_read_alike(tmp_path):
    plain = _write(tmp_path / "plain.csv", ROWS)
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    rows = [dict(zip(("id", "review", "label"), r)) for r in ROWS]

    class Frame:  # what read_table uses of a pandas DataFrame
        def to_dict(self, orient):
            assert orient == "records"
            return rows
    tables = [read_table(str(plain)), read_table(str(bom)), read_table(rows), read_table(Frame())]
    assert all(t.columns == ["id", "review", "label"] for t in tables)
    assert all(t.rows == tables[0].rows for t in tables)
    assert read_table(rows, "train rows").where(1) == "train rows:2"


def test_labels_are_discovered_in_a_stated_order(tmp_path):
    def discover(values, **kwargs):
        table = read_table([{"text": "x", "label": v} for v in values])
        return labeled_text.discover_labels(table, "label", **kwargs)

    assert discover(["b", "a", "c", "a"]).labels == ("a", "b", "c")
    assert discover(["10", "2", "1"]).labels == ("1", "2", "10")  # integers in numeric order
    assert discover([3, 1.0, 2]).labels == ("1", "2", "3")        # 1.0 is the integer 1
    assert discover(["0.5", "1", "2.25"]).problem_type == "regression"
    assert discover(["0.5", "1", "2.25"], problem_type="single_label").labels == (
        "0.5", "1", "2.25")
    multi = discover([["x", "y"], [], '["z"]'])
    assert (multi.problem_type, multi.labels) == ("multi_label", ("x", "y", "z"))
    assert discover(["x|y", "z"], delimiter="|").labels == ("x", "y", "z")


def _error(tmp_path, files, columns=Columns(), run_dir=None):
    files = {k: str(_write(tmp_path / name, rows, header)) for k, (name, rows, header) in
             files.items()}
    with pytest.raises(DataError) as e:
        read_splits(files, columns, run_dir=run_dir)
    assert "\n" not in str(e.value)
    return str(e.value)


HEADER = ("id", "text", "label")
TRAIN = ("train.csv", [("1", "good day", "pos"), ("2", "bad day", "neg")], HEADER)


def test_each_bad_input_is_one_line_naming_file_and_line(tmp_path):
    t = str(tmp_path)
    assert _error(tmp_path, {"train": TRAIN, "dev": ("dev.csv", [("1", "x", "pos"), (
        "2", "y", "neutral")], HEADER)}) == (
        f"{t}/dev.csv:3: label 'neutral' is not among the training file's labels (neg, pos)")
    assert _error(tmp_path, {"train": TRAIN, "test": ("test.csv", [("1", "x", "maybe")],
                                                     HEADER)}) == (
        f"{t}/test.csv:2: label 'maybe' is not among the training file's labels (neg, pos)")
    assert _error(tmp_path, {"train": TRAIN}, Columns(label="lable")) == (
        f"{t}/train.csv has no column 'lable' (--label_column_name); its columns: id, text, "
        f"label; did you mean 'label'?")
    assert _error(tmp_path, {"train": TRAIN}, Columns(text=("txt",))).startswith(
        f"{t}/train.csv has no column 'txt' (--text_column_names)")
    assert _error(tmp_path, {"train": ("train.csv", [("1", " ", "pos"), ("2", "b", "neg")],
                                       HEADER)}) == f"{t}/train.csv:2: empty text in column 'text'"
    assert _error(tmp_path, {"train": ("train.csv", [("1", "a", "pos"), ("2", "b", "pos")],
                                       HEADER)}) == (
        f"{t}/train.csv: every training example has the label 'pos'; a classifier needs at "
        f"least two labels")
    assert _error(tmp_path, {"train": ("train.csv", [("1", "a", "pos"), ("2", "b", "")],
                                       HEADER)}) == f"{t}/train.csv:3: no label in column 'label'"
    assert "holds no examples" in _error(tmp_path, {"train": TRAIN, "dev": ("dev.csv", [],
                                                                            HEADER)})
    assert _error(tmp_path, {"dev": ("dev.csv", [("1", "a", "pos")], HEADER)}, run_dir=t) == (
        f"no training file and no labels.json in --output_dir={t}: the labels come from the "
        f"training file, the run that used it, or the labels.json or Hugging Face id2label "
        f"beside --init_checkpoint")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"text,label\nok,pos\ncaf\xe9,neg\n")
    with pytest.raises(DataError, match=r"latin.csv:3: byte 21 \(0xe9, column 4\) is not UTF-8; "
                                        r"save the file as UTF-8$"):
        read_table(str(latin))
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("text,label\na,pos\nb, c,neg\n")
    with pytest.raises(DataError, match=r"ragged.csv:3: 3 fields, the header has 2 \(text, "
                                        r"label\) \(a text holding the delimiter ',' must be "
                                        r"quoted\)"):
        read_table(str(ragged))
    stray = tmp_path / "stray.csv"  # its quote swallows the rows after it into one field
    stray.write_text('text,label\nok,pos\n"a stray quote,neg\nthird,pos\nfourth,neg\n')
    with pytest.raises(DataError, match=r"stray.csv:3: 1 fields, the header has 2 \(text, "
                                        r"label\); a quote opened here runs to line 5: is it "
                                        r"closed\?$"):
        read_table(str(stray))
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('text,label\n"two\nlines",pos\nnext,neg\n')
    table = read_table(str(quoted))
    assert table.rows == [{"text": "two\nlines", "label": "pos"},
                          {"text": "next", "label": "neg"}]
    assert table.lines == [2, 4]
    with pytest.raises(DataError, match=r"train.xlsx: unknown file type '.xlsx'"):
        read_table(str(tmp_path / "train.xlsx"))
    (tmp_path / "bad.jsonl").write_text('{"text": "a", "label": "x"}\n["b", "y"]\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: a JSON list, not an object"):
        read_table(str(tmp_path / "bad.jsonl"))


def test_every_bad_row_is_found_in_one_pass_in_file_order(tmp_path):
    t = str(tmp_path)
    train = tmp_path / "train.csv"
    train.write_text("text,label\nok,pos\nfine,neg\n,pos\nx,y,z,neg\nsad,\n")
    dev = tmp_path / "dev.jsonl"
    dev.write_text('{"text": "a", "label": "pos"}\n["b"]\n{"text": "c", "label": "meh"}\n')
    with pytest.raises(DataError) as e:
        read_splits({"train": str(train), "dev": str(dev)})
    assert e.value.several_lines and str(e.value).splitlines() == [
        "5 problems in the input, in file order:",
        f"{t}/train.csv:4: empty text in column 'text'",
        f"{t}/train.csv:5: 4 fields, the header has 2 (text, label) (a text holding the delimiter "
        f"',' must be quoted)",
        f"{t}/train.csv:6: no label in column 'label'",
        f"{t}/dev.jsonl:2: a JSON list, not an object (column name -> value)",
        f"{t}/dev.jsonl:3: label 'meh' is not among the training file's labels (neg, pos)"]
    rows = [{"text": "t" if i % 2 else " ", "label": "ab"[i % 2]} for i in range(50)]
    lines = str(pytest.raises(DataError, read_splits, {"train": rows}).value).splitlines()
    assert lines[0] == "25 problems in the input; the first 20, in file order:"
    assert lines[1:3] == ["train rows:1: empty text in column 'text'",
                          "train rows:3: empty text in column 'text'"]
    assert len(lines) == 22 and lines[-1] == "and 5 more"


def test_a_text_cell_holding_an_object_or_a_list_is_refused(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "fine", "label": "x"}\n{"text": {"body": "nested"}, "label": "y"}\n'
                    '{"text": ["a", "b"], "label": "x"}\n')
    lines = str(pytest.raises(DataError, read_splits, {"train": str(path)}).value).splitlines()
    assert lines[1:] == [
        f"{path}:2: column 'text' holds an object (keys: body), not a text (a string or number)",
        f"{path}:3: column 'text' holds a list, not a text (a string or number)"]
    with pytest.raises(DataError, match=r"^train rows:1: column 'label' holds an object "
                                        r"\(keys: name\), not a label$"):
        read_splits({"train": [{"text": "a", "label": {"name": "x"}}, {"text": "b", "label": "y"},
                               {"text": "c", "label": "x"}]})


def test_labels_differing_only_in_case_or_space_are_warned_of_and_can_be_folded(caplog):
    rows = [{"text": "t", "label": y} for y in ("positive", "positive ", "Positive", "neg")]
    with caplog.at_level("INFO", logger="absl"):
        label_set, splits = read_splits({"train": rows, "dev": rows})
    assert label_set.labels == ("Positive", "neg", "positive")
    assert ("train rows: labels that differ only in case or surrounding space: 'Positive' / "
            "'positive' / 'positive '; the space is dropped, but each case is a label of its "
            "own (--fold_label_case reads them as one, in lower case)") in caplog.messages
    label_set, splits = read_splits({"train": rows, "dev": rows}, Columns(fold_label_case=True))
    assert label_set.labels == ("neg", "positive")
    assert [e.label for e in splits["dev"].examples] == ["positive"] * 3 + ["neg"]


def test_whole_numbers_written_as_floats_are_classes(tmp_path, caplog):
    path = tmp_path / "train.csv"  # as pandas writes an integer column that had a missing value
    path.write_text("text,label\na,0.0\nb,1.0\nc,1.0\n")
    with caplog.at_level("INFO", logger="absl"):
        label_set, splits = read_splits({"train": str(path), "dev": [{"text": "d", "label": 1}]})
    assert (label_set.problem_type, label_set.labels) == ("single_label", ("0", "1"))
    assert [e.label for e in splits["train"].examples + splits["dev"].examples] == [
        "0", "1", "1", "1"]
    assert (f"{path}: every label is a whole number, some written as floats (0.0, 1.0): classes, "
            f"not scores (--problem_type=regression reads them as scores)") in caplog.messages
    assert read_splits({"train": str(path)}, problem_type="regression")[0].target == (
        pytest.approx(2 / 3), pytest.approx(0.4714, abs=1e-4))
    assert read_splits({"train": [{"text": "a", "label": v} for v in ("1.0", "1.5")]})[
        0].problem_type == "regression"


def test_a_csv_s_delimiter_is_detected_or_given(tmp_path, caplog):
    excel = tmp_path / "excel.csv"  # Excel in a European locale: ';', CRLF and a byte-order mark
    excel.write_bytes(b"\xef\xbb\xbftext;label\r\n\"a; b\";pos\r\nc, d;neg\r\n")
    with caplog.at_level("INFO", logger="absl"):
        table = read_table(str(excel))
    assert table.columns == ["text", "label"]
    assert [r["text"] for r in table.rows] == ["a; b", "c, d"]
    assert (f"{excel}: fields separated by ';' (detected from its header; --delimiter sets it)"
            in caplog.messages)
    for delimiter in ("\t", "|", ","):
        path = tmp_path / "other.csv"
        path.write_text(f"id{delimiter}text{delimiter}label\n1{delimiter}a{delimiter}b\n")
        assert read_table(str(path)).rows == [{"id": "1", "text": "a", "label": "b"}]
    one_column = tmp_path / "one.csv"
    one_column.write_text("text;label\na;b\n")
    assert read_table(str(one_column), delimiter="|").columns == ["text;label"]
    assert read_table(str(one_column), delimiter="tab").columns == ["text;label"]
    with pytest.raises(DataError, match=r"^--delimiter=;;: one character \(or tab\)$"):
        read_table(str(one_column), delimiter=";;")


def test_class_weights_balanced_and_named():
    table = read_table([{"text": "t", "label": y} for y in "aaab"])
    label_set, splits = read_splits({"train": table.rows})
    examples = splits["train"].examples
    assert class_weights(label_set, examples, "balanced") == pytest.approx((4 / 6, 4 / 2))
    assert class_weights(label_set, examples, parse_class_weights("b=3")) == (1.0, 3.0)
    with pytest.raises(DataError, match="--class_weights names c, not among the labels"):
        class_weights(label_set, examples, {"c": 2.0})
    with pytest.raises(DataError, match="label=weight pairs with positive weights"):
        parse_class_weights("a=0")
    multi, splits = read_splits({"train": [{"text": "t", "label": y} for y in
                                           (["a"], ["a", "b"], [], [])]})
    assert class_weights(multi, splits["train"].examples, "balanced") == (1.0, 3.0)


def test_the_report_s_figures_by_hand():
    labels, predicted = [0, 0, 1, 1, 2], [0, 1, 1, 1, 0]
    text, matrix = reports.classification_report(labels, predicted, ("a", "b", "c"))
    assert matrix.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:5]}
    assert rows == {"a": ["0.5000", "0.5000", "0.5000", "2"],
                    "b": ["0.6667", "1.0000", "0.8000", "2"],
                    "c": ["0.0000", "0.0000", "0.0000", "1"]}
    assert reports.averaged_f1(labels, predicted, 3) == pytest.approx(
        {"macro_f1": 1.3 / 3, "weighted_f1": (0.5 * 2 + 0.8 * 2) / 5})
    assert "accuracy 0.6000 on 5 examples" in text
    multi = reports.multi_label_f1([[1, 0], [1, 1], [0, 1]], [[1, 1], [0, 1], [0, 0]])
    assert multi == pytest.approx({"micro_f1": 4 / 7, "macro_f1": (2 / 3 + 0.5) / 2})


def test_a_report_of_many_classes_stays_quick_and_out_of_the_log(tmp_path, caplog):
    """119 classes (IFLYTEK's): the picture without a number in each cell (14,161 of them took a
    minute to draw), the matrix in the report file and not the log."""
    import time
    rng = np.random.RandomState(0)
    names = tuple(str(i) for i in range(119))
    labels, predicted = rng.randint(0, 119, 400), rng.randint(0, 119, 400)
    text, matrix = reports.classification_report(labels, predicted, names)
    start = time.perf_counter()
    assert reports.plot_confusion(matrix, names, str(tmp_path / "m.png")) is not None
    assert time.perf_counter() - start < 10
    assert (tmp_path / "m.png").stat().st_size < 500_000
    caplog.set_level("INFO", logger="absl")
    path = reports.write_report(str(tmp_path), "dev", text, 7)
    assert reports.CONFUSION_TITLE in open(path).read()
    assert reports.CONFUSION_TITLE not in caplog.text
    assert f"(its confusion matrix, 119 classes: in {path})" in caplog.text
    assert "accuracy" in caplog.text


# ---- end to end ---------------------------------------------------------------------------------

def _dataset(directory, seed, kind, ext):
    """Rows of a tiny learnable task: single (a marker word says 'good'), multi (which word
    groups occur) or regression (a score from the markers)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, n in (("train", 320), ("dev", 96), ("test", 40)):
        rows = []
        for i in range(n):
            if kind == "single":
                y = rng.random() < 0.35
                rows.append((f"{split}-{i}", _sentence(rng, y), "good" if y else "bad"))
                continue
            words = rng.choices(PLAIN, k=rng.randint(3, 8))
            groups = [g for g in (ANIMALS, PLACES) if rng.random() < 0.4]
            for group in groups:
                words.insert(rng.randint(0, len(words)), rng.choice(group))
            if kind == "multi":
                label = [name for name, g in (("animal", ANIMALS), ("place", PLACES))
                         if g in groups]
            else:  # scores far from 0, as years or prices are
                label = 1811.5 + 2 * len(groups)
            rows.append((f"{split}-{i}", " ".join(words), label))
        paths[split] = str(_write(directory / f"{split}.{ext}", rows))
    return paths


KINDS = {"single": "csv", "multi": "jsonl", "regression": "tsv"}


def _run(assets, out, precision, kind, jit="false", **flags):  # noqa: F811
    paths = _dataset(out.parent / f"data-{kind}", 0, kind, KINDS[kind])
    defaults = dict(strategy="one_device", learning_rate=6e-3, train_batch_size=16,
                    eval_batch_size=32, predict_batch_size=16, max_seq_length=32, log_steps=30)
    return run_main(run_classifier, defaults, {
        "train_file": paths["train"], "validation_file": paths["dev"],
        "test_file": paths["test"], "text_column_names": "review", "output_dir": out,
        "spm_model_file": assets["spm"], "init_checkpoint": assets["init"], "do_train": True,
        "do_eval": True, "do_predict": True, "train_step": 90, "warmup_step": 10,
        "save_checkpoints_steps": 45, "mixed_precision": precision, "jit_compile": jit,
        **flags})


@pytest.fixture(scope="module")
def runs(assets, tmp_path_factory):  # noqa: F811
    """One run per (kind, precision[, jit]): single-label CSV, multi-label JSON Lines and
    regression TSV (single-label under float32 and bfloat16 with XLA, the others under a
    reduced precision)."""
    # Two concepts (two word groups) take the tiny model longer than one marker word.
    steps = {kind: dict(train_step=150, save_checkpoints_steps=75)
             for kind in ("multi", "regression")}
    return memoized_runs(tmp_path_factory.mktemp("own"), lambda out, kind, precision, jit:
                         _run(assets, out, precision, kind, jit,
                              export_dir=out / "export", export_tflite="ids",
                              tflite_report=False, **steps.get(kind, {})))


def _eval(out):
    with open(out / "eval_results.txt") as f:
        return {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}


@pytest.mark.slow
@pytest.mark.parametrize("precision,jit", [("none", "false"), ("bfloat16", "true")])
def test_single_label_csv_names_its_labels_everywhere(runs, assets, precision, jit,  # noqa: F811
                                                      capsys):
    out = runs("single", precision, jit)
    assert_step_compiled(out, jit)
    results = _eval(out)
    assert set(results) == {"eval_accuracy", "eval_loss", "macro_f1", "weighted_f1",
                            "f1_bad", "f1_good", "global_step"}
    assert results["macro_f1"] == pytest.approx((results["f1_bad"] + results["f1_good"]) / 2)
    assert results["eval_accuracy"] > 0.85 and results["macro_f1"] > 0.85, results
    assert json.loads((out / "labels.json").read_text()) == {
        "problem_type": "single_label", "labels": ["bad", "good"], "text_columns": ["review"]}
    log = (out / "log.txt").read_text()
    assert f"Single-label labels from {out.parent}/data-single/train.csv, in this order: bad, " \
           f"good" in log
    assert "train (" in log and "320 examples (bad " in log and "tokens per example p50" in log
    report = (out / "classification_report.txt").read_text()
    assert "macro avg" in report and "weighted avg" in report
    assert "confusion matrix (rows: true label, columns: predicted)" in report
    matrix = [line.split()[1:] for line in report.splitlines()[-2:]]
    assert sum(int(v) for row in matrix for v in row) == 96
    assert (out / "confusion_matrix.png").read_bytes()[:4] == b"\x89PNG"
    worst = list(csv.DictReader(open(out / "worst_dev_examples.csv")))
    assert list(worst[0]) == ["id", "review", "label", "prediction", "p_bad", "p_good", "loss"]
    losses = [float(r["loss"]) for r in worst]
    assert losses == sorted(losses, reverse=True) and len(worst) == 96
    predictions = list(csv.DictReader(open(out / "predictions.csv")))
    assert list(predictions[0]) == ["id", "label", "prediction", "p_bad", "p_good"]
    assert [r["id"] for r in predictions] == [f"test-{i}" for i in range(40)]
    truth = [r["label"] for r in csv.DictReader(open(out.parent / "data-single" / "test.csv"))]
    assert [r["label"] for r in predictions] == truth  # the test file's own, as it has them
    assert np.mean([p["prediction"] == t for p, t in zip(predictions, truth)]) > 0.85
    assert all(p["prediction"] == max(("bad", "good"), key=lambda n: float(p[f"p_{n}"]))
               for p in predictions)
    assert (out / "submit_results.tsv").read_text().splitlines()[1].split("\t") == [
        "test-0", predictions[0]["prediction"]]

    # The names in every export: the serving SavedModel, labels.txt for LiteRT, predict.
    export = out / "export"
    assert (export / "labels.txt").read_text() == "bad\ngood\n"
    assert b"bad\ngood\n" in (export / "classifier_task_library.tflite").read_bytes()
    served = tf.saved_model.load(str(export)).signatures["serving_default"](
        text_a=tf.constant(["the zebra sat", "the cat sat"]))
    assert [v.decode() for v in served["labels"].numpy()] == ["good", "bad"]
    for model in (out, export, export / "classifier.tflite"):
        rows = Classifier(str(model))(["the zebra sat", "the cat sat"])
        assert [r["label"] for r in rows] == ["good", "bad"], model
        assert rows[0]["labels"] == ["bad", "good"]
    # predict reads the test file by column with no flag (the export remembers `review`) and
    # carries its id beside each prediction.
    test_file = out.parent / "data-single" / "test.csv"
    status, stdout, stderr = run_tool_captured(predict, capsys, "--task=classify",
                                               f"--model={export}", f"--input_file={test_file}")
    assert status == 0, stderr
    predicted = [json.loads(line) for line in stdout.splitlines()]
    reviews = [r["review"] for r in csv.DictReader(open(test_file))]
    assert [(r["id"], r["text"]) for r in predicted] == [
        (f"test-{i}", t) for i, t in enumerate(reviews)]
    if precision == "none":  # the predictions file of a bfloat16 run is as near as its rounding
        assert [r["label"] for r in predicted] == [p["prediction"] for p in predictions]


@pytest.mark.slow
def test_the_hugging_face_conversion_carries_id2label(runs, tmp_path):
    torch, transformers = peers()
    out = runs("single", "none", "false")
    convert(str(out), str(tmp_path / "hf"), "hf")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf")
    assert model.config.id2label == {0: "bad", 1: "good"}
    assert model.config.label2id == {"bad": 0, "good": 1}
    assert model.config.problem_type == "single_label_classification"
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    texts = ["the zebra sat on a mat", "the cat sat"]
    with torch.no_grad():
        theirs = torch.softmax(model(**tokenizer(texts, return_tensors="pt", padding=True))
                               .logits, -1).numpy()
    ours = [r["probabilities"] for r in Classifier(str(out))(texts)]
    np.testing.assert_allclose(theirs, ours, atol=1e-4)


@pytest.mark.slow
def test_the_same_data_as_csv_and_in_the_glue_layout_learn_the_same(assets, tmp_path):  # noqa: F811
    """cola's files and the same rows as a CSV with the labels as words ("0" -> bad, "1" ->
    good: the same ids in the same order) give the same features, so the same run."""
    truth = write_cola(str(tmp_path / "glue" / "CoLA"), seed=5, n_train=160, n_dev=64)
    assert truth
    for split in ("train", "dev"):
        rows = [line.rstrip("\n").split("\t") for line in
                open(tmp_path / "glue" / "CoLA" / f"{split}.tsv")]
        _write(tmp_path / f"{split}.csv", [(str(i), r[3], ("bad", "good")[int(r[1])])
                                           for i, r in enumerate(rows)])
    common = dict(strategy="one_device", mixed_precision="none", learning_rate=6e-3,
                  train_batch_size=16, eval_batch_size=32, max_seq_length=32,
                  spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
                  do_eval=True, train_step=40, warmup_step=5, save_checkpoints_steps=40)
    glue = run_main(run_classifier, common, dict(task_name="cola", data_dir=tmp_path / "glue",
                                                 output_dir=tmp_path / "out-glue"))
    own = run_main(run_classifier, common, dict(
        train_file=tmp_path / "train.csv", validation_file=tmp_path / "dev.csv",
        text_column_names="review", output_dir=tmp_path / "out-csv"))
    assert own["eval_accuracy"] == glue["eval_accuracy"]
    assert own["eval_loss"] == pytest.approx(glue["eval_loss"], rel=1e-5)
    assert json.loads((tmp_path / "out-glue" / "labels.json").read_text())["labels"] == ["0", "1"]


@pytest.mark.slow
# Under float16 only (float32's path: the single-label and windows tests): the thresholds and
# what applies them do not depend on the precision, and the reduced one is the harder.
def test_multi_label_json_lines_picks_thresholds_and_beats_all_negative(runs):
    out = runs("multi", "float16", "false")
    results = _eval(out)
    assert set(results) == {"eval_loss", "micro_f1", "macro_f1", "f1_animal", "f1_place",
                            "global_step"}
    # All-negative scores F1 0; all-positive 2p / (1 + p), p the share of positives.
    dev = np.array([[n in json.loads(line)["label"] for n in ("animal", "place")]
                    for line in open(out.parent / "data-multi" / "dev.jsonl")])
    all_positive = 2 * dev.mean() / (1 + dev.mean())
    assert results["micro_f1"] > all_positive + 0.1, (results, all_positive)
    saved = json.loads((out / "labels.json").read_text())
    assert saved["problem_type"] == "multi_label" and saved["labels"] == ["animal", "place"]
    assert len(saved["thresholds"]) == 2 and all(0 < t < 1 for t in saved["thresholds"])
    report = (out / "classification_report.txt").read_text()
    assert "thresholds (picked on this set for each label's best F1)" in report
    assert "micro avg" in report
    # The report's F1 at the picked thresholds, beside eval_results.txt's at 0.5 (the best's).
    picked, at_half = re.search(r"micro_f1 at these thresholds: ([\d.]+) \(at 0.5, as "
                                r"eval_results.txt scores every checkpoint: ([\d.]+)\)",
                                report).groups()
    assert float(at_half) == pytest.approx(results["micro_f1"], abs=1e-4)
    assert float(picked) > all_positive + 0.1
    predictions = [json.loads(line) for line in open(out / "predictions.jsonl")]
    assert list(predictions[0]) == ["id", "label", "prediction", "p_animal", "p_place"]
    truth = [json.loads(line)["label"] for line in
             open(out.parent / "data-multi" / "test.jsonl")]
    assert [p["label"] for p in predictions] == truth
    hits = [set(filter(None, p["prediction"].split("|"))) == set(t)
            for p, t in zip(predictions, truth)]
    assert np.mean(hits) > np.mean([not t for t in truth]) + 0.15  # all-negative's exact matches
    assert not (out / "submit_results.tsv").exists()  # the original's files are single-label
    # predict and the serving export apply the saved thresholds as the predictions file did.
    texts = [json.loads(line)["review"] for line in
             open(out.parent / "data-multi" / "test.jsonl")]
    expected = [sorted(filter(None, p["prediction"].split("|"))) for p in predictions]
    for model in (out, out / "export"):
        assert [r["label"] for r in Classifier(str(model))(texts)] == expected, model
    row = Classifier(str(out))(texts[:1])[0]
    assert format_text(row).split(" (")[0] == ("|".join(row["label"]) or "(no label)")
    served = tf.saved_model.load(str(out / "export")).signatures["serving_default"](
        text_a=tf.constant(texts))
    above = served["above_threshold"].numpy()
    assert [[n for n, hit in zip(("animal", "place"), row) if hit] for row in above] == expected
    np.testing.assert_array_equal(
        above, served["probabilities"].numpy() >= np.array(saved["thresholds"], np.float32))


def _scores(out, split):
    return np.array([float(r["label"]) for r in csv.DictReader(
        open(out.parent / "data-regression" / f"{split}.tsv"), delimiter="\t")])


@pytest.mark.slow
def test_regression_tsv_beats_the_mean(runs, tmp_path):
    """Scores near 1811-1816: the head learns them standardized (from 0 it would need
    thousands of steps to reach them); under bfloat16, whose 8 bits of mantissa the
    standardization must survive (float32's path: the single-label and windows tests)."""
    out = runs("regression", "bfloat16", "false")
    results = _eval(out)
    assert {"pearson", "spearman", "MSE", "eval_loss"} <= set(results)
    truth, train = _scores(out, "dev"), _scores(out, "train")
    assert results["MSE"] < 0.25 * np.var(truth), (results, np.var(truth))  # the mean's: var
    assert results["pearson"] > 0.9, results
    assert json.loads((out / "labels.json").read_text()) == {
        "problem_type": "regression", "labels": [], "target_mean": pytest.approx(train.mean()),
        "target_std": pytest.approx(train.std()), "text_columns": ["review"]}
    predictions = list(csv.DictReader(open(out / "predictions.tsv"), delimiter="\t"))
    assert list(predictions[0]) == ["id", "label", "prediction"]
    assert [float(r["label"]) for r in predictions] == _scores(out, "test").tolist()
    texts = ["the cat ran by the house", "the sat on a mat"]
    ours = [r["score"] for r in Classifier(str(out))(texts)]
    assert ours[0] > 1814 and ours[1] < 1813, ours
    # Converted, the standardization is folded into the head: transformers gives the scores.
    torch, transformers = peers()
    convert(str(out), str(tmp_path / "hf"), "hf")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf")
    assert model.config.problem_type == "regression" and model.config.num_labels == 1
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    with torch.no_grad():
        theirs = model(**tokenizer(texts, return_tensors="pt", padding=True)).logits[:, 0]
    np.testing.assert_allclose(theirs.numpy(), ours, atol=1e-2 * np.std(train))


@pytest.mark.slow
def test_class_weights_move_the_decision_toward_the_rare_class(assets, tmp_path):  # noqa: F811
    plain = _run(assets, tmp_path / "plain", "none", "single", train_step=30)
    weighted = _run(assets, tmp_path / "weighted", "none", "single", train_step=30,
                    class_weights="good=8")
    p_plain = [float(r["p_good"]) for r in csv.DictReader(open(tmp_path / "plain" /
                                                               "predictions.csv"))]
    p_weighted = [float(r["p_good"]) for r in csv.DictReader(open(tmp_path / "weighted" /
                                                                  "predictions.csv"))]
    assert np.mean(p_weighted) > np.mean(p_plain) + 0.05, (np.mean(p_plain), np.mean(p_weighted))
    assert plain["global_step"] == weighted["global_step"] == 30


@pytest.mark.parametrize("flags,message", [
    (dict(text_column_names="text"), "has no column 'text' (--text_column_names); its columns: "
                                      "id, review, label"),
    (dict(task_name="cola"), "give --task_name and --data_dir (GLUE), or --train_file"),
    (dict(do_eval=True), "--do_eval needs --validation_file"),
    (dict(test_file="out/predictions.csv", do_predict=True),
     "out/predictions.csv is the input --test_file="),
])
def test_a_bad_input_stops_the_script_before_anything_is_written(tmp_path, flags, message):
    train = _write(tmp_path / "train.csv", [("1", "good day", "pos"), ("2", "bad", "neg")])
    out = tmp_path / "out"
    if "test_file" in flags:  # the user's file where the predictions would go: kept
        out.mkdir()
        flags = dict(flags, test_file=_write(out / "predictions.csv", [("3", "fine", "pos")]),
                     text_column_names="review")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(app.UsageError) as e:
        run_main(run_classifier, {}, dict(train_file=train, output_dir=out, do_train=True,
                                          **flags))
    assert message in str(e.value)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert out.exists() == ("test_file" in flags)  # no output directory made for a mistake


def test_typed_options_check_values_as_the_command_line_does():
    from albert_tf.tasks import FinetuningOptions
    options = FinetuningOptions(output_dir="out", learning_rate=1)
    assert options.learning_rate == 1.0 and isinstance(options.learning_rate, float)
    assert (options.max_seq_length, options.padding, options.on_loss_spike) == (512, "bucket",
                                                                                 "warn")
    for bad, message in ((dict(learning_rate=-1.0), "learning_rate=-1.0: .*positive"),
                         (dict(padding="longest"), "padding='longest': one of bucket, batch"),
                         (dict(train_batch_size=0), "train_batch_size=0: .*positive integer"),
                         (dict(do_train="yes"), "do_train='yes': expected bool")):
        with pytest.raises(ValueError, match=message):
            FinetuningOptions(**bad)
    with pytest.raises(TypeError, match="train_steps"):
        FinetuningOptions(train_steps=5)

    class Parsed:  # a script's flags: the fields it has are taken, the others keep defaults
        learning_rate, max_seq_length, task_name = 3e-5, 128, "cola"
    options = FinetuningOptions.from_flags(Parsed())
    assert (options.learning_rate, options.max_seq_length, options.train_step) == (3e-5, 128,
                                                                                    1000)


@pytest.mark.slow
def test_fine_tunes_on_rows_from_python_without_flags(assets, tmp_path):  # noqa: F811
    from albert_tf.tasks import FinetuningOptions, LabeledTextTask, prepare, run_finetuning
    rng = random.Random(3)
    rows = {split: [{"review": _sentence(rng, y), "sentiment": "good" if y else "bad"}
                    for y in (rng.random() < 0.4 for _ in range(n))]
            for split, n in (("train", 320), ("dev", 64))}
    options = FinetuningOptions(
        output_dir=str(tmp_path / "out"), init_checkpoint=assets["init"],
        spm_model_file=assets["spm"], do_train=True, do_eval=True, train_step=90,
        warmup_step=10, save_checkpoints_steps=90, learning_rate=6e-3, train_batch_size=16,
        eval_batch_size=32, max_seq_length=32, strategy="one_device", mixed_precision="none")
    task = LabeledTextTask.from_files(
        prepare(options), train=rows["train"], dev=rows["dev"], max_seq_length=32,
        columns=Columns(text=("review",), label="sentiment"), run_dir=options.output_dir)
    best = run_finetuning(task, options)
    assert best["eval_accuracy"] > 0.85, best
    assert json.loads((tmp_path / "out" / "labels.json").read_text())["labels"] == ["bad", "good"]
    worst = list(csv.DictReader(open(tmp_path / "out" / "worst_dev_examples.csv")))
    assert list(worst[0])[:3] == ["id", "review", "label"]


def _long_texts(directory, seed):
    """Texts of 14-20 words with the marker (label good) anywhere: past the first window in
    most of them."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, n in (("train", 320), ("dev", 96)):
        rows = []
        for i in range(n):
            y = rng.random() < 0.5
            words = rng.choices(PLAIN, k=rng.randint(14, 20))
            if y:
                words.insert(rng.randint(0, len(words)), "zebra")
            rows.append((f"{split}-{i}", " ".join(words), "good" if y else "bad"))
        paths[split] = str(_write(directory / f"{split}.csv", rows))
    return paths


def _one_long_text(directory):
    """A WordPiece tokenizer of PLAIN's words and rows: 20 texts of 4 words (one window of 6
    pieces at max_seq_length 8) and one of 63 words (windows every 3 pieces, 0, 3, ..., 57:
    20 windows), its words."""
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *PLAIN]) + "\n")
    rng = random.Random(0)
    long_words = rng.choices(PLAIN, k=63)
    rows = [{"review": " ".join(rng.choices(PLAIN, k=4)), "label": "bad"} for _ in range(20)]
    rows.append({"review": " ".join(long_words), "label": "good"})
    return open_vocabulary(str(vocab)), rows, long_words


def test_windows_are_capped_per_text_in_training_spread_over_it_and_all_read_in_evaluation(
        tmp_path, caplog):
    tokenizer, rows, long_words = _one_long_text(tmp_path)

    def task(**kwargs):
        return LabeledTextTask.from_files(tokenizer, train=rows, dev=rows, max_seq_length=8,
                                          cache_dir=str(tmp_path / "cache"), long_text="windows",
                                          columns=Columns(text=("review",)), **kwargs)
    with caplog.at_level("INFO", logger="absl"):
        capped = task(max_windows_per_text=4)
        train, dev = capped.train_features(), capped.eval_sets()[0][1]
    division = ("21 examples (bad 20, good 1); tokens per example p50 6, p95 6, p99 53; 4.8% "
                "longer than --max_seq_length=8 (read in 40 windows in all: 50.0% of them from "
                "the longest 1% of the examples (1), at most 20 from one)")
    assert f"train (train rows): {division}" in caplog.messages
    assert f"dev (dev rows): {division}" in caplog.messages
    assert ("Training reads at most 4 windows of a text (--max_windows_per_text), spread evenly "
            "over it: 16 of 40 windows dropped, from 1 text; 24 training windows, 16.7% of them "
            "from the longest 1% of the texts (evaluation and predictions read every window)"
            in caplog.messages)
    # The long text's windows 0, 6, 13 and 19 (of 0-19): pieces 0, 18, 39 and 57 on, its end.
    ids = [tokenizer.vocab[w] for w in long_words]
    starts = np.cumsum(train["lengths"])[20:] - train["lengths"][20:]
    assert [list(train["input_word_ids"][s + 1:s + 7]) for s in starts] == [
        ids[i:i + 6] for i in (0, 18, 39, 57)]
    assert list(train["host_example"]) == [*range(20), 20, 20, 20, 20]
    assert list(train["label_ids"]) == [0] * 20 + [1] * 4
    assert len(train["input_word_ids"]) == train["lengths"].sum() == 20 * 6 + 4 * 8
    # Evaluation reads every window of every text.
    assert len(dev["lengths"]) == 40 and list(dev["host_example"][20:]) == [20] * 20
    assert len(task(max_windows_per_text=0).train_features()["lengths"]) == 40
    assert len(task().train_features()["lengths"]) == 20 + 8  # the default, 8
    # The case: 399 texts of one window and one of 363.
    assert reports.window_division([1] * 399 + [363]) == {
        "windows": 762, "longest": 4, "longest_share": 366 / 762, "most_windows": 363}
    assert list(capped_windows([0, 1, 1, 1, 1, 1, 2], 2)) == [0, 1, 5, 6]
    assert list(capped_windows([0, 0, 0, 1, 1, 1, 1], 1)) == [0, 3]
    with pytest.raises(DataError, match=r"^--max_windows_per_text=-1: 0 \(every window\) or "
                                        r"more$"):
        task(max_windows_per_text=-1)


def test_run_classifier_caps_training_windows_as_max_windows_per_text_says(tmp_path,
                                                                           monkeypatch):
    tokenizer, rows, _ = _one_long_text(tmp_path)
    train = _write(tmp_path / "train.csv", [(i, r["review"], r["label"])
                                            for i, r in enumerate(rows)])
    monkeypatch.setattr(driver, "prepare", lambda options, head_names=None: tokenizer)
    monkeypatch.setattr(driver, "run_finetuning", lambda task, options, data: task.train_features())
    common = dict(train_file=train, text_column_names="review", do_train=True, max_seq_length=8,
                  long_text="windows", output_dir=tmp_path / "out")
    windows = {cap: len(run_main(run_classifier, common, {"max_windows_per_text": cap})[
        "lengths"]) for cap in (None, 3, 0)}
    assert windows == {None: 20 + 8, 3: 20 + 3, 0: 40}


def test_a_training_file_with_only_a_header_says_so(tmp_path):
    path = _write(tmp_path / "train.csv", [])
    with pytest.raises(DataError, match=r"train.csv: no examples \(only a header line\)$"):
        read_splits({"train": str(path)})


def test_a_rerun_without_the_column_flags_reads_the_files_as_the_run_did(tmp_path, monkeypatch,
                                                                          caplog):
    """Resuming a run on its own data without --text_column_names, --label_column_name and
    --fold_label_case: run.json's, so the training file's review and sentiment columns (names
    no default finds) are read again, Good and good one label; one given is the rerun's own."""
    tokenizer, rows, _ = _one_long_text(tmp_path)
    train = _write(tmp_path / "train.csv", [(i, r["review"], r["label"].title() if i % 2 else
                                             r["label"]) for i, r in enumerate(rows)],
                   header=("id", "review", "sentiment"))
    out = tmp_path / "out"
    out.mkdir()
    record_run(str(out), "fine-tuning of text_classification", {
        "max_seq_length": 8, "text_column_names": ["review"], "label_column_name": "sentiment",
        "fold_label_case": True})
    monkeypatch.setattr(driver, "prepare", lambda options, head_names=None: tokenizer)
    monkeypatch.setattr(driver, "run_finetuning",
                        lambda task, options, data: (task.label_set, data))
    common = dict(train_file=train, do_train=True, output_dir=out)
    with caplog.at_level("INFO", logger="absl"):
        label_set, settings = run_main(run_classifier, common, {})
    assert (label_set.labels, label_set.text_columns) == (("bad", "good"), ("review",))
    assert {k: settings[k] for k in ("text_column_names", "label_column_name",
                                     "fold_label_case")} == {
        "text_column_names": ["review"], "label_column_name": "sentiment", "fold_label_case": True}
    assert f"--text_column_names=review, as the run in {out} trained (run.json)" in caplog.messages
    assert f"--fold_label_case=True, as the run in {out} trained (run.json)" in caplog.messages
    with pytest.raises(app.UsageError, match=r"has no column .label. \(--label_column_name\)"):
        run_main(run_classifier, common, {"label_column_name": "label"})


@pytest.mark.slow
def test_a_run_on_its_own_data_exports_from_its_directory_alone(runs, tmp_path, caplog,
                                                                capsys, monkeypatch):
    """`--output_dir=RUN --export_dir=DIR` exports RUN with no data flag (its labels.json and
    run.json say what it is; from another directory too), the LiteRT report scored on the
    run's dev file, or skipped when that is gone; with --do_predict on a --test_file the run
    predicts, then exports; a directory without a run says so."""
    trained = runs("single", "none", "false")
    out = tmp_path / "run"
    shutil.copytree(trained, out, ignore=shutil.ignore_patterns("export", "predictions.csv"))
    data = trained.parent / "data-single"
    texts = ["the zebra sat", "the cat sat", "a cat ran home"]
    run_rows = Classifier(str(out))(texts)
    monkeypatch.chdir(tmp_path)

    def export(name, **flags):
        run_main(run_classifier, {}, {"output_dir": "run", "export_dir": name,
                                      "export_tflite": "ids", **flags})
        return tmp_path / name

    with caplog.at_level("INFO", logger="absl"):
        alone = export("alone")
    assert (alone / "labels.txt").read_text() == "bad\ngood\n"
    for model in (alone, alone / "classifier.tflite"):
        rows = Classifier(str(model))(texts)
        assert [r["label"] for r in rows] == [r["label"] for r in run_rows], model
        np.testing.assert_allclose([r["probabilities"] for r in rows],
                                   [r["probabilities"] for r in run_rows], atol=1e-4)
    assert f"--validation_file={data / 'dev.csv'}, as the run in run trained (run.json)" \
        in caplog.messages
    # The files an export alone does not read are taken (the run's task) without saying so.
    assert not [m for m in caplog.messages if m.startswith(("--train_file=", "--test_file="))]
    report = json.loads((alone / "tflite_report.json").read_text())
    assert report["ids_model"]["dev"]["eval_accuracy"] == pytest.approx(
        _eval(out)["eval_accuracy"], abs=1.5 / 96)

    started = json.loads((out / "run.json").read_text())
    started["settings"]["validation_file"] = str(tmp_path / "moved.csv")
    (out / "run.json").write_text(json.dumps(started))
    caplog.clear()
    with caplog.at_level("INFO", logger="absl"):
        unscored = export("unscored")
    assert (f"--validation_file={tmp_path / 'moved.csv'} (the run's) is not there: exporting "
            f"without it") in caplog.messages
    assert "no dev set to score the .tflite files on: no --validation_file" in caplog.messages
    assert not (unscored / "tflite_report.json").exists()

    assert not (out / "predictions.csv").exists()
    export("predicted", test_file=data / "test.csv", do_predict=True)
    assert len(list(csv.DictReader(open(out / "predictions.csv")))) == 40
    assert (tmp_path / "predicted" / "labels.txt").read_text() == "bad\ngood\n"

    status, _, err = run_tool_captured(run_classifier, capsys, "--output_dir=nope",
                                       "--export_dir=e")
    assert status == 2 and err.strip().splitlines()[-1].endswith(
        "(your own data); --output_dir=nope does not exist, so there is no run to take them "
        "from"), err


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["none", "bfloat16"])
def test_long_texts_read_in_windows_everywhere(assets, tmp_path, precision):  # noqa: F811
    paths = _long_texts(tmp_path / "data", 4)
    common = dict(strategy="one_device", mixed_precision=precision, learning_rate=3e-3,
                  train_batch_size=16, eval_batch_size=32, predict_batch_size=16,
                  max_seq_length=16, train_file=paths["train"], validation_file=paths["dev"],
                  test_file=paths["dev"], text_column_names="review",
                  spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
                  do_eval=True, train_step=150, warmup_step=15, save_checkpoints_steps=75)
    truncated = run_main(run_classifier, common, dict(output_dir=tmp_path / "truncate"))
    out = tmp_path / "windows"
    windows = run_main(run_classifier, common, dict(
        output_dir=out, long_text="windows", do_predict=True, export_dir=out / "export",
        export_tflite="both", tflite_report=False))
    # The marker is past the first 14 tokens in most texts: truncation cannot see it.
    assert windows["eval_accuracy"] > 0.85 > truncated["eval_accuracy"] + 0.1, (
        windows, truncated)
    saved = json.loads((out / "labels.json").read_text())
    assert (saved["window_stride"], saved["window_length"]) == (7, 16)
    # predict (checkpoint and ids-level .tflite, windows in Python), the serving export and the
    # string-in .tflite (windows in the graph) pool as evaluation did: the predictions file's
    # probabilities.
    predictions = list(csv.DictReader(open(out / "predictions.csv")))
    texts = [r["review"] for r in csv.DictReader(open(paths["dev"]))]
    expected = np.array([[float(p["p_bad"]), float(p["p_good"])] for p in predictions])
    served = tf.saved_model.load(str(out / "export")).signatures["serving_default"](
        text_a=tf.constant(texts))
    # The exports and predict run in float32; a bfloat16 run's file is as near as its rounding.
    atol = 1e-4 if precision == "none" else 3e-2
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=atol)
    for model in (out / "export" / "classifier.tflite",
                  out / "export" / "classifier_text.tflite"):
        got = [r["probabilities"] for r in Classifier(str(model))(texts)]
        np.testing.assert_allclose(got, expected, atol=atol)
    status, log = run_tool_logged(predict, "--task=classify", f"--model={out}",
                                  f"--input_file={paths['dev']}", f"--output_file={out}/p.jsonl")
    got = [json.loads(line)["probabilities"] for line in open(out / "p.jsonl")]
    np.testing.assert_allclose(got, expected, atol=atol)
    vocabulary = open_vocabulary(assets["spm"])
    count = sum(len(window_starts(len(vocabulary.encode(t)), 14, 7)) for t in texts)
    assert count > len(texts) and (
        f"Read the {len(texts)} texts in {count} windows of 16 tokens, stride 7, as the model's "
        f"run did (--long_text=windows): each text's logits averaged") in log, log


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["none", "bfloat16", "float16"])
def test_a_warm_start_reads_the_head_s_rows_by_label_not_by_position(runs, tmp_path, caplog,
                                                                      precision):
    """A classifier whose labels.json (or Hugging Face id2label) orders the labels otherwise
    than the data: its head's rows are reordered to the data's, so each label keeps its row
    (before: read by position, "good" scored as "bad" without a word)."""
    trained = runs("single", "none", "false")
    init = tmp_path / "init"
    shutil.copytree(trained, init, ignore=shutil.ignore_patterns("export", "*.npz"))
    saved = json.loads((init / "labels.json").read_text())
    assert saved["labels"] == ["bad", "good"]
    # The same head, said to be a model whose row 0 is "good" (as a Hugging Face id2label can).
    (init / "labels.json").write_text(json.dumps({**saved, "labels": ["good", "bad"]}))
    data = trained.parent / "data-single"
    out = tmp_path / "out"
    with caplog.at_level("INFO", logger="absl"):
        run_main(run_classifier, {}, {
            "test_file": str(data / "test.csv"), "text_column_names": "review",
            "train_file": str(data / "train.csv"), "output_dir": out,
            "spm_model_file": None, "init_checkpoint": str(init), "do_train": False,
            "do_eval": False, "do_predict": True, "max_seq_length": 32,
            "mixed_precision": precision, "strategy": "one_device"})
    assert ("its rows reordered to this task's bad, good" in caplog.text), caplog.text
    before = list(csv.DictReader(open(trained / "predictions.csv")))
    after = list(csv.DictReader(open(out / "predictions.csv")))
    # init's row 0 (trained as "bad") now claims "good": reordered, "good" reads that row.
    np.testing.assert_allclose([float(r["p_good"]) for r in after],
                               [float(r["p_bad"]) for r in before],
                               atol=1e-5 if precision == "none" else 3e-2)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["none", "bfloat16", "float16"])
def test_predicting_without_the_training_file_takes_the_classifier_s_labels(
        runs, assets, tmp_path, caplog, precision):  # noqa: F811
    """--test_file alone and a fresh --output_dir: the labels are those of the classifier in
    --init_checkpoint (its labels.json; a Hugging Face id2label), as its head was trained for
    (before: refused, no training file)."""
    trained = runs("single", "none", "false")
    data = trained.parent / "data-single"
    init = tmp_path / "init"
    shutil.copytree(trained, init, ignore=shutil.ignore_patterns("export", "*.npz"))
    models = {"ours": init}
    if precision == "none":
        convert(str(trained), str(tmp_path / "hf"), "hf")
        models["hf"] = tmp_path / "hf"
        models["prefix"] = init / "model.ckpt-best"  # a checkpoint in a run's directory
    before = list(csv.DictReader(open(trained / "predictions.csv")))
    for kind, model in models.items():
        out = tmp_path / f"out-{kind}"
        with caplog.at_level("INFO", logger="absl"):  # a run's own length, else given
            run_main(run_classifier, {}, {
                "test_file": str(data / "test.csv"), "text_column_names": "review",
                "output_dir": out, "spm_model_file": None, "init_checkpoint": str(model),
                "do_train": False, "do_eval": False, "do_predict": True,
                "max_seq_length": 32 if kind == "hf" else None,
                "mixed_precision": precision, "strategy": "one_device"})
        assert (f"--max_seq_length=32, as the run in {init} trained (run.json)" in caplog.text
                or kind == "hf"), caplog.text
        assert (f"The labels of {init if kind == 'prefix' else model} (no training file): "
                f"single_label: bad, good") in caplog.text, caplog.text
        assert "labels from the run's labels.json" not in caplog.text  # (not this run's)
        assert (f"predicting with {model}, which holds a text_classification head"
                in caplog.text), caplog.text
        after = list(csv.DictReader(open(out / "predictions.csv")))
        assert list(after[0]) == ["id", "label", "prediction", "p_bad", "p_good"]
        np.testing.assert_allclose([float(r["p_good"]) for r in after],
                                   [float(r["p_good"]) for r in before],
                                   atol=1e-4 if precision == "none" else 3e-2)
        agree = np.mean([a["prediction"] == b["prediction"] for a, b in zip(after, before)])
        assert agree >= (1 if precision == "none" else 0.9), (kind, agree)
    # A pretrained encoder has no labels beside it: the one line says where they were looked for.
    with pytest.raises(app.UsageError) as e:
        run_main(run_classifier, {}, {
            "test_file": str(data / "test.csv"), "output_dir": tmp_path / "out-none",
            "init_checkpoint": assets["init"], "do_predict": True})
    assert str(e.value).startswith(
        f"no training file and no labels.json in --output_dir={tmp_path}/out-none, nor beside "
        f"{assets['init']}: "), str(e.value)
