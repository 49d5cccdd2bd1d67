"""run_ner end to end on small generated CoNLL sets: learning, conlleval scores and files, long
sentences in windows, the precision/XLA matrix, resume, the serving export and predict."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, predict, run_ner
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.serving import Tagger, lite
from albert_tf.tasks import conll_metrics
from conftest import (SCRIPT_MATRIX, assert_near_float32, assert_step_compiled, memoized_runs,
                      run_main)
from test_run_race import TINY
from tool_runner import assert_refused, digests, run_tool
import ner_data
import side_envs
import zh_release

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not



@pytest.fixture(scope="module", autouse=True)
def ner_flags():
    """Defined when the tests run, after collection has imported every script's module."""
    run_ner.define_flags()


def _init(path, vocab_size):
    tf.keras.utils.set_random_seed(0)
    AlbertEncoder(AlbertConfig(**{**TINY, "vocab_size": vocab_size})).save_pretrained(str(path))
    return str(path)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """CoNLL-2003-style files (every tenth sentence 40-60 words, longer than a window), a
    SentencePiece model and a tiny saved encoder."""
    root = tmp_path_factory.mktemp("ner")
    data = ner_data.write_conll(str(root / "data"))
    spm = ner_data.sentencepiece_model(root)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    return {"data_dir": str(root / "data"), "spm": spm, "init": _init(root / "init", vocab),
            "data": data}


def run(**overrides):
    """Parses run_ner flags from keyword arguments and runs main in this process."""
    defaults = dict(run_ner.NER_DEFAULTS, strategy="one_device", mixed_precision="none",
                    learning_rate=3e-3, warmup_step=10, train_batch_size=16, eval_batch_size=16,
                    predict_batch_size=16, max_seq_length=32, log_steps=50, train_step=60,
                    save_checkpoints_steps=30, do_train=True, do_eval=True, do_predict=False)
    return run_main(run_ner, defaults, overrides)


def _read_kv(path):
    with open(path) as f:
        return dict(line.strip().split(" = ") for line in f if line.strip())


@pytest.fixture(scope="module")
def matrix_runs(assets, tmp_path_factory):
    def run_one(out, precision, jit):
        float32 = precision == "none"
        run(data_dir=assets["data_dir"], output_dir=out / "run", spm_model_file=assets["spm"],
            init_checkpoint=assets["init"], mixed_precision=precision, jit_compile=jit,
            do_predict=float32, export_dir=out / "export" if float32 else None)
    return memoized_runs(tmp_path_factory.mktemp("matrix"), run_one)


def _predicted_file(path):
    """[(input line, predicted tag)] per sentence of a *_predictions.txt."""
    sentences, current = [], []
    for line in open(path, encoding="utf-8").read().split("\n"):
        if line:
            head, _, tag = line.rpartition(" ")
            current.append((head, tag))
        elif current:
            sentences.append(current)
            current = []
    return sentences


def test_learns_and_scores_as_conlleval(assets, matrix_runs):
    """Entity F1 far above the majority tag's (O everywhere: F1 0); eval_results.txt and the
    test scores match an independent computation (seqeval) on the written predictions."""
    out = matrix_runs("none", "false") / "run"
    results = _read_kv(out / "eval_results.txt")
    assert set(results) >= {"eval_f1", "eval_precision", "eval_recall", "eval_accuracy",
                            "eval_loss", "eval_f1_PER", "eval_f1_LOC", "eval_f1_ORG",
                            "global_step"}
    gold_dev = [[t for _, t in s] for s in assets["data"]["dev"]]
    majority = np.mean([t == "O" for s in gold_dev for t in s])
    assert float(results["eval_f1"]) > 0.8, results
    assert float(results["eval_accuracy"]) > majority + 0.2, (results, majority)
    assert "metric = eval_f1" in (out / "best_checkpoint.txt").read_text()
    assert (out / "labels.txt").read_text().split() == ["O", "B-LOC", "I-LOC", "B-ORG",
                                                        "B-PER", "I-PER"]
    cases = {}
    for split in ("dev", "test"):
        written = _predicted_file(out / f"{split}_predictions.txt")
        source = assets["data"][split]
        assert [[head for head, _ in s] for s in written] == [
            [f"{w} NN I-NP {t}" for w, t in s] for s in source]  # every token, long ones too
        cases[split] = ([[t for _, t in s] for s in source],
                        [[tag for _, tag in s] for s in written])
    for (split, (gold, predicted)), theirs in zip(cases.items(),
                                                  side_envs.seqeval(*cases.values())):
        scores = _read_kv(out / f"{split}_results.txt")
        ours = conll_metrics.evaluate(gold, predicted)
        assert float(scores["eval_f1"]) == pytest.approx(ours["f1"])
        assert float(scores["eval_f1"]) == pytest.approx(theirs["f1"])
        assert float(scores["eval_precision_PER"]) == pytest.approx(
            theirs["report"]["PER"]["precision"])
        assert float(scores["eval_accuracy"]) == pytest.approx(
            np.mean([a == b for g, p in zip(gold, predicted) for a, b in zip(g, p)]))
    dev_scores = _read_kv(out / "dev_results.txt")
    best = _read_kv(out / "eval_results.txt")
    assert dev_scores["eval_f1"] == best["eval_f1"]  # --do_predict used model.ckpt-best


@pytest.mark.parametrize("precision,jit", SCRIPT_MATRIX)
def test_predicts_new_sentences_of_tokens_alone_without_a_dev_file(assets, matrix_runs,
                                                                   tmp_path, precision, jit):
    """A test.txt of tokens alone (no tag column) and no dev file: predicted as the run's
    tagged test file was, not scored (before: "a token line needs a tag", then "no dev.txt");
    each cell's run predicts under its own precision (and XLA), its tags as right as float32's
    (the float32 run predicted the tagged file: the same tags)."""
    trained = matrix_runs("none", "false") / "run"
    out = tmp_path / "run"
    shutil.copytree(matrix_runs(precision, jit) / "run", out,
                    ignore=shutil.ignore_patterns("dev_*", "test_pred*", "*.npz"))
    (out / "test_results.txt").write_text((trained / "test_results.txt").read_text())
    assert (out / "test_results.txt").exists()  # an earlier prediction's scores: removed
    data = tmp_path / "new"
    data.mkdir()
    source = assets["data"]["test"]
    (data / "test.txt").write_text("\n\n".join("\n".join(w for w, _ in s) for s in source)
                                   + "\n", encoding="utf-8")
    run(data_dir=data, output_dir=out, do_train=False, do_eval=False, do_predict=True,
        mixed_precision=precision, jit_compile=jit)
    written = [[line.split(" ") for line in s.split("\n")] for s in (
        out / "test_predictions.txt").read_text(encoding="utf-8").strip().split("\n\n")]
    before = _predicted_file(trained / "test_predictions.txt")
    assert [[w for w, _ in s] for s in written] == [[h.split()[0] for h, _ in s] for s in before]
    gold = [t for s in source for _, t in s]
    accuracy = {name: np.mean([p == g for p, g in zip(tags, gold)]) for name, tags in (
        ("now", [t for s in written for _, t in s]),
        ("float32", [t for s in before for _, t in s]))}
    if precision == "none":
        assert written == [[[head.split()[0], tag] for head, tag in s] for s in before]
    assert accuracy["now"] >= accuracy["float32"] - 0.1, accuracy
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(("dev_", "test_"))) == [
        "test_predictions.txt"]


@pytest.mark.parametrize("precision,jit", SCRIPT_MATRIX)
def test_precision_and_xla_matrix(assets, matrix_runs, precision, jit):
    """Train and evaluate under float32/bfloat16/float16, op by op and with XLA: F1, accuracy
    and loss near the float32 run's."""
    out = matrix_runs(precision, jit) / "run"
    assert_step_compiled(out.parent, jit)
    results = _read_kv(out / "eval_results.txt")
    assert results["global_step"] in ("30", "60")
    reference = _read_kv(matrix_runs("none", "false") / "run" / "eval_results.txt")
    assert_near_float32(results, reference, ("eval_f1", "eval_accuracy"))
    assert float(results["eval_loss"]) < 0.5


def test_export_and_predict_tag_raw_sentences(assets, matrix_runs, capsys, tmp_path):
    """The serving export tags raw sentences (long ones through windows in the graph) as the
    run's test predictions did; predict --task=ner gives the same from the export and from the
    output_dir, with entity spans."""
    out = matrix_runs("none", "false")
    loaded = tf.saved_model.load(str(out / "export"))
    source = assets["data"]["test"]
    texts = [" ".join(w for w, _ in s) for s in source]
    served = loaded.signatures["serving_default"](sentences=tf.constant(texts))
    assert set(served) == {"words", "tags", "scores", "word_count"}
    written = _predicted_file(out / "run" / "test_predictions.txt")
    for i, sentence in enumerate(written):
        n = int(served["word_count"][i])
        assert n == len(sentence)
        assert [t.decode() for t in served["tags"][i, :n].numpy()] == [t for _, t in sentence]
    # tagger_text.tflite on LiteRT, sentence by sentence: the export's words, tags and scores for
    # every sentence, those longer than a window through the same windows.
    runner = lite.interpreter(model_path=str(out / "export" / "tagger_text.tflite")
                              ).get_signature_runner()
    assert (out / "export" / "labels.txt").read_text().split() == [
        "O", "B-LOC", "I-LOC", "B-ORG", "B-PER", "I-PER"]
    tokenizer = load_tokenizer(assets["spm"], True)
    long = []
    for i, text in enumerate(texts):
        on_device = runner(sentences=np.array([text.encode()], object))
        n = int(served["word_count"][i])
        assert [w.decode() for w in on_device["words"]] == text.split(), text
        assert [t.decode() for t in on_device["tags"]] == [
            t.decode() for t in served["tags"][i, :n].numpy()], text
        np.testing.assert_allclose(on_device["scores"], served["scores"][i, :n], atol=1e-5)
        if sum(max(len(tokenizer.encode(w)), 1) for w in text.split()) > 30:  # window: 32 - 2
            long.append(text)
    assert 0 < len(long) < len(texts)  # some sentences are longer than a window
    from_export = Tagger(str(out / "export"))(texts[:12])
    # predict --model=<export>/tagger_text.tflite: the same through the Tagger
    some = texts[:4] + long[:2] + ["  "]
    on_litert = Tagger(str(out / "export" / "tagger_text.tflite"))(some)
    for a, b in zip(on_litert, Tagger(str(out / "export"))(some)):
        assert (a["words"], a["tags"], a["entities"]) == (b["words"], b["tags"], b["entities"])
        np.testing.assert_allclose(a["scores"], b["scores"], atol=1e-5)
    tagger = Tagger(str(out / "run"), spm_model_file=assets["spm"])
    assert (tagger.max_seq_length, tagger.window_stride) == (32, 15)  # the run's windows
    from_checkpoint = tagger(texts[:12])
    for a, b in zip(from_export, from_checkpoint):
        assert a["tags"] == b["tags"] and a["entities"] == b["entities"]
        np.testing.assert_allclose(a["scores"], b["scores"], atol=1e-5)

    text = "anna  smith said in paris"
    result = tmp_path / "tags.jsonl"
    status, _, err = run_tool(predict, capsys, task="ner", model=out / "export", text=text,
                              output_file=result)
    assert status == 0, err
    row = json.loads(result.read_text())
    assert row["words"] == ["anna", "smith", "said", "in", "paris"]
    assert row["tags"] == from_export_tags(out, text)
    assert [(e["type"], e["words"][0], e["words"][1] - 1) for e in row["entities"]] == (
        conll_metrics.chunks(row["tags"]))
    for entity in row["entities"]:
        assert entity["text"] == text[entity["start"]:entity["end"]]
        assert entity["text"].split() == row["words"][slice(*entity["words"])]
    assert {"type": "PER", "text": "anna  smith", "start": 0, "end": 11,
            "words": [0, 2]} in row["entities"]  # learnt: a name before "said"


def test_a_run_s_checkpoint_tags_in_the_run_s_windows(assets, matrix_runs, tmp_path, capsys,
                                                      caplog):
    """Tagging from a run's directory cuts the windows its run.json names (max_seq_length,
    window_stride) unless told otherwise; a stride for an export is refused."""
    out = tmp_path / "run"
    shutil.copytree(matrix_runs("none", "false") / "run", out)
    run_json = json.loads((out / "run.json").read_text())
    run_json["settings"]["window_stride"] = 7
    (out / "run.json").write_text(json.dumps(run_json))
    common = dict(spm_model_file=assets["spm"])
    with caplog.at_level("INFO", logger="absl"):
        assert Tagger(str(out), **common).window_stride == 7
        assert f"max_seq_length 32, as the run in {out} trained (run.json)" in caplog.messages
        assert "Long sentences in windows of 30 pieces, 7 apart (--window_stride)" in (
            caplog.messages)
    assert Tagger(str(out), window_stride=9, **common).window_stride == 9
    other = Tagger(str(out), max_seq_length=24, **common)  # not the run's windows
    assert (other.max_seq_length, other.window_stride) == (24, 11)
    assert (f"--max_seq_length=24, but the run in {out} trained at 32 (run.json): long texts "
            f"are cut otherwise than in its evaluation") in caplog.messages
    export = matrix_runs("none", "false") / "export"
    Tagger(str(export), max_seq_length=24)
    assert (f"--max_seq_length=24 is not used: {export} reads texts at the length it was "
            f"exported with") in caplog.messages
    assert_refused(run_tool(predict, capsys, task="ner", text="anna said",
                            model=matrix_runs("none", "false") / "export", window_stride=5),
                   "--window_stride is for checkpoints; an export cuts the windows its run did")
    assert_refused(run_tool(predict, capsys, task="classify", text="anna said", model=out,
                            window_stride=5), "--window_stride goes with --task=ner")
    # A CoNLL file given as sentences would tag each token line as a sentence: refused.
    tagged = assets["data_dir"] + "/test.txt"
    assert_refused(run_tool(predict, capsys, task="ner", input_file=tagged, model=out),
                   f"--input_file={tagged} looks like a CoNLL file (a token and its tag on each "
                   f"line): --task=ner takes one sentence a line; run_ner --do_predict reads "
                   f"CoNLL files (its test.txt)")


def from_export_tags(out, text):
    loaded = tf.saved_model.load(str(out / "export"))
    served = loaded.signatures["serving_default"](sentences=tf.constant([text]))
    return [t.decode() for t in served["tags"][0].numpy()]



def test_resume_and_predict_without_training(assets, matrix_runs, tmp_path, caplog,
                                            monkeypatch):
    """--export_dir alone exports the run as it was exported (its labels.txt, run.json's
    --data_dir); a longer --train_step continues the run from its last checkpoint with its
    labels.txt; --do_predict alone (no train.txt read) gives the same test scores from
    model.ckpt-best."""
    out = tmp_path / "run"
    shutil.copytree(matrix_runs("none", "false") / "run", out)
    run(output_dir=out, do_train=False, do_eval=False, export_dir=tmp_path / "export",
        export_tflite="none")
    text = "anna smith said in paris"
    assert from_export_tags(tmp_path, text) == from_export_tags(matrix_runs("none", "false"),
                                                                text)
    scores = _read_kv(out / "test_results.txt")
    os.remove(out / "test_results.txt")
    data = tmp_path / "data"
    shutil.copytree(assets["data_dir"], data)
    os.remove(data / "train.txt")
    run(data_dir=data, output_dir=out, spm_model_file=assets["spm"], do_train=False,
        do_eval=False, do_predict=True, predict_batch_size=5)
    assert _read_kv(out / "test_results.txt") == scores
    best = _read_kv(out / "best_checkpoint.txt")
    # The predictions' dev scores, of the best checkpoint's step
    assert _read_kv(out / "eval_results.txt")["global_step"] == best["global_step"]
    with caplog.at_level("WARNING", logger="absl"):
        run(data_dir=assets["data_dir"], output_dir=out, spm_model_file=assets["spm"],
            init_checkpoint=assets["init"], train_step=70, save_checkpoints_steps=10,
            export_dir=tmp_path / "export_70", export_tflite="none")
    # What the resume exports is its own choice, not a setting that changed.
    [changed] = [m for m in caplog.messages if m.startswith(f"Resuming the run in {out} with "
                                                           f"settings other than")]
    assert "--train_step (run: 60, now: 70)" in changed and "export" not in changed, changed
    # eval_results.txt ends with the run's best: the resumed run's first evaluation is not the
    # best unless it beats it; an evaluate-only rerun measures all again, the same.
    for rerun in (None, dict(do_train=False, do_eval=True)):
        if rerun:  # from the run's parent, --output_dir relative
            monkeypatch.chdir(tmp_path)
            run(output_dir="run", spm_model_file=assets["spm"], **rerun)
        now = _read_kv(out / "best_checkpoint.txt")
        assert float(now["value"]) >= float(best["value"])
        results = _read_kv(out / "eval_results.txt")
        assert (results["global_step"], float(results["eval_f1"])) == (
            now["global_step"], float(now["value"])), (results, now)
    # Resumed at step 60: no checkpoints 10 to 50, as a run from the start would write.
    assert sorted(p.name for p in out.glob("model.ckpt-*.index")) == [
        "model.ckpt-30.index", "model.ckpt-60.index", "model.ckpt-70.index",
        "model.ckpt-best.index"]


def test_wordpiece_iobes_and_valid_txt(tmp_path):
    """The Chinese releases' WordPiece vocabulary with one character a token, IOBES tags and
    valid.txt for dev: it learns, and every character gets its tag back; a tab-separated
    test.txt gets its predictions tab-separated (conlleval -d '\t' reads them)."""
    data = tmp_path / "data"
    data.mkdir()
    for split, count, seed in (("train", 200, 0), ("valid", 40, 1), ("test", 40, 2)):
        sentences = [list(zip([c for c, _ in s], ner_data.to_iobes([t for _, t in s])))
                     for s in ner_data.chinese_sentences(count, seed)]
        ner_data.write_sentences(data / f"{split}.txt", sentences,
                                 "\t" if split == "test" else " ")
    vocab = zh_release.write_vocab(tmp_path / "vocab_chinese.txt")
    init = _init(tmp_path / "init", len(zh_release.vocab_tokens()))
    out = tmp_path / "out"
    run(data_dir=data, output_dir=out, vocab_file=vocab, init_checkpoint=init, train_step=60,
        do_predict=True, max_seq_length=12)  # many sentences span several windows
    labels = (out / "labels.txt").read_text().split()
    assert labels == ["O", "B-LOC", "E-LOC", "B-PER", "E-PER", "I-PER"]
    results = _read_kv(out / "eval_results.txt")
    assert float(results["eval_f1"]) > 0.7, results
    written = (out / "test_predictions.txt").read_text(encoding="utf-8").split("\n\n")
    source = (data / "test.txt").read_text(encoding="utf-8").split("\n\n")
    rows = [[line.split("\t") for line in s.strip().split("\n")] for s in written if s.strip()]
    assert [[row[:2] for row in s] for s in rows] == [
        [line.split("\t") for line in s.strip().split("\n")] for s in source if s.strip()]
    assert {len(row) for s in rows for row in s} == {3} and {
        row[2] for s in rows for row in s} <= set(labels)


def test_user_mistakes_are_one_line(assets, tmp_path, capsys):
    common = dict(data_dir=assets["data_dir"], spm_model_file=assets["spm"],
                  init_checkpoint=assets["init"], max_seq_length=32, train_step=1)
    assert_refused(run_tool(run_ner, capsys, "--do_train", output_dir=tmp_path / "a",
                            window_stride=31, **common),
                   "--window_stride=31 must be between 1 and --max_seq_length - 2 = 30")
    assert not (tmp_path / "a" / "labels.txt").exists()  # a corrected rerun is not refused
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_refused(run_tool(run_ner, capsys, "--do_train", output_dir=tmp_path / "b",
                            **dict(common, data_dir=empty)),
                   f"no train.txt in --data_dir={empty}")
    broken = tmp_path / "broken"  # a bad line of the test file stops the run before training
    shutil.copytree(assets["data_dir"], broken)
    with open(broken / "test.txt", "a", encoding="utf-8") as f:
        f.write("\nword\n")
    lines = (broken / "test.txt").read_text(encoding="utf-8").count("\n")
    assert_refused(run_tool(run_ner, capsys, "--do_train", "--do_predict",
                            output_dir=tmp_path / "f", **dict(common, data_dir=broken)),
                   f"{broken}/test.txt:{lines}: 'word': some token lines have a tag in their "
                   f"last column and some do not")
    assert not list((tmp_path / "f").glob("model.ckpt-*"))
    assert_refused(run_tool(run_ner, capsys, output_dir=tmp_path / "c", **common),
                   "at least one of --do_train, --do_eval, --do_predict")
    assert_refused(run_tool(run_ner, capsys, "--do_eval", output_dir=tmp_path / "c",
                            **{k: v for k, v in common.items() if k != "data_dir"}),
                   "--data_dir is required (the CoNLL files; --export_dir alone exports the run "
                   "in --output_dir without them)")
    before = digests(assets["data_dir"])
    assert_refused(run_tool(run_ner, capsys, "--do_train", output_dir=tmp_path / "d",
                            export_dir=assets["data_dir"], **common),
                   f"--export_dir={assets['data_dir']} is the input --data_dir")
    assert digests(assets["data_dir"]) == before
    assert_refused(run_tool(run_ner, capsys, "--do_train", output_dir=tmp_path / "e",
                            export_dir=tmp_path / "e_export", tflite_quantization="int8",
                            **common),
                   "--tflite_quantization=int8: run_ner's .tflite takes none, float16 or "
                   "dynamic_int8")
    assert not (tmp_path / "e").exists()
    # A checkpoint directory that is not a run's is never trained in: refused before a feature
    # cache or labels.txt is written there.
    release = tmp_path / "release"
    shutil.copytree(assets["init"], release)
    before = digests(release)
    assert_refused(run_tool(run_ner, capsys, "--do_train", output_dir=release,
                            **dict(common, init_checkpoint=release)),
                   "holds checkpoint files (checkpoint, model.ckpt.index) but no checkpoint of "
                   "a run")
    assert digests(release) == before
