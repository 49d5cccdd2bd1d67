"""run_race end to end on a tiny generated RACE tree in the released per-article layout."""

import json
import os
import random
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, run_race
from albert_tf.data.vocab import train_sentencepiece
from conftest import (SCRIPT_MATRIX, assert_near_float32, assert_step_compiled, memoized_runs,
                      run_main)
from test_race import corpus_lines, write_race
from tool_runner import run_tool_logged

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

TINY = dict(vocab_size=0, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module", autouse=True)
def race_flags():
    """Defined when the tests run, after collection has imported every script's module."""
    run_race.define_flags()


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """A RACE tree, a SentencePiece model and a tiny saved encoder checkpoint."""
    root = tmp_path_factory.mktemp("race")
    data = write_race(str(root / "data"))
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(corpus_lines(random.Random(1))), encoding="utf-8")
    spm = train_sentencepiece(str(corpus), str(root / "spm"), 64, do_lower_case=True,
                              hard_vocab_limit=False)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    tf.keras.utils.set_random_seed(0)
    AlbertEncoder(AlbertConfig(**{**TINY, "vocab_size": vocab})).save_pretrained(
        str(root / "init"))
    return {"data_dir": str(root / "data"), "spm": spm, "init": str(root / "init"),
            "data": data}


def run(**overrides):
    """Parses run_race flags from keyword arguments and runs main in this process."""
    defaults = dict(run_race.RACE_DEFAULTS, strategy="one_device", mixed_precision="none",
                learning_rate=1e-2, warmup_step=20, train_batch_size=16, eval_batch_size=16,
                predict_batch_size=16, max_seq_length=48, max_qa_length=16, log_steps=50,
                do_predict=False)
    return run_main(run_race, defaults, overrides)


def _read_kv(path):
    with open(path) as f:
        return dict(line.strip().split(" = ") for line in f if line.strip())


def test_train_eval_predict(assets, tmp_path, caplog):
    out = tmp_path / "out"
    caplog.set_level("INFO")
    best = run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
               init_checkpoint=assets["init"], train_step=200, save_checkpoints_steps=100,
               do_predict=True)
    questions = sum(len(a["answers"]) for level in ("middle", "high")
                    for a in assets["data"]["train"][level])
    assert (f"Training 200 steps (20 warmup) on {questions} examples of 4 sequences"
            in caplog.messages)
    results = _read_kv(out / "eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_accuracy_middle", "eval_accuracy_high",
                            "eval_loss", "global_step"}
    # Chance is 0.25.
    assert float(results["eval_accuracy"]) > 0.6, results
    assert best["eval_accuracy"] == pytest.approx(float(results["eval_accuracy"]))
    assert (out / "model.ckpt-best.index").exists()
    assert "metric = eval_accuracy" in (out / "best_checkpoint.txt").read_text()
    caches = sorted(re.findall(r"race_(\w+)-[0-9a-f]{16}\.npz", " ".join(os.listdir(out))))
    assert caches == ["dev", "test", "train"]

    predicted = _read_kv(out / "predict_results.txt")
    assert set(predicted) == {"eval_accuracy", "eval_accuracy_middle", "eval_accuracy_high",
                              "eval_loss"}
    assert float(predicted["eval_accuracy"]) > 0.6, predicted
    rows = [json.loads(line) for line in (out / "test_predictions.jsonl").read_text().split("\n")
            if line]
    test = assets["data"]["test"]
    truth = [(a["id"] + f"-{i}", level, answer) for level in ("middle", "high")
             for a in test[level] for i, answer in enumerate(a["answers"])]
    assert [(r["id"], r["level"], r["answer"]) for r in rows] == truth
    middle = [r["prediction"] == r["answer"] for r in rows if r["level"] == "middle"]
    assert float(predicted["eval_accuracy_middle"]) == pytest.approx(sum(middle) / len(middle))

    # Predict only, in a new run (no training, no TPU): the same accuracies from model.ckpt-best.
    os.remove(out / "predict_results.txt")
    run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
        do_train=False, do_eval=False, do_predict=True, predict_batch_size=5)
    again = _read_kv(out / "predict_results.txt")
    for key in ("eval_accuracy", "eval_accuracy_middle", "eval_accuracy_high"):
        assert float(again[key]) == pytest.approx(float(predicted[key])), key

    # New questions without answers (before: "missing key(s) answers"): the middle school's
    # left out, then every one; the same predictions, scored where answers are given.
    new = tmp_path / "new"
    shutil.copytree(os.path.join(assets["data_dir"], "RACE", "test"), new / "RACE" / "test")
    for levels, scored in ((("middle",), {"eval_accuracy", "eval_accuracy_high", "eval_loss"}),
                           (("middle", "high"), None)):
        for level in levels:
            for path in (new / "RACE" / "test" / level).iterdir():
                article = json.loads(path.read_text())
                article.pop("answers", None)
                path.write_text(json.dumps(article))
        run(data_dir=new, output_dir=out, spm_model_file=assets["spm"], do_train=False,
            do_eval=False, do_predict=True)
        now = [json.loads(line) for line in (out / "test_predictions.jsonl").read_text()
               .splitlines()]
        assert [(r["id"], r["prediction"]) for r in now] == [
            (r["id"], r["prediction"]) for r in rows]
        assert [r["answer"] for r in now] == [
            None if r["level"] in levels else r["answer"] for r in rows]
        if scored:
            results = _read_kv(out / "predict_results.txt")
            assert set(results) == scored
            high = [r["prediction"] == r["answer"] for r in rows if r["level"] == "high"]
            assert float(results["eval_accuracy"]) == pytest.approx(sum(high) / len(high))
        else:  # the earlier scores are not left to read as these predictions'
            assert not (out / "predict_results.txt").exists()
    # A file of that name that this tool did not write is left as it is.
    (out / "predict_results.txt").write_text("my notes on the test set\n")
    run(data_dir=new, output_dir=out, spm_model_file=assets["spm"], do_train=False,
        do_eval=False, do_predict=True)
    assert (out / "predict_results.txt").read_text() == "my notes on the test set\n"


def test_high_only_predict_from_init_and_cache_keys(assets, tmp_path, caplog):
    out = tmp_path / "out"
    run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
        init_checkpoint=assets["init"], do_train=False, do_eval=False, do_predict=True,
        high_only=True)
    assert (f"no fine-tuned checkpoint in {out}; predicting with {assets['init']}, which holds "
            f"no race head: the head is untrained") in caplog.messages
    predicted = _read_kv(out / "predict_results.txt")
    assert "eval_accuracy_middle" not in predicted
    assert predicted["eval_accuracy_high"] == predicted["eval_accuracy"]
    rows = (out / "test_predictions.jsonl").read_text().splitlines()
    assert len(rows) == 24 and all('"level": "high"' in r for r in rows)
    # Another max_qa_length builds new features; the same settings reuse the cache.
    run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
        init_checkpoint=assets["init"], do_train=False, do_eval=False, do_predict=True,
        high_only=True, max_qa_length=8)
    run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
        init_checkpoint=assets["init"], do_train=False, do_eval=False, do_predict=True,
        high_only=True)
    assert len([f for f in os.listdir(out) if f.startswith("race_test_high-")]) == 2


def test_feature_files_stand_in_for_the_data(assets, tmp_path):
    import shutil
    from albert_tf.data.features import FeatureFileError
    data = tmp_path / "data"
    shutil.copytree(assets["data_dir"], data)
    files = dict(train_file=str(tmp_path / "train.tf_record"),
                 eval_file=str(tmp_path / "eval.tf_record"))
    common = dict(spm_model_file=assets["spm"], init_checkpoint=assets["init"], train_step=4,
                  warmup_step=1, save_checkpoints_steps=4, **files)
    run(data_dir=str(data), output_dir=tmp_path / "first", **common)
    assert os.path.getsize(files["train_file"]) > 0 and os.path.getsize(files["eval_file"]) > 0
    shutil.rmtree(data)  # the second run trains and evaluates from the feature files alone
    run(data_dir=str(data), output_dir=tmp_path / "second", **common)
    assert "eval_accuracy" in _read_kv(tmp_path / "second" / "eval_results.txt")
    with pytest.raises(FeatureFileError, match=r"--train_file=.*train\.tf_record was built "
                                               r"with other settings \(max_qa_length: file 16,"
                                               r" now 12"):
        run(data_dir=str(data), output_dir=tmp_path / "third", max_qa_length=12, **common)


def test_command_line_defaults_are_the_originals():
    shim = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "run_race.py")
    text = subprocess.run([sys.executable, shim, "--helpfull"], capture_output=True, text=True,
                          check=False).stdout  # absl exits 1 after --helpfull
    blocks = {m.group(1): m.group(2) for m in re.finditer(
        r"^  --(?:\[no\])?(\w+):(.*?)(?=^  --|^\S|\Z)", text, re.M | re.S)}
    for name, value in run_race.RACE_DEFAULTS.items():
        value = str(value).lower() if isinstance(value, bool) else str(value)
        assert f"(default: '{value}')" in blocks[name], (name, blocks[name])
    for name in ("max_qa_length", "high_only", "middle_only", "dropout_prob", "train_file",
                 "eval_file", "predict_file"):
        assert name in blocks, name


def test_flag_errors(assets, tmp_path):
    from absl import app
    common = dict(data_dir=assets["data_dir"], output_dir=tmp_path, spm_model_file=assets["spm"])
    with pytest.raises(app.UsageError, match="exclude each other"):
        run(**common, high_only=True, middle_only=True)
    with pytest.raises(app.UsageError, match="run_race runs race or c3"):
        run(**common, task_name="mnli")
    with pytest.raises(app.UsageError, match="--high_only and --middle_only are RACE's levels; "
                                             "C3 has none"):
        run(**common, task_name="c3", high_only=True)
    with pytest.raises(FileNotFoundError, match="C3 train files not found"):
        run(**common, task_name="c3", init_checkpoint=assets["init"])
    with pytest.raises(ValueError, match="max_qa_length=46 leaves no room"):
        run(**common, max_qa_length=46, init_checkpoint=assets["init"])
    with pytest.raises(FileNotFoundError, match="RACE train split not found"):
        run(**{**common, "data_dir": str(tmp_path)}, init_checkpoint=assets["init"])
    # Warmup longer than training: refused before the features are built (before: after).
    out = tmp_path / "warmup"
    with pytest.raises(ValueError, match=r"^--warmup_step=50 must be between 0 and the 20 "
                                         r"training steps"):
        run(**{**common, "output_dir": out}, init_checkpoint=assets["init"], train_step=20,
            warmup_step=50)
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


@pytest.fixture(scope="module")
def matrix_runs(assets, tmp_path_factory):
    def run_one(out, precision, jit):
        run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
            init_checkpoint=assets["init"], train_step=10, warmup_step=2,
            save_checkpoints_steps=10, do_predict=True, mixed_precision=precision,
            jit_compile=jit)
    return memoized_runs(tmp_path_factory.mktemp("matrix"), run_one)


@pytest.mark.parametrize("precision,jit", SCRIPT_MATRIX)
def test_precision_and_xla_matrix(assets, matrix_runs, precision, jit):
    """Train, eval and predict under float32/bfloat16/float16, with and without XLA: files
    written, accuracies and loss finite and near the float32 run's."""
    out = matrix_runs(precision, jit)
    assert_step_compiled(out, jit)
    results = _read_kv(out / "eval_results.txt")
    assert results["global_step"] == "10"
    keys = ("eval_loss", "eval_accuracy")
    assert_near_float32(results, _read_kv(matrix_runs("none", "false") / "eval_results.txt"), keys)
    predicted = _read_kv(out / "predict_results.txt")
    assert_near_float32(predicted, _read_kv(matrix_runs("none", "false") / "predict_results.txt"),
                        keys)
    questions = sum(len(a["answers"]) for articles in assets["data"]["test"].values()
                    for a in articles)
    assert (out / "test_predictions.jsonl").read_text().count("\n") == questions


def test_eval_and_predict_count_every_example_once(assets, matrix_runs, tmp_path):
    """Every question once in batches of 7 padded to max_seq_length (the last filled with
    weight-0 copies): the same accuracies, loss and per-question probabilities as batches of 1."""
    import shutil
    outputs = {}
    for batch, padding in ((1, "bucket"), (7, "max_length")):
        out = tmp_path / f"b{batch}"
        shutil.copytree(matrix_runs("none", "false"), out)
        (out / "best_checkpoint.txt").unlink()
        run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
            do_train=False, do_eval=True, do_predict=True, eval_batch_size=batch,
            predict_batch_size=batch, padding=padding)
        rows = [json.loads(line) for line in
                (out / "test_predictions.jsonl").read_text().splitlines()]
        outputs[batch] = (_read_kv(out / "eval_results.txt"),
                          _read_kv(out / "predict_results.txt"), rows)
    (e1, t1, r1), (e7, t7, r7) = outputs[1], outputs[7]
    for a, b in ((e1, e7), (t1, t7)):
        assert a.keys() == b.keys()
        for key in a:
            assert float(b[key]) == pytest.approx(float(a[key]), abs=1e-5), key
    assert [r["id"] for r in r1] == [r["id"] for r in r7]
    np.testing.assert_allclose([r["probabilities"] for r in r7],
                               [r["probabilities"] for r in r1], atol=1e-5)



def test_a_broken_test_split_stops_the_run_before_training(assets, tmp_path, caplog):
    """docs/safety.md: the splits a run's actions read are parsed before any training (a bad
    answer letter or a missing level in the test set used to stop the run after training)."""
    import shutil
    data = tmp_path / "data"
    shutil.copytree(assets["data_dir"], data)
    path = sorted((data / "RACE" / "test" / "high").iterdir())[0]
    article = json.loads(path.read_text(encoding="utf-8"))
    article["answers"][0] = "E"
    path.write_text(json.dumps(article), encoding="utf-8")
    out = tmp_path / "out"
    common = dict(data_dir=str(data), output_dir=out, spm_model_file=assets["spm"],
                  init_checkpoint=assets["init"], train_step=10, warmup_step=2, do_predict=True)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} \(article .*, question 0\): "
                                         r"answer 'E' is not one of A, B, C, D$"):
        run(**common)
    shutil.rmtree(data / "RACE" / "test" / "high")
    with pytest.raises(FileNotFoundError, match=r"RACE test/high directory not found"):
        run(**common)
    assert not list(out.glob("model.ckpt-*")) and not list(out.glob("*.npz"))
    # Epochs with the original's 1000 warmup steps: the message names the flag that fits.
    with pytest.raises(ValueError, match=r"^--warmup_step=1000 must be between 0 and the \d+ "
                                         r"training steps \(or give --warmup_proportion"):
        run(**{**common, "data_dir": assets["data_dir"], "warmup_step": 1000,
               "num_train_epochs": 1, "train_batch_size": 64})
    # Step counts given beside the epochs and the share that set them: said to be unused.
    caplog.set_level("INFO")
    run(**{**common, "data_dir": assets["data_dir"], "output_dir": tmp_path / "epochs",
           "num_train_epochs": 0.5, "warmup_proportion": 0.5, "train_batch_size": 64,
           "do_eval": False, "do_predict": False})
    assert "--train_step=10 is not used: --num_train_epochs=0.5 makes it 2" in caplog.messages
    assert "--warmup_step=2 is not used: --warmup_proportion=0.5 makes it 1" in caplog.messages
    # The script's own step counts (the original's 12000 and 1000), not given: nothing said.
    code, log = run_tool_logged(
        run_race, "--nodo_eval", data_dir=assets["data_dir"], output_dir=tmp_path / "defaults",
        spm_model_file=assets["spm"], init_checkpoint=assets["init"], num_train_epochs=0.5,
        warmup_proportion=0.5, train_batch_size=64, max_seq_length=48, max_qa_length=16,
        mixed_precision="none")
    assert code == 0, log[-3000:]
    assert "Training 2 steps (1 warmup)" in log and "is not used" not in log, log[-3000:]


@pytest.mark.parametrize("precision,jit", SCRIPT_MATRIX)
def test_unanswered_questions_predict_as_answered_ones_under_every_precision(
        assets, matrix_runs, tmp_path, precision, jit):
    """Test articles without answers, predicted by each cell's run under its own precision (and
    XLA): the choices it made on the same questions with answers, `answer` null, no scores."""
    trained = matrix_runs(precision, jit)
    out = tmp_path / "run"
    shutil.copytree(trained, out, ignore=shutil.ignore_patterns("*.npz", "test_*",
                                                                "predict_results.txt"))
    new = tmp_path / "new"
    shutil.copytree(os.path.join(assets["data_dir"], "RACE", "test"), new / "RACE" / "test")
    for path in (new / "RACE" / "test").glob("*/*"):
        article = json.loads(path.read_text())
        del article["answers"]
        path.write_text(json.dumps(article))
    run(data_dir=new, output_dir=out, spm_model_file=assets["spm"], do_train=False,
        do_eval=False, do_predict=True, mixed_precision=precision, jit_compile=jit)
    now, before = ([json.loads(line) for line in (d / "test_predictions.jsonl").read_text()
                    .splitlines()] for d in (out, trained))
    assert [r["id"] for r in now] == [r["id"] for r in before]
    assert all(r["answer"] is None for r in now)
    agree = np.mean([a["prediction"] == b["prediction"] for a, b in zip(now, before)])
    assert agree >= (1 if precision == "none" else 0.9), agree
    assert not (out / "predict_results.txt").exists()


def test_predict_refuses_to_classify_with_a_multiple_choice_run(matrix_runs):
    from albert_tf.serving.classify import CHOICE_RUN_KINDS, Classifier
    from albert_tf.serving.predictor import PredictError
    from albert_tf.tasks.c3 import C3Task
    from albert_tf.tasks.driver import run_kind
    with pytest.raises(PredictError, match=r"is a multiple-choice run \(fine-tuning of race\): "
                                           r"its head scores answer choices, not classes"):
        Classifier(str(matrix_runs("none", "false")))
    assert run_kind(C3Task.name) in CHOICE_RUN_KINDS


@pytest.mark.parametrize("precision", ["none", "bfloat16", "float16"])
def test_predict_chooses_as_the_run_predicted(assets, matrix_runs, tmp_path, capsys, precision):
    """predict --task=choose on the run's test questions (JSON lines of single questions, ids
    as run_race names them): its probabilities, in float32 from the run's checkpoint, are the
    run's own test predictions (within the run's precision's rounding)."""
    from albert_tf import predict
    from tool_runner import run_tool
    out = matrix_runs(precision, "false")
    theirs = {r["id"]: r for r in map(json.loads,
                                      (out / "test_predictions.jsonl").read_text().splitlines())}
    lines = []
    for level in ("middle", "high"):
        for article in assets["data"]["test"][level]:
            lines += [json.dumps({"id": f"{article['id']}-{i}", "article": article["article"],
                                  "question": q, "options": options})
                      for i, (q, options) in enumerate(zip(article["questions"],
                                                           article["options"]))]
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(lines) + "\n")
    code, last, _ = run_tool(predict, capsys, "--task=choose", f"--model={out}",
                             f"--input_file={questions}", f"--output_file={tmp_path / 'p.jsonl'}",
                             "--batch_size=5")
    assert code == 0, last
    ours = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["id"] for r in ours] == list(theirs)
    for row in ours:
        np.testing.assert_allclose(row["probabilities"], theirs[row["id"]]["probabilities"],
                                   atol=1e-5 if precision == "none" else 3e-2)
        if precision == "none":
            assert row["prediction"] == theirs[row["id"]]["prediction"]
    if precision != "none":
        return
    # A RACE article file (its answers carried), and one question on the command line.
    article = os.path.join(assets["data_dir"], "RACE", "test", "middle", "0.txt")
    code, _, _ = run_tool(predict, capsys, "--task=choose", f"--model={out}",
                          f"--input_file={article}", f"--output_file={tmp_path / 'a.jsonl'}")
    first = assets["data"]["test"]["middle"][0]
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert code == 0 and [(r["id"], r["answer"]) for r in rows] == [
        (f"{first['id']}-{i}", a) for i, a in enumerate(first["answers"])]
    np.testing.assert_allclose([r["probabilities"] for r in rows],
                               [theirs[r["id"]]["probabilities"] for r in rows], atol=1e-5)
    from tool_runner import run_tool_captured
    status, shown, _ = run_tool_captured(
        predict, capsys, "--task=choose", f"--model={out}", "--format=text",
        f"--text={first['article']}", f"--text_b={first['questions'][0]}",
        *[f"--choice={o}" for o in first["options"][0]])
    run_s = theirs[f"{first['id']}-0"]
    assert status == 0 and shown == (
        f"{run_s['prediction']} (" + ", ".join(
            f"{letter} {p:.4f}" for letter, p in zip("ABCD", rows[0]["probabilities"]))
        + f")\t{first['questions'][0]}\n"), shown
    # Mistakes: a model that is no multiple-choice run; --choice without --task=choose.
    code, last, _ = run_tool(predict, capsys, "--task=choose", f"--model={assets['init']}",
                             f"--input_file={questions}")
    assert (code, last) == (2, f"predict: error: {assets['init']} is no multiple-choice run (no "
                               f"run.json beside it): --task=choose reads a run_race output_dir "
                               f"(or a checkpoint in it)")
    code, last, _ = run_tool(predict, capsys, "--task=embed", f"--model={out}", "--text=a",
                             "--choice=b")
    assert (code, last) == (2, "predict: error: --choice goes with --task=choose and --text (the "
                               "article), --text_b (the question)")
