"""albert_tf.predict: fill-mask, classification and embeddings from checkpoints and exports,
the command line and its errors."""

import csv
import json
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertConfig, AlbertPretrainer, FullTokenizer
from albert_tf import predict, serving
from albert_tf.serving import export, finetuned
from albert_tf.serving.embed import POOLINGS
from albert_tf.serving.text_io import format_text, read_input_file
from albert_tf.formats.checkpoints import named_weights_checkpoint
from albert_tf.data.labeled_text import InputProblems, LabelSet
from albert_tf.data.vocab import train_sentencepiece
from conftest import TINY
from tool_runner import run_tool_captured

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

WORDS = ("the cat sat on a mat and dog ran to old house by river while bird sang in tree "
         "near home today it cost 3.0, dollars").split()


def _lines(n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(2, 12))) for _ in range(n)]


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    for v in model.variables:  # large random weights: outputs that differ by input
        value = rng.normal(0.0, 0.3, v.shape) + (1.0 if "gamma" in v.path else 0.0)
        v.assign(value.astype(np.float32))


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """A SentencePiece model, a pretrainer checkpoint (with the *.model beside it), its
    pretrainer and encoder exports, and a run_classifier-style output_dir."""
    root = tmp_path_factory.mktemp("predict")
    (root / "corpus.txt").write_text("\n".join(_lines(1500, 0)), encoding="utf-8")
    spm = train_sentencepiece(str(root / "corpus.txt"), str(root / "spm" / "tiny"), 80,
                              hard_vocab_limit=False)
    tokenizer = FullTokenizer(spm, do_lower_case=True)
    config = AlbertConfig(**dict(TINY, vocab_size=len(tokenizer)))
    pretrainer = AlbertPretrainer(config)
    _randomize(pretrainer, 0)
    pretrainer.save_pretrained(str(root / "pretrained"), spm_model_file=spm)
    export.export_encoder(pretrainer, str(root / "hub_mlm"), spm, with_pretrainer_heads=True)
    export.export_encoder(pretrainer.encoder, str(root / "hub"), spm)

    # run_classifier's output_dir: albert_config.json, the trainer's object checkpoints (model
    # and optimizer) and model.ckpt-best; `checkpoint` names a later, worse one.
    classifier = AlbertClassifier(config, num_labels=2)
    _randomize(classifier, 1)
    out = root / "classifier"
    out.mkdir()
    config.to_json_file(str(out / "albert_config.json"))
    optimizer = tf.keras.optimizers.Adam()
    optimizer.build(classifier.trainable_variables)
    ckpt = tf.train.Checkpoint(model=named_weights_checkpoint(classifier), optimizer=optimizer)
    ckpt.write(str(out / "model.ckpt-best"))
    best = [v.numpy() for v in classifier.variables]
    _randomize(classifier, 2)
    tf.train.CheckpointManager(ckpt, str(out), 2, checkpoint_name="model.ckpt").save(30)
    for v, value in zip(classifier.variables, best):
        v.assign(value)
    labels = tf.constant(["unacceptable", "acceptable"])
    finetuned.export_text_serving(
        classifier, str(root / "serving"), spm, seq_length=32,
        signatures={"serving_default": ("text_a", "text_b")},
        output_fn=lambda o: {"probabilities": o["probabilities"],
                             "labels": tf.gather(labels, tf.argmax(o["logits"], -1))})
    return dict(root=root, spm=spm, tokenizer=tokenizer, config=config, pretrainer=pretrainer,
                classifier=classifier, ckpt=str(root / "pretrained"), hub_mlm=str(root / "hub_mlm"),
                hub=str(root / "hub"), clf_dir=str(out), serving=str(root / "serving"))


def _packed(tokenizer, a, b=None):
    ids = [2] + tokenizer.encode(a) + [3]
    types = [0] * len(ids)
    if b is not None:
        ids += tokenizer.encode(b) + [3]
        types += [1] * (len(ids) - len(types))
    return ids, types


# ---- fill-mask -----------------------------------------------------------------------------

def test_fill_mask_top1_is_the_argmax_of_the_model(assets):
    tokenizer, pretrainer = assets["tokenizer"], assets["pretrainer"]
    fill = serving.FillMask(assets["ckpt"], top_k=3)  # tokenizer: the *.model beside it
    texts = ["the cat [MASK] on a mat", "[MASK] dog ran to the [mask].", "bird sang [MASK]"]
    results = fill(texts)

    ids, types, positions = fill.features(texts[1])
    enc = tokenizer.encode
    assert ids == [2, 4] + enc("dog ran to the") + [4, tokenizer.vocab["."], 3]  # no "▁" glued
    assert positions == [1, len(ids) - 3] and types == [0] * len(ids)
    for text, result in zip(texts, results):
        ids, types, positions = fill.features(text)
        out = pretrainer({
            "input_word_ids": tf.constant([ids]), "input_mask": tf.ones([1, len(ids)], tf.int32),
            "input_type_ids": tf.constant([types]),
            "masked_lm_positions": tf.constant([positions])}, training=False)
        logits = out["mlm_logits"].numpy()[0]
        probabilities = tf.nn.softmax(logits).numpy()
        assert result["text"] == text and len(result["masks"]) == len(positions)
        for mask, row, prob in zip(result["masks"], logits, probabilities):
            top = mask["predictions"]
            assert len(top) == 3
            # The special pieces fill nothing: ranked last, the rest by the model's logits.
            row = row.copy()
            row[list(tokenizer.special_ids().values())] = -np.inf
            assert top[0]["token_id"] == int(np.argmax(row))
            assert top[0]["token"] == tokenizer.convert_ids_to_tokens([np.argmax(row)])[0]
            assert [t["token_id"] for t in top] == np.argsort(-row)[:3].tolist()
            np.testing.assert_allclose([t["probability"] for t in top],
                                       prob[np.argsort(-row)[:3]], atol=1e-6)
    # Results do not depend on the batch they were padded in.
    single = fill([texts[2]])[0]
    assert single["masks"][0]["predictions"][0]["token_id"] == \
        results[2]["masks"][0]["predictions"][0]["token_id"]
    np.testing.assert_allclose(single["masks"][0]["predictions"][0]["probability"],
                               results[2]["masks"][0]["predictions"][0]["probability"], atol=1e-6)
    text = format_text(results[1]).splitlines()
    assert text[0] == results[1]["filled"] and len(text) == 3
    assert text[1].startswith("  [MASK] 1: " + results[1]["masks"][0]["predictions"][0]["text"])


def test_fill_mask_follows_the_mlm_bias_from_a_tf1_checkpoint(assets, tmp_path):
    """A TF1-format checkpoint whose MLM bias strongly favours "▁house": every mask gets it."""
    tokenizer = assets["tokenizer"]
    model = AlbertPretrainer(assets["config"])
    for v, w in zip(model.variables, assets["pretrainer"].variables):
        v.assign(w)
    house = tokenizer.vocab["\u2581house"]
    bias = np.zeros(len(tokenizer), np.float32)
    bias[house] = 50.0
    bias[tokenizer.special_ids()["<unk>"]] = 60.0  # the unknown piece fills no text: passed over
    model.masked_lm.output_bias.assign(bias)
    model.save_pretrained(str(tmp_path / "tf1"), format="tf1")
    result = serving.predict("fill_mask", str(tmp_path / "tf1"), "the old [MASK] by the river",
                             spm_model_file=assets["spm"], top_k=2)[0]
    top = result["masks"][0]["predictions"]
    assert top[0]["token"] == "\u2581house" and top[0]["text"] == "house"
    assert 1e-5 < top[0]["probability"] < 1e-3  # the model's (the unknown piece holds the rest)
    assert result["filled"] == "the old house by the river"


def test_fill_mask_export_equals_checkpoint(assets):
    texts, texts_b = ["the [MASK] sat on a mat", "it cost [MASK] dollars"], ["a dog [MASK]", "ok"]
    from_ckpt = serving.FillMask(assets["ckpt"])(texts, texts_b)
    from_export = serving.FillMask(assets["hub_mlm"])(texts, texts_b)  # tokenizer: the asset
    assert [r["filled"] for r in from_export] == [r["filled"] for r in from_ckpt]
    assert from_export[0]["filled_b"] == from_ckpt[0]["filled_b"]
    assert len(from_export[0]["masks"]) == 2 and len(from_export[1]["masks"]) == 1
    for a, b in zip(from_ckpt, from_export):
        for ma, mb in zip(a["masks"], b["masks"]):
            assert [t["token_id"] for t in ma["predictions"]] == [
                t["token_id"] for t in mb["predictions"]]
            np.testing.assert_allclose([t["probability"] for t in ma["predictions"]],
                                       [t["probability"] for t in mb["predictions"]], atol=1e-5)


# ---- embeddings -----------------------------------------------------------------------------

def test_embeddings_from_checkpoint_and_encoder_export_agree(assets):
    tokenizer, encoder = assets["tokenizer"], assets["pretrainer"].encoder
    texts = _lines(5, 3) + ["", "the cat sat " * 20]
    for pooling in POOLINGS:
        ckpt = serving.Embedder(assets["ckpt"], pooling=pooling, batch_size=3,
                                max_seq_length=24).vectors(texts)
        hub = serving.Embedder(assets["hub"], pooling=pooling, max_seq_length=24).vectors(texts)
        assert ckpt.shape == (len(texts), TINY["hidden_size"])
        np.testing.assert_allclose(ckpt, hub, atol=1e-5, rtol=0)
        ids, types = _packed(tokenizer, texts[0])
        out = encoder({"input_word_ids": tf.constant([ids]), "input_type_ids": tf.constant([types]),
                       "input_mask": tf.ones([1, len(ids)], tf.int32)}, training=False)
        expected = {"cls": out["pooled_output"][0], "first": out["sequence_output"][0, 0],
                    "mean": tf.reduce_mean(out["sequence_output"][0], 0)}[pooling]
        np.testing.assert_allclose(ckpt[0], expected.numpy(), atol=1e-5, rtol=0)
    # The long text is cut to max_seq_length as the original: [CLS] + 22 pieces + [SEP].
    ids = _packed(tokenizer, texts[-1])[0]
    assert len(ids) > 24
    ids = ids[:23] + [3]
    out = encoder({"input_word_ids": tf.constant([ids]),
                   "input_type_ids": tf.zeros([1, 24], tf.int32),
                   "input_mask": tf.ones([1, 24], tf.int32)}, training=False)
    rows = serving.Embedder(assets["hub"], max_seq_length=24)([texts[-1]])
    np.testing.assert_allclose(rows[0]["embedding"], out["pooled_output"][0].numpy(), atol=1e-5)
    # Pairs: [CLS] A [SEP] B [SEP] with type ids 1 for B.
    ids, types = _packed(tokenizer, texts[1], texts[2])
    out = encoder({"input_word_ids": tf.constant([ids]), "input_type_ids": tf.constant([types]),
                   "input_mask": tf.ones([1, len(ids)], tf.int32)}, training=False)
    pair = serving.predict("embed", assets["hub_mlm"], [texts[1]], [texts[2]])[0]
    assert pair["text"] == texts[1] and pair["text_b"] == texts[2]
    np.testing.assert_allclose(pair["embedding"], out["pooled_output"][0].numpy(), atol=1e-5)


# ---- classification -------------------------------------------------------------------------

def test_classify_from_a_run_classifier_output_dir(assets, caplog):
    tokenizer, classifier = assets["tokenizer"], assets["classifier"]
    texts, texts_b = _lines(4, 5), _lines(4, 6)
    results = serving.predict("classify", assets["clf_dir"], texts, texts_b,
                              spm_model_file=assets["spm"], task_name="cola")
    for a, b, row in zip(texts, texts_b, results):
        ids, types = _packed(tokenizer, a, b)
        expected = classifier({"input_word_ids": tf.constant([ids]),
                               "input_type_ids": tf.constant([types]),
                               "input_mask": tf.ones([1, len(ids)], tf.int32)},
                              training=False)["probabilities"].numpy()[0]
        # model.ckpt-best, not the latest checkpoint named in `checkpoint`
        np.testing.assert_allclose(row["probabilities"], expected, atol=1e-5)
        assert sum(row["probabilities"]) == pytest.approx(1.0, abs=1e-6)
        assert row["labels"] == ["0", "1"] and row["label"] == str(int(np.argmax(expected)))
        assert row["probability"] == pytest.approx(float(np.max(expected)), abs=1e-6)
        assert row["text"] == a and row["text_b"] == b
    named = serving.predict("classify", assets["clf_dir"], texts, texts_b,
                            spm_model_file=assets["spm"], labels="bad,good")
    assert [r["label"] for r in named] == [["bad", "good"][int(r["label"])] for r in results]
    # The raw-string export of the same classifier: its own label strings; it tokenizes in its
    # graph, and says that a vocabulary given is not used.
    caplog.set_level("WARNING", logger="absl")
    exported = serving.predict("classify", assets["serving"], texts, texts_b,
                               spm_model_file=assets["spm"], do_lower_case=False)
    assert (f"--spm_model_file={assets['spm']} is not used: {assets['serving']} tokenizes texts "
            f"in its graph, with the vocabulary it was exported with") in caplog.text
    assert (f"--do_lower_case=False is not used: {assets['serving']} tokenizes texts in its "
            f"graph, cased as it was exported") in caplog.text
    names = {"0": "unacceptable", "1": "acceptable"}
    assert [r["label"] for r in exported] == [names[r["label"]] for r in results]
    for row, ref in zip(exported, results):
        np.testing.assert_allclose(row["probabilities"], ref["probabilities"], atol=1e-5)
        assert "labels" not in row  # the export names the winner only
    renamed = serving.predict("classify", assets["serving"], texts, texts_b, labels=["n", "y"])
    assert [r["label"] for r in renamed] == [["n", "y"][int(r["label"])] for r in results]
    line = format_text(named[0])
    p = named[0]["probabilities"]
    assert line == (f"{named[0]['label']} (bad {p[0]:.4f}, good {p[1]:.4f})\t{texts[0]}  |  "
                    f"{texts_b[0]}")
    assert format_text(exported[0]).startswith(
        f"{exported[0]['label']} ({p[0]:.4f} {p[1]:.4f})\t")


def test_classify_regression_head_gives_a_score(assets, tmp_path):
    model = AlbertClassifier(assets["config"], num_labels=1, regression=True)
    _randomize(model, 4)
    model.save_pretrained(str(tmp_path / "stsb"), spm_model_file=assets["spm"])
    row = serving.predict("classify", str(tmp_path / "stsb"), "the cat", "a dog",
                          task_name="sts-b")[0]
    ids, types = _packed(assets["tokenizer"], "the cat", "a dog")
    expected = model({"input_word_ids": tf.constant([ids]), "input_type_ids": tf.constant([types]),
                      "input_mask": tf.ones([1, len(ids)], tf.int32)}, training=False)
    assert set(row) == {"text", "text_b", "score"}
    assert row["score"] == pytest.approx(float(expected["predictions"][0]), abs=1e-5)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_checkpoints_predict_in_float32_whatever_policy_the_process_holds(assets, policy):
    """A notebook working under a mixed policy (or one that ran a fine-tuning in-process, which
    leaves its policy set) gets the predictions the command line gives: the predictors build
    their models in float32, and leave the caller's policy as it was."""
    import keras
    texts, texts_b = _lines(3, 5), _lines(3, 6)

    def predictions():
        classified = serving.predict("classify", assets["clf_dir"], texts, texts_b,
                                     spm_model_file=assets["spm"])
        filled = serving.predict("fill_mask", assets["ckpt"], ["the cat [MASK] on a mat"])
        return ([r["probabilities"] for r in classified],
                [t["probability"] for t in filled[0]["masks"][0]["predictions"]],
                serving.Embedder(assets["ckpt"]).vectors(texts))

    expected = predictions()
    keras.mixed_precision.set_global_policy(policy)
    got = predictions()
    assert keras.mixed_precision.global_policy().name == policy
    for ours, theirs in zip(got, expected):
        np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=0)


@pytest.mark.parametrize("task,pairs", [("RTE", True), ("CoLA", False)])
def test_a_run_s_task_says_whether_it_classifies_pairs(assets, tmp_path, task, pairs):
    """A run_classifier output_dir of a GLUE task reads what the run read, as its export does:
    a pair task refuses a text alone, a single-text task a second text."""
    run = tmp_path / task
    shutil.copytree(assets["clf_dir"], run)
    (run / "run.json").write_text(json.dumps(
        {"kind": f"fine-tuning of {task.lower()}", "settings": {"task_name": task}}))
    classifier = serving.Classifier(str(run), spm_model_file=assets["spm"])
    given, wrong = ((["a cat"], ["a dog"]), (["a cat"], None)) if pairs else (
        (["a cat"], None), (["a cat"], ["a dog"]))
    assert len(classifier(*given)) == 1
    with pytest.raises(serving.PredictError) as e:
        classifier(*wrong)
    assert str(e.value) == (
        f"the run in {run} classifies pairs: give --text_b (or two tab-separated columns)"
        if pairs else f"the run in {run} classifies single texts; it takes no second text "
                      f"(--text_b, or a second tab-separated column of a .txt --input_file)")


def test_a_glue_run_reads_its_task_s_own_files(assets, tmp_path, capsys):
    """A CoLA run's predict --input_file=CoLA/dev.tsv (no header: id, label, mark, sentence)
    and test.tsv (a header: index, sentence): each row's sentence, its id and gold label
    carried, as the run read them."""
    run = tmp_path / "run"
    shutil.copytree(assets["clf_dir"], run)
    (run / "run.json").write_text(json.dumps(
        {"kind": "fine-tuning of cola", "settings": {"task_name": "CoLA"}}))
    sentences = _lines(3, 13)
    glue_dir = tmp_path / "CoLA"
    glue_dir.mkdir()
    (glue_dir / "dev.tsv").write_text("".join(f"gj04\t{i % 2}\t\t{t}\n"
                                              for i, t in enumerate(sentences)))
    (glue_dir / "test.tsv").write_text("index\tsentence\n" + "".join(
        f"{i + 7}\t{t}\n" for i, t in enumerate(sentences)))
    expected = serving.Classifier(str(run), spm_model_file=assets["spm"])(sentences)
    for name, carried in (("dev.tsv", [{"id": str(i), "input_label": str(i % 2)}
                                       for i in range(3)]),
                          ("test.tsv", [{"id": str(i + 7)} for i in range(3)])):
        status, stdout, stderr = run_tool_captured(
            predict, capsys, "--task=classify", f"--model={run}",
            f"--spm_model_file={assets['spm']}", f"--input_file={glue_dir / name}")
        assert status == 0, stderr
        got = [json.loads(line) for line in stdout.splitlines()]
        assert got == [{**c, **json.loads(json.dumps(r))} for c, r in zip(carried, expected)]


def test_a_regression_export_gives_a_score(assets, tmp_path):
    """An STS-B export (its labels.json: regression) returns `predictions` and `logits`: a
    score, not a probability of one class; no --task_name needed."""
    model = AlbertClassifier(assets["config"], num_labels=1, regression=True)
    _randomize(model, 4)
    export = tmp_path / "stsb"
    finetuned.export_text_serving(
        model, str(export), assets["spm"], seq_length=32,
        signatures={"serving_default": ("text_a", "text_b")},
        output_fn=lambda o: {"predictions": o["predictions"], "logits": o["logits"]})
    LabelSet("regression", ()).save(str(export))
    row = serving.predict("classify", str(export), "the cat", "a dog")[0]
    ids, types = _packed(assets["tokenizer"], "the cat", "a dog")
    expected = model({"input_word_ids": tf.constant([ids]), "input_type_ids": tf.constant([types]),
                      "input_mask": tf.ones([1, len(ids)], tf.int32)}, training=False)
    assert set(row) == {"text", "text_b", "score"}
    assert row["score"] == pytest.approx(float(expected["predictions"][0]), abs=1e-5)


# ---- errors ---------------------------------------------------------------------------------

def test_errors(assets, tmp_path):
    E = serving.PredictError
    with pytest.raises(E, match="not found"):
        serving.FillMask(str(tmp_path / "missing"))
    with pytest.raises(E, match=r"no \[MASK\] in 'the cat'"):
        serving.FillMask(assets["ckpt"])(["the cat"])
    with pytest.raises(E, match=r"fall beyond --max_seq_length=8"):
        serving.FillMask(assets["ckpt"], max_seq_length=8)(["the cat sat on a mat by the [MASK]"])
    with pytest.raises(E, match="masked-LM head"):
        serving.FillMask(assets["clf_dir"])
    with pytest.raises(E, match="masked-LM head"):
        serving.FillMask(assets["hub"])
    with pytest.raises(E, match="no vocabulary: pass --spm_model_file or --vocab_file"):
        serving.Classifier(assets["clf_dir"])(["the cat"])
    with pytest.raises(E, match="does not exist"):
        serving.Classifier(assets["clf_dir"], spm_model_file=str(tmp_path / "x.model"))(["a"])
    with pytest.raises(E, match=r"3 labels \(a, b, c\) but the checkpoint's head has 2"):
        serving.Classifier(assets["clf_dir"], labels="a,b,c")
    with pytest.raises(E, match=r"3 labels .* but the checkpoint's head has 2"):
        serving.Classifier(assets["clf_dir"], task_name="mnli")
    with pytest.raises(E, match="unknown --task_name"):
        serving.Classifier(assets["clf_dir"], task_name="nope")
    with pytest.raises(E, match="not both"):
        serving.Classifier(assets["clf_dir"], labels="a,b", task_name="cola")
    with pytest.raises(E, match=r"3 labels \(a, b, c\) but the model gives 2"):
        serving.Classifier(assets["serving"], labels="a,b,c")(["x"], ["y"])
    with pytest.raises(E, match="classifies pairs"):
        serving.Classifier(assets["serving"])(["x"])
    with pytest.raises(E, match="no classifier head"):
        serving.Classifier(assets["ckpt"])
    with pytest.raises(E, match="encoder export, which has no classifier head"):
        serving.Classifier(assets["hub"])
    with pytest.raises(E, match="text_classifier export: embed needs"):
        serving.Embedder(assets["serving"])
    with pytest.raises(E, match="pooling"):
        serving.Embedder(assets["ckpt"], pooling="max")
    with pytest.raises(E, match="max_position_embeddings=32"):
        serving.Embedder(assets["ckpt"], max_seq_length=64)
    rng = random.Random(0)
    (tmp_path / "words.txt").write_text("\n".join(
        " ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=6)) for _ in range(8))
        for _ in range(400)), encoding="utf-8")
    other = train_sentencepiece(str(tmp_path / "words.txt"), str(tmp_path / "big"), 150,
                                hard_vocab_limit=False)
    with pytest.raises(E, match=r"big.model is not the vocabulary the model was trained with "
                                r"\(.*tiny.model; id \d+ is "):
        serving.Embedder(assets["ckpt"], spm_model_file=other)(["a"])
    bare = tmp_path / "bare"
    shutil.copytree(assets["ckpt"], bare)
    os.remove(bare / "albert_config.json")
    with pytest.raises(E, match="pass --albert_config_file"):
        serving.Embedder(str(bare))
    (tmp_path / "bad.txt").write_text("a\tb\n\nc\n", encoding="utf-8")
    with pytest.raises(E, match="one text or two tab-separated texts, all lines alike: line 1 "
                                "has 2, line 3 1$"):
        read_input_file(str(tmp_path / "bad.txt"))
    # Single sentences (--task=ner): a tab is part of the sentence, whatever the other lines.
    assert read_input_file(str(tmp_path / "bad.txt"), pairs=False) == (["a\tb", "c"], None, None)


# ---- command line ---------------------------------------------------------------------------

def test_command_line(assets, tmp_path, capsys):
    pairs = tmp_path / "pairs.txt"
    texts, texts_b = _lines(3, 8), _lines(3, 9)
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in zip(texts, texts_b)), encoding="utf-8")
    out_file = tmp_path / "out" / "classify.jsonl"
    runs = [
        ("--task=fill_mask", f"--model={assets['hub_mlm']}",
         "--text=the old [MASK] by the river", "--top_k=2"),
        ("--task=classify", f"--model={assets['clf_dir']}", f"--spm_model_file={assets['spm']}",
         f"--input_file={pairs}", f"--output_file={out_file}", "--labels=no,yes"),
        ("--task=fill_mask", f"--model={assets['ckpt']}", "--text=no mask here"),
        ("--task=embed", f"--model={assets['ckpt']}", "--text=a", "--input_file=x"),
    ]
    results = []
    for args in runs:
        status, out, err = run_tool_captured(predict, capsys, *args)
        results.append(((out, err), status))

    (stdout, stderr), rc = results[0]
    assert rc == 0, stderr
    printed = [json.loads(line) for line in stdout.splitlines()]
    expected = serving.FillMask(assets["hub_mlm"], top_k=2)(["the old [MASK] by the river"])
    assert printed == json.loads(json.dumps(expected))

    (stdout, stderr), rc = results[1]
    assert rc == 0, stderr
    written = [json.loads(line) for line in out_file.read_text(encoding="utf-8").splitlines()]
    expected = serving.Classifier(assets["clf_dir"], spm_model_file=assets["spm"],
                                  labels="no,yes")(texts, texts_b)
    assert [r["label"] for r in written] == [r["label"] for r in expected]
    assert [r["text_b"] for r in written] == texts_b
    for row, ref in zip(written, expected):
        np.testing.assert_allclose(row["probabilities"], ref["probabilities"], atol=1e-6)

    (stdout, stderr), rc = results[2]
    assert rc == 2 and stdout == ""
    assert "error: no [MASK] in 'no mask here'" in stderr

    (stdout, stderr), rc = results[3]
    assert rc != 0 and "give --text (and --text_b) or --input_file" in stderr


# ---- input files by column ------------------------------------------------------------------

def test_input_files_are_read_by_column_as_training_reads_them(assets, tmp_path, capsys):
    """A .csv or .jsonl input: one prediction per data row (none for the header), its text
    column the one the run remembers, its other columns carried; a .txt is one text per line
    as before."""
    run = tmp_path / "run"
    shutil.copytree(assets["clf_dir"], run)
    LabelSet("single_label", ("neg", "pos"), text_columns=("body",)).save(str(run))
    texts = _lines(3, 10) + ['she said "no", twice']
    ids = ["7", "8", "9", "10"]
    table = tmp_path / "new.csv"
    with open(table, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("id", "body"), *zip(ids, texts)])
    json_lines = tmp_path / "new.jsonl"
    json_lines.write_text("".join(json.dumps({"n": i, "body": t, "lang": "en", "label": "pos"})
                                  + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    plain = tmp_path / "new.txt"
    plain.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    model = ("--task=classify", f"--model={run}", f"--spm_model_file={assets['spm']}")
    written = {}
    for path in (table, json_lines, plain):
        status, stdout, stderr = run_tool_captured(predict, capsys, *model, f"--input_file={path}")
        assert status == 0, stderr
        written[path.suffix] = [json.loads(line) for line in stdout.splitlines()]
    expected = json.loads(json.dumps(serving.Classifier(str(run), spm_model_file=assets["spm"])(
        texts)))
    assert expected[0]["labels"] == ["neg", "pos"]  # the run's labels.json
    assert written[".csv"] == [{"id": i, **r} for i, r in zip(ids, expected)]
    assert list(written[".csv"][0])[:2] == ["id", "text"]
    # A gold label beside the predicted one.
    assert written[".jsonl"] == [{"n": i, "lang": "en", "input_label": "pos", **r}
                                 for i, r in enumerate(expected)]
    assert written[".txt"] == expected

    # Pairs from two named columns, a ;-separated .csv, as readable text after the id, for a
    # run that read pairs (one that read single texts refuses them).
    LabelSet("single_label", ("neg", "pos"), text_columns=("a", "b")).save(str(run))
    pairs = tmp_path / "pairs.csv"
    firsts, seconds = _lines(2, 11), _lines(2, 12)
    pairs.write_text("q;first;second\n" + "".join(f"q{i};{a};{b}\n" for i, (a, b) in
                                                    enumerate(zip(firsts, seconds))))
    status, stdout, stderr = run_tool_captured(predict, capsys, *model, f"--input_file={pairs}",
                                               "--text_column_names=first,second", "--format=text")
    assert status == 0, stderr
    expected = serving.Classifier(str(run), spm_model_file=assets["spm"])(firsts, seconds)
    assert stdout.splitlines() == [f"q{i}\t{format_text(r)}" for i, r in enumerate(expected)]


def test_input_file_column_mistakes_are_one_line(assets, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(assets["clf_dir"], run)
    LabelSet("single_label", ("neg", "pos"), text_columns=("body",)).save(str(run))
    model = ("--task=classify", f"--model={run}", f"--spm_model_file={assets['spm']}")
    (tmp_path / "a.csv").write_text("id,body\n1,the cat\n2,\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text("id,text\n1,the cat\n", encoding="utf-8")
    (tmp_path / "c.txt").write_text("the cat\n", encoding="utf-8")
    (tmp_path / "d.tsv").write_text("d1\tthe dog sat\nd2\tthe cat\n", encoding="utf-8")
    cases = [
        ((f"--input_file={tmp_path / 'a.csv'}", "--text_column_names=review"),
         f"{tmp_path / 'a.csv'} has no column 'review' (--text_column_names); its columns: id, "
         f"body"),
        ((f"--input_file={tmp_path / 'b.csv'}",),  # the run's column
         f"{tmp_path / 'b.csv'} has no column 'body' (--text_column_names, as the model's run "
         f"read them); its columns: id, text"),
        ((f"--input_file={tmp_path / 'd.tsv'}",),  # no header line
         f"{tmp_path / 'd.tsv'} has no column 'body' (--text_column_names, as the model's run "
         f"read them); its columns: d1, the dog sat (its first line is read as the header: add "
         f"a header line naming the columns, or give the texts one per line in a .txt file)"),
        ((f"--input_file={tmp_path / 'a.csv'}",),
         f"{tmp_path / 'a.csv'}:3: empty text in column 'body'"),
        ((f"--input_file={tmp_path / 'c.txt'}", "--text_column_names=body"),
         "--text_column_names goes with a .csv, .tsv or .jsonl --input_file"),
    ]
    for args, message in cases:
        status, stdout, stderr = run_tool_captured(predict, capsys, *model, *args)
        assert status == 2 and stdout == ""
        assert [line for line in stderr.splitlines() if "error" in line] == [
            f"predict: error: {message}"]


def test_table_input_reports_every_bad_row_in_one_pass(tmp_path):
    """A .csv predict reads: a row with too many fields and a blank text, both reported at once,
    in file order, as run_classifier reports a training file's."""
    path = tmp_path / "new.csv"
    path.write_text('id,text\n1,fine\n2,"a",extra\n3,\n4,also fine\n', encoding="utf-8")
    with pytest.raises(InputProblems) as caught:
        read_input_file(str(path))
    lines = str(caught.value).splitlines()
    assert lines[0].startswith("2 problems")
    assert [line.split(": ")[0] for line in lines[1:]] == [f"{path}:3", f"{path}:4"]


def test_blank_lines_of_a_text_file_are_skipped_with_a_warning(tmp_path, caplog):
    path = tmp_path / "new.txt"
    path.write_text("first\n\nsecond\n   \nthird\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        texts, texts_b, columns = read_input_file(str(path))
    assert (texts, texts_b, columns) == (["first", "second", "third"], None, None)
    assert f"--input_file={path}: 2 blank lines skipped (line 2, 4): the results follow its 3 " \
           "non-blank lines" in caplog.text


def test_a_text_file_saved_with_a_byte_order_mark_and_windows_line_ends(tmp_path):
    path = tmp_path / "windows.txt"
    path.write_bytes("\ufeffthe cat\tsat\r\nthe dog\tran\r\n".encode("utf-8"))
    assert read_input_file(str(path)) == (["the cat", "the dog"], ["sat", "ran"], None)


def test_answers_as_text_lines():
    """predict --task=qa --format=text: one line each, its fields free of tabs and newlines;
    an export's score, a v1 model's answer found nowhere."""
    assert format_text({"question": "who\tcame?", "answer": "anna\tand\nbo", "start": 3,
                        "end": 14, "score": 1.5}) == "anna and bo [3:14] score 1.5000\twho came?"
    assert format_text({"question": "q", "answer": "x", "start": 0, "end": 1,
                        "probability": 0.25}) == "x [0:1] 0.2500\tq"
    assert format_text({"question": "q", "answer": "", "start": None, "end": None,
                        "score": 0.0}) == "(no answer: no span in the context)\tq"
    assert format_text({"question": "q", "answer": "", "null_odds": 2.0, "best_span": "x",
                        "start": None, "end": None}) == "(no answer: null_odds 2.0000)\tq"
