"""run_squad end to end on tiny SQuAD v1.1 / v2.0 JSON files where the answer is the word after
a marker, with a tiny ALBERT (hidden 32, 2 layers)."""

import json
import math
import os
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, predict, run_squad
from albert_tf.tasks import SquadTask, squad_metrics
from albert_tf.data.vocab import train_sentencepiece
from albert_tf.formats.checkpoints import read_checkpoint
from conftest import (SCRIPT_MATRIX, assert_near_float32, assert_step_compiled, memoized_runs,
                      run_main)
from tool_runner import run_tool, run_tool_captured, run_tool_logged

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

WORDS = ("the cat sat on a mat while dog ran far away and bird sang in tree near house by river "
         "old man saw young girl walk home slowly today").split()
NAMES = "anna boris carl dora emil fanny gus hilda ivan jules".split()
MARKER = "zebra"
QUESTION = "who came after zebra ?"
TINY = dict(vocab_size=0, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _paragraph(rng, answerable):
    """A context of common words; answerable ones hold 'zebra <name>' somewhere."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 24))]
    answer = None
    if answerable:
        answer = rng.choice(NAMES)
        words[rng.randint(0, len(words) - 1):0] = [MARKER, answer]
    text = " ".join(words).capitalize() + "."
    if answer is None:
        return text, None, None
    return text, answer, text.lower().index(f"{MARKER} {answer}") + len(MARKER) + 1


def write_squad(path, n, seed, version_2):
    rng = random.Random(seed)
    articles = []
    for a in range(n // 2):
        paragraphs = []
        for p in range(2):
            answerable = not version_2 or rng.random() < 0.5
            context, answer, start = _paragraph(rng, answerable)
            qa = {"id": f"q{seed}-{a}-{p}", "question": QUESTION,
                  "answers": [] if answer is None else [
                      {"text": context[start:start + len(answer)], "answer_start": start}]}
            if version_2:
                qa["is_impossible"] = answer is None
            paragraphs.append({"context": context, "qas": [qa]})
        articles.append({"title": f"a{a}", "paragraphs": paragraphs})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "2.0" if version_2 else "1.1", "data": articles}, f)
    return path


def write_spm(root):
    """(SentencePiece model path, its size) trained on paragraphs and questions like these."""
    rng = random.Random(1)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join([_paragraph(rng, i % 2)[0] for i in range(1500)]
                                + [QUESTION] * 50), encoding="utf-8")
    spm = train_sentencepiece(str(corpus), str(root / "spm"), 80, do_lower_case=True,
                              hard_vocab_limit=False)
    import sentencepiece
    return spm, sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    root = tmp_path_factory.mktemp("squad")
    spm, vocab = write_spm(root)
    tf.keras.utils.set_random_seed(0)
    AlbertEncoder(AlbertConfig(**{**TINY, "vocab_size": vocab})).save_pretrained(
        str(root / "init"))
    files = {}
    for version_2 in (False, True):
        v = "v2" if version_2 else "v1"
        files[v] = (write_squad(str(root / f"train-{v}.json"), 640, 0, version_2),
                    write_squad(str(root / f"dev-{v}.json"), 80, 1, version_2))
    files["v2_span"] = files["v2"]  # SQuAD 2.0 with --v2_head=span
    return {"spm": spm, "init": str(root / "init"), "files": files}


def run(**overrides):
    """Parses run_squad flags from keyword arguments and runs main in this process."""
    defaults = dict(strategy="one_device", mixed_precision="none", learning_rate=3e-3,
                train_batch_size=32, eval_batch_size=32, predict_batch_size=32,
                max_seq_length=40, doc_stride=16, max_query_length=12, log_steps=50)
    return run_main(run_squad, defaults, overrides)


def _read_kv(path):
    with open(path) as f:
        return {k: float(v) for k, v in (line.strip().split(" = ") for line in f if line.strip())}


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_v1_train_eval_predict_and_predict_only(assets, tmp_path):
    train, dev = assets["files"]["v1"]
    out = tmp_path / "v1"
    best = run(train_file=train, predict_file=dev, output_dir=out, spm_model_file=assets["spm"],
               init_checkpoint=assets["init"], do_train=True, do_eval=True, do_predict=True,
               train_step=200, warmup_step=20, save_checkpoints_steps=100)
    results = _read_kv(out / "eval_results.txt")
    assert set(results) == {"exact_match", "f1", "global_step"}
    # A random span of the ~15-word context scores a few F1.
    assert results["f1"] > 60, results
    assert best["f1"] == pytest.approx(results["f1"])
    assert "metric = f1" in (out / "best_checkpoint.txt").read_text()
    predictions = _load(out / "predictions.json")
    nbest = _load(out / "nbest_predictions.json")
    gold = {qa["id"]: qa["answers"][0]["text"] for article in _load(dev)["data"]
            for p in article["paragraphs"] for qa in p["qas"]}
    assert set(predictions) == set(gold) == set(nbest)
    assert not (out / "null_odds.json").exists()
    for qid, entries in nbest.items():
        assert entries[0]["text"] == predictions[qid]
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0, abs=1e-4)
    # Answers are original characters: the capitalised first word keeps its capital.
    hits = sum(predictions[q] == gold[q] for q in gold)
    assert hits / len(gold) > 0.5
    first = json.dumps(predictions, sort_keys=True)

    # Predict only, into a fresh directory, from the fine-tuned checkpoint: no training at all.
    again = tmp_path / "predict_only"
    run(predict_file=dev, output_dir=again, spm_model_file=assets["spm"],
        init_checkpoint=str(out / "model.ckpt-best"), albert_config_file=str(
            out / "albert_config.json"), do_predict=True)
    assert json.dumps(_load(again / "predictions.json"), sort_keys=True) == first
    assert not list(again.glob("model.ckpt-*"))


@pytest.mark.parametrize("head", ["answer_class", "span"])
def test_v2_threshold_on_held_out_paragraphs(assets, tmp_path, head):
    # 300 steps at 2e-3 learned with 5 of 5 seeds; 200 at 3e-3 with 1 of 5 (2026-11-23).
    train, dev = assets["files"]["v2"]
    out = tmp_path / "v2"
    run(train_file=train, predict_file=dev, output_dir=out, spm_model_file=assets["spm"],
        init_checkpoint=assets["init"], do_train=True, do_eval=True, do_predict=True,
        version_2_with_negative=True, train_step=300, warmup_step=20,
        save_checkpoints_steps=300, learning_rate=2e-3, v2_head=head)
    trained = read_checkpoint(str(out / "model.ckpt-best"))[0]
    assert ("cls/squad/output_weights" in trained) == (head == "span")
    assert ("answer_class/dense_0/kernel" in trained) == (head == "answer_class")
    results = _read_kv(out / "eval_results.txt")
    for key in ("exact", "f1", "total", "HasAns_f1", "NoAns_f1", "null_score_diff_threshold",
                "threshold_questions", "threshold_f1"):
        assert key in results, results
    questions = len(_load(out / "null_odds.json"))
    # Half of the paragraphs choose the threshold, the other half are reported.
    assert results["total"] + results["threshold_questions"] == questions
    assert results["threshold_questions"] == pytest.approx(questions / 2, abs=1)
    # Always answering "" scores the no-answer share (about 50 F1).
    assert results["f1"] > 65, results
    assert results["HasAns_f1"] > 40 and results["NoAns_f1"] > 40, results
    predictions = _load(out / "predictions.json")
    odds = _load(out / "null_odds.json")
    threshold = results["null_score_diff_threshold"]
    assert all(predictions[q] == "" for q in odds if odds[q] > threshold)
    assert any(p == "" for p in predictions.values()) and any(predictions.values())

    # Predicting again in the run's directory: the evaluation's threshold, scored on the
    # questions it was not chosen on, beside (not over) the evaluation's results; SQuAD 2.0 as
    # the run was, without --version_2_with_negative (before: refused, "this is squad_v1").
    evaluated = (out / "eval_results.txt").read_text()
    run(predict_file=dev, output_dir=out, do_predict=True)
    assert (out / "eval_results.txt").read_text() == evaluated
    scored = _read_kv(out / "predict_results.txt")
    for key in ("total", "threshold_questions", "null_score_diff_threshold", "exact", "f1"):
        assert scored[key] == pytest.approx(results[key], abs=1e-6), key
    assert _load(out / "predictions.json") == predictions

    # A given threshold is used as is and everything is reported.
    forced = tmp_path / "forced"
    run(predict_file=dev, output_dir=forced, spm_model_file=assets["spm"],
        init_checkpoint=str(out / "model.ckpt-best"),
        albert_config_file=str(out / "albert_config.json"), do_predict=True,
        version_2_with_negative=True, null_score_diff_threshold=-1e9)
    assert all(p == "" for p in _load(forced / "predictions.json").values())
    # A threshold above 1: the scores are those of predictions.json as written (an answer
    # whose null_odds lay between 1 and the threshold was once scored as "").
    assert max(odds.values()) > 1.0, odds
    high = tmp_path / "high"
    run(predict_file=dev, output_dir=high, spm_model_file=assets["spm"],
        init_checkpoint=str(out / "model.ckpt-best"),
        albert_config_file=str(out / "albert_config.json"), do_predict=True,
        version_2_with_negative=True, null_score_diff_threshold=max(odds.values()) + 1)
    answered = _load(high / "predictions.json")
    assert all(answered.values())
    golds = {qa["id"]: [a["text"] for a in qa["answers"]]
             for article in _load(dev)["data"] for p in article["paragraphs"] for qa in p["qas"]}
    as_written = squad_metrics.squad_v2(golds, answered)
    scored = _read_kv(high / "eval_results.txt")
    assert (scored["exact"], scored["f1"]) == pytest.approx(
        (as_written["exact"], as_written["f1"]), abs=1e-6)


def test_cache_keyed_by_sequence_length_and_stride(assets, tmp_path):
    from albert_tf.tokenization import FullTokenizer
    train, dev = assets["files"]["v2"]
    tokenizer = FullTokenizer(assets["spm"], True)

    def features(**kw):
        settings = dict(max_seq_length=28, doc_stride=16, max_query_length=12)
        settings.update(kw)
        task = SquadTask(tokenizer, train, dev, str(tmp_path), version_2=True,
                                   **settings)
        return task.features(dev, False)

    base = features()
    assert features()["lengths"].tolist() == base["lengths"].tolist()
    assert len(os.listdir(tmp_path)) == 1
    longer, stride = features(max_seq_length=64), features(doc_stride=8)
    caches = [n for n in os.listdir(tmp_path) if re.fullmatch(r"squad_v2_predict-\w{16}\.npz", n)]
    assert len(caches) == 3
    assert len(longer["lengths"]) < len(base["lengths"]) < len(stride["lengths"])
    assert longer["lengths"].max() > 28


def test_feature_files_are_written_once_read_back_and_checked(assets, tmp_path):
    import shutil
    from albert_tf.data.features import FeatureFileError
    train, dev = assets["files"]["v1"]
    data = tmp_path / "data"
    data.mkdir()
    train, dev = shutil.copy(train, data), shutil.copy(dev, data)
    files = dict(train_feature_file=str(tmp_path / "features" / "train.tf_record"),
                 predict_feature_file=str(tmp_path / "features" / "dev.tf_record"),
                 predict_feature_left_file=str(tmp_path / "features" / "dev_left"))
    common = dict(spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
                  train_step=4, warmup_step=1, save_checkpoints_steps=4, **files)
    run(train_file=train, predict_file=dev, output_dir=tmp_path / "first", do_predict=True,
        **common)
    written = {name: os.path.getmtime(files[name])
               for name in ("train_feature_file", "predict_feature_file")}
    assert not list((tmp_path / "first").glob("squad_v1_*.npz"))  # not the keyed cache
    # The training data is gone: the second run trains from the feature file.
    os.remove(train)
    run(train_file=train, predict_file=dev, output_dir=tmp_path / "second", **common)
    assert (tmp_path / "second" / "model.ckpt-4.index").exists()
    assert {n: os.path.getmtime(files[n]) for n in written} == written
    # Other settings: refused, naming the file and what differs.
    with pytest.raises(FeatureFileError, match=r"--train_feature_file=.*train\.tf_record was "
                                               r"built with other settings \(max_seq_length: "
                                               r"file 40, now 48"):
        run(train_file=train, predict_file=dev, output_dir=tmp_path / "third",
            max_seq_length=48, **common)
    with open(files["predict_feature_file"], "wb") as f:
        f.write(b"not ours")
    with pytest.raises(FeatureFileError, match="is not a feature file written by albert_tf"):
        run(predict_file=dev, output_dir=tmp_path / "fourth", do_predict=True,
            **{**common, "do_train": False})


def test_flag_errors(assets, tmp_path, caplog):
    train, dev = assets["files"]["v1"]
    with pytest.raises(Exception, match="--do_train needs --train_file"):
        run(output_dir=tmp_path, spm_model_file=assets["spm"], do_train=True)
    with pytest.raises(Exception, match="threshold_dev_fraction"):
        run(predict_file=dev, output_dir=tmp_path, spm_model_file=assets["spm"],
            init_checkpoint=assets["init"], do_eval=True, version_2_with_negative=True,
            threshold_dev_fraction=0.0)
    with pytest.raises(ValueError, match="is_impossible, which needs --version_2"):
        run(train_file=assets["files"]["v2"][0], output_dir=tmp_path,
            spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True)
    with pytest.raises(Exception, match=re.escape(
            "--max_seq_length=20 leaves no room for the context after a question of up to "
            "--max_query_length=17 pieces ([CLS] question [SEP] context [SEP])")):
        run(train_file=train, output_dir=tmp_path, spm_model_file=assets["spm"],
            init_checkpoint=assets["init"], do_train=True, max_seq_length=20,
            max_query_length=17)
    broken = tmp_path / "broken_dev.json"  # read before training, not after it
    broken.write_text(json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [
        {"question": "a?", "answers": []}]}]}]}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"missing key 'id'"):
        run(train_file=train, predict_file=broken, output_dir=tmp_path / "broken",
            spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
            do_predict=True)
    assert not list((tmp_path / "broken").glob("*"))
    with caplog.at_level("WARNING", logger="absl"):
        with pytest.raises(Exception, match="no_such.model"):
            run(train_file=train, output_dir=tmp_path, spm_model_file=tmp_path / "no_such.model",
                init_checkpoint=assets["init"], do_train=True, max_seq_length=20,
                max_query_length=16, doc_stride=8)
    assert ("A window holds as few as 1 context pieces (--max_seq_length=20 - "
            "--max_query_length=16 - 3), fewer than --doc_stride=8: windows do not overlap"
            in caplog.text), caplog.text


@pytest.fixture(scope="module")
def matrix_runs(assets, tmp_path_factory):
    def run_one(out, version, precision, jit):
        train, dev = assets["files"][version]
        run(train_file=train, predict_file=dev, output_dir=out, spm_model_file=assets["spm"],
            init_checkpoint=assets["init"], do_train=True, do_eval=True, do_predict=True,
            export_dir=out / "export" if exports(version, precision, jit) else None,
            export_tflite="ids",
            train_step=40,
            warmup_step=4, save_checkpoints_steps=40, mixed_precision=precision,
            jit_compile=jit, version_2_with_negative=version != "v1",
            v2_head="span" if version == "v2_span" else "answer_class")
    return memoized_runs(tmp_path_factory.mktemp("matrix"), run_one)


def _pooler(checkpoint):
    reader = tf.train.load_checkpoint(str(checkpoint))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if "pooler" in name}


def exports(version, precision, jit):
    """float32, and v1 after bfloat16 training (what `auto` picks on bf16 CPUs): the export
    rebuilds the model in float32 whatever the policy (float16 takes the same path)."""
    return jit == "false" and (precision == "none" or (version, precision) == ("v1", "bfloat16"))


def _null_odds(version):
    return version != "v1"


# v1 runs the whole matrix; v2 differs only in its head and its no-answer scores: float32,
# and bfloat16 with XLA as a TPU runs it. Its heads under mixed_float16 (finite losses and
# gradients, near float32's) are in test_squad.py; float16's path through the script is v1's.
# v2_span: v1's head with v2's no-answer scores, in float32, float16 and bfloat16 with XLA.
@pytest.mark.parametrize("version,precision,jit", [("v1",) + c for c in SCRIPT_MATRIX] + [
    ("v2", "none", "false"), ("v2", "bfloat16", "true"), ("v2_span", "none", "false"),
    ("v2_span", "float16", "false"), ("v2_span", "bfloat16", "true")])
def test_precision_and_xla_matrix(assets, matrix_runs, version, precision, jit):
    """Train, eval, predict and export under float32/bfloat16/float16, with and without XLA
    (the heads once crashed at the first mixed-precision step): every file written, EM/F1
    finite and near the float32 run's."""
    out = matrix_runs(version, precision, jit)
    assert_step_compiled(out, jit)
    results = _read_kv(out / "eval_results.txt")
    assert results["global_step"] == 40
    # No loss reaches the pooler: trained under every policy, it is the initial one still.
    init, trained = _pooler(assets["init"]), _pooler(out / "model.ckpt-40")
    assert len(init) == 2 and init.keys() == trained.keys()
    for name in init:
        np.testing.assert_array_equal(trained[name], init[name], name)
    assert "No loss reaches pooler/kernel, pooler/bias: not updated" in (
        out / "log.txt").read_text()
    assert all(math.isfinite(v) for v in results.values()), results
    reference = matrix_runs(version, "none", "false")
    if version == "v1":
        assert_near_float32(results, _read_kv(reference / "eval_results.txt"),
                            ("exact_match", "f1"), scale=100.0)
    else:  # v2's tuned threshold flips whole groups of answers: compare the no-answer scores
        odds, expected = _load(out / "null_odds.json"), _load(reference / "null_odds.json")
        assert odds.keys() == expected.keys()
        assert max(abs(odds[q] - expected[q]) for q in odds) <= 0.1
    written = {"predictions.json", "nbest_predictions.json"} | (
        {"null_odds.json"} if _null_odds(version) else set())
    assert written <= set(os.listdir(out))
    assert len(_load(out / "predictions.json")) == len(_load(out / "nbest_predictions.json"))
    if exports(version, precision, jit):  # the trained weights restored into float32
        assert (out / "export" / "saved_model.pb").exists()
        assert (out / "export" / "albert_model.tflite").exists()  # v1 and v2


def test_a_span_head_run_goes_to_transformers_and_back_as_squad_2(assets, matrix_runs, tmp_path):
    """A --v2_head=span run converts to transformers' AlbertForQuestionAnswering (the default
    head is refused), and that directory evaluates as SQuAD 2.0 with its head: the run's own
    no-answer scores."""
    from albert_tf.conversion import convert
    out = matrix_runs("v2_span", "none", "false")
    hf = tmp_path / "hf"
    convert(str(out / "model.ckpt-best"), str(hf), "hf")
    assert json.loads((hf / "config.json").read_text())["architectures"] == [
        "AlbertForQuestionAnswering"]
    with pytest.raises(ValueError, match="a run with run_squad --v2_head=span converts to "
                                         "AlbertForQuestionAnswering"):
        convert(str(matrix_runs("v2", "none", "false") / "model.ckpt-best"),
                str(tmp_path / "refused"), "hf")
    again = tmp_path / "again"
    run(predict_file=assets["files"]["v2_span"][1], output_dir=again, init_checkpoint=str(hf),
        spm_model_file=assets["spm"], do_eval=True, do_predict=True,
        version_2_with_negative=True, v2_head="span")
    odds, expected = _load(again / "null_odds.json"), _load(out / "null_odds.json")
    assert odds.keys() == expected.keys()
    assert max(abs(odds[q] - expected[q]) for q in odds) < 1e-4
    assert _load(again / "predictions.json").keys() == expected.keys()
    # The predictions' score leaves out the questions this evaluation chose the threshold on
    # (a run of no run.json, evaluating its --init_checkpoint, once scored them all).
    evaluated, scored = (_read_kv(again / f"{n}_results.txt") for n in ("eval", "predict"))
    assert scored["threshold_questions"] == evaluated["threshold_questions"] > 0
    assert scored["total"] == evaluated["total"]


def test_eval_and_predict_count_every_example_once(assets, matrix_runs, tmp_path):
    """Every window of every question once, in batches of 7 padded to max_seq_length (the
    last batch filled with weight-0 copies) as in batches of 1: the same EM/F1 and answers."""
    import shutil
    dev = assets["files"]["v1"][1]
    outputs = {}
    for batch, padding in ((1, "bucket"), (7, "max_length")):
        out = tmp_path / f"b{batch}"
        shutil.copytree(matrix_runs("v1", "none", "false"), out)
        (out / "best_checkpoint.txt").unlink()
        run(predict_file=dev, output_dir=out, spm_model_file=assets["spm"], do_eval=True,
            do_predict=True, eval_batch_size=batch, predict_batch_size=batch, padding=padding)
        outputs[batch] = (_read_kv(out / "eval_results.txt"), _load(out / "predictions.json"),
                          _load(out / "nbest_predictions.json"))
    (r1, p1, n1), (r7, p7, n7) = outputs[1], outputs[7]
    assert r1 == pytest.approx(r7, abs=1e-6)
    assert p1 == p7 and n1.keys() == n7.keys()
    for qid in n1:
        assert [e["text"] for e in n1[qid]] == [e["text"] for e in n7[qid]]
        np.testing.assert_allclose([e["probability"] for e in n7[qid]],
                                   [e["probability"] for e in n1[qid]], atol=1e-4)


@pytest.mark.parametrize("version,precision,jit", [
    ("v1", "none", "false"), ("v2", "none", "false"), ("v1", "float16", "false"),
    ("v1", "bfloat16", "true"), ("v2", "bfloat16", "true"), ("v2_span", "none", "false")])
def test_predict_answers_as_the_run_predicted(assets, matrix_runs, tmp_path, capsys, version,
                                              precision, jit):
    """predict --task=qa on the dev questions (JSON Lines of id, question and context) answers
    as the run's predictions.json, in the run's windows (run.json), each answer with its span
    in the context; v2 with the run's no-answer scores and threshold. predict computes in
    float32: a run trained and evaluated under bfloat16/float16 (with XLA as a TPU) may differ
    on a near-tie or a no-answer score at the threshold, no more."""
    out = matrix_runs(version, precision, jit)
    rows = [{"id": qa["id"], "question": qa["question"], "context": p["context"]}
            for article in _load(assets["files"][version][1])["data"]
            for p in article["paragraphs"] for qa in p["qas"]]
    questions, answers = tmp_path / "questions.jsonl", tmp_path / "answers.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, log = run_tool_logged(predict, task="qa", model=out, input_file=questions,
                                output_file=answers, batch_size=5)
    assert code == 0, log[-3000:]
    assert "contexts in windows of 40 tokens, 16 apart (the run's doc_stride), questions cut to " \
           "12 pieces" in log
    got = [json.loads(line) for line in answers.read_text().splitlines()]
    assert [g["id"] for g in got] == [r["id"] for r in rows]
    predicted = _load(out / "predictions.json")
    differ = [g["id"] for g in got if g["answer"] != predicted[g["id"]]]
    odds = _load(out / "null_odds.json") if _null_odds(version) else {}
    if precision == "none":
        # Only a question whose no-answer score is the threshold itself (v2 takes it from the
        # dev scores) may land on the other side: batched otherwise, float32 rounds otherwise.
        threshold = _read_kv(out / "eval_results.txt").get("null_score_diff_threshold")
        assert all(i in odds and abs(odds[i] - threshold) < 1e-5 for i in differ), differ
    else:
        assert len(differ) <= 0.1 * len(rows), differ
    for g, r in zip(got, rows):
        assert (r["context"][g["start"]:g["end"]] if g["answer"] else g["start"]) == (
            g["answer"] or None)
        assert 0 < g["probability"] <= 1
    if _null_odds(version):
        assert max(abs(g["null_odds"] - odds[g["id"]]) for g in got) < (
            1e-4 if precision == "none" else 0.1)
        assert any(g["answer"] == "" for g in got) and any(g["answer"] for g in got)
    if exports(version, precision, jit):
        # The serving export's `answer` signature: the same answers, in the same windows,
        # picked inside its graph (float32 whatever the training policy).
        served = tmp_path / "served.jsonl"
        code, log = run_tool_logged(predict, task="qa", model=out / "export",
                                    input_file=questions, output_file=served, batch_size=7)
        assert code == 0, log[-3000:]
        exported = [json.loads(line) for line in served.read_text().splitlines()]
        assert [(e["id"], e["answer"], e["start"], e["end"]) for e in exported] == [
            (g["id"], g["answer"], g["start"], g["end"]) for g in got]
        if _null_odds(version):
            assert max(abs(e["null_odds"] - g["null_odds"]) for e, g in zip(exported, got)) < 1e-4
        code, printed, _ = run_tool_captured(predict, capsys, task="qa", model=out / "export",
                                             text=rows[0]["question"],
                                             text_b=rows[0]["context"], format="text")
        first = exported[0]
        found = (f"{first['answer']} [{first['start']}:{first['end']}] score {first['score']:.4f}"
                 if first["answer"] else f"(no answer: null_odds {first['null_odds']:.4f})")
        assert code == 0 and printed == f"{found}\t{rows[0]['question']}\n", printed
    if precision != "none":
        return  # the SQuAD file and the mistakes below are the model's, not the precision's
    # The SQuAD file itself (pretty-printed, as the dataset's are): the same answers by id.
    squad_file, from_squad = tmp_path / "dev.json", tmp_path / "from_squad.jsonl"
    squad_file.write_text(json.dumps(_load(assets["files"][version][1]), indent=2))
    code, log = run_tool_logged(predict, task="qa", model=out, input_file=squad_file,
                                output_file=from_squad, batch_size=5)
    assert code == 0, log[-3000:]
    assert f"--input_file={squad_file} read as a SQuAD file: {len(rows)} questions" in log
    assert [(a["id"], a["answer"], a["start"]) for a in map(
        json.loads, from_squad.read_text().splitlines())] == [
        (g["id"], g["answer"], g["start"]) for g in got]
    code, last, _ = run_tool(predict, capsys, task="qa", model=out, text=QUESTION)
    assert code == 2 and last.endswith("--task=qa answers a question (--text) on its context "
                                       "(--text_b); a table --input_file: question and context "
                                       "columns"), last
    code, last, _ = run_tool(predict, capsys, task="qa", model=out, text=" ", text_b="a cat")
    assert code == 2 and last.endswith("input 1 has an empty question"), last
    lite = out / "export" / "albert_model.tflite"
    code, last, _ = run_tool(predict, capsys, task="qa", model=lite, text="who?", text_b="a cat")
    assert code == 2 and last.endswith(
        f"{lite} is a LiteRT file, which predict does not answer with (it runs in LiteRT apps: "
        f"export.md): give the run_squad output_dir or its serving export directory"), last


def test_an_export_alone_scores_its_litert_file_on_the_run_s_predict_file(assets, matrix_runs,
                                                                         tmp_path, caplog):
    """`--output_dir=RUN --export_dir=DIR`: the run's predict file (run.json) scores the
    .tflite file; the training file, unread, is not named."""
    import shutil
    out = tmp_path / "run"
    shutil.copytree(matrix_runs("v1", "none", "false"), out,
                    ignore=shutil.ignore_patterns("export"))
    with caplog.at_level("INFO", logger="absl"):
        run(output_dir=out, export_dir=tmp_path / "export", export_tflite="ids")
    log = "\n".join(caplog.messages)
    dev = assets["files"]["v1"][1]
    assert f"--predict_file={dev}, as the run in {out} trained (run.json)" in log
    assert "--train_file=" not in log
    report = _load(tmp_path / "export" / "tflite_report.json")
    assert report["ids_model"]["dev"] == pytest.approx(
        {k: v for k, v in _read_kv(out / "eval_results.txt").items() if k != "global_step"},
        abs=1e-6)

