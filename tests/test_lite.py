"""LiteRT models that take raw text (albert_tf.serving.lite): the tokenizer's ids against
FullTokenizer's, in TensorFlow and in LiteRT's interpreter, and string-in classifiers against
the serving SavedModel's path (in-graph tokenizer + pack_texts), float and quantized."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, tokenization
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.serving import lite
from albert_tf.serving.finetuned import model_to_tflite
from albert_tf.serving.saved_model import float32_model, pack_texts
from albert_tf.serving.tag import tagging_function
from conftest import TINY
import ner_data
import zh_release

LATIN = ["Anna Smith went to Paris.", "  Héllo   WORLD, 3,000 people;  Ünïcode ",
         "Price 12, and 7,", "x" * 300, "tab\tand\nnewline"]
COMPATIBILITY = ["ﬁne ²", "ＡＢＣ"]  # SentencePiece's own NFKC folds them as the normalizer does
CHINESE = ["中国人民 hello 北京", "".join(zh_release.CHARS[:50]), "Déjà vu!"]


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    root = tmp_path_factory.mktemp("lite")
    spm = ner_data.sentencepiece_model(root, "\nPrice 3,000, 12,5 and 7, ok.\n")
    return {"sentencepiece": spm, "wordpiece": zh_release.write_vocab(root / "vocab_chinese.txt")}


def _full(vocab):
    if str(vocab).endswith(".model"):
        return tokenization.FullTokenizer(spm_model_file=vocab)
    return tokenization.FullTokenizer(vocab_file=vocab)


def _ids_model(tokenizer):
    """The tokenizer alone in LiteRT: a function of UTF-8 bytes returning the ids (a -1 ends
    the output, which LiteRT's Python API cannot read when it is empty)."""
    module = tf.Module()
    module.tokenizer = tokenizer
    module.ids = tf.function(lambda text: {"ids": tf.concat([tokenizer.tokenize(text), [-1]], 0)},
                             input_signature=[tf.TensorSpec([1], tf.string, name="text")])
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.ids.get_concrete_function()], module)
    converter.allow_custom_ops = True
    run = lite.interpreter(model_content=converter.convert()).get_signature_runner()
    return lambda text: run(text=np.array([text], object))["ids"].tolist()[:-1]


@pytest.mark.parametrize("kind,texts", [("sentencepiece", LATIN + COMPATIBILITY),
                                        ("wordpiece", LATIN + CHINESE)])
def test_ids_equal_full_tokenizer_in_tf_and_litert(vocabularies, kind, texts):
    full = _full(vocabularies[kind])
    tokenizer = lite.LiteTokenizer(vocabularies[kind], do_lower_case=True)
    run = _ids_model(tokenizer)
    for text in texts:
        want = full.convert_tokens_to_ids(full.tokenize(text))
        assert tokenizer.tokenize(tf.constant([text])).numpy().tolist() == want, text
        assert run(text.encode()) == want, text


def test_bad_input_gives_ids_not_a_crash(vocabularies):
    """docs/export.md "Bad input": empty text, bytes that are not UTF-8, control characters and
    a 40,000-character text run through LiteRT; invalid bytes become <unk> pieces (the serving
    SavedModel and FullTokenizer drop them), control characters are removed."""
    full = _full(vocabularies["sentencepiece"])
    ids = _ids_model(lite.LiteTokenizer(vocabularies["sentencepiece"], do_lower_case=True))
    unk = full.special_ids()[tokenization.UNK]
    assert ids(b"") == []
    assert ids(b"\x00\x01") == [] and full.encode("\x00\x01") != []
    word = full.encode("price")
    invalid = ids(b"\xff\xfe price \xc3")
    assert invalid.count(unk) == 2 and invalid[-len(word) - 2:-2] == word, invalid
    assert full.encode(b"\xff\xfe price \xc3".decode("utf-8", "replace")) == word
    assert ids(("price " * 8000).encode()) == word * 8000


def test_the_digit_comma_table_expands_ids_in_tf_and_litert():
    """Id 2 stands for pieces [5, 6] and id 4 for [7, 8, 9]; others for themselves."""
    rows = [[0], [1], [5, 6], [3], [7, 8, 9]]
    lengths = np.array([len(r) for r in rows], np.int32)
    table = [tf.constant((np.cumsum(lengths) - lengths).astype(np.int32)), tf.constant(lengths),
             tf.constant(np.concatenate(rows).astype(np.int32))]
    module = tf.Module()
    module.expand = tf.function(lambda ids: {"out": lite.expand(ids, *table)},
                                input_signature=[tf.TensorSpec([None], tf.int32, name="ids")])
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.expand.get_concrete_function()], module)
    run = lite.interpreter(model_content=converter.convert()).get_signature_runner()
    ids = np.array([1, 2, 3, 4, 2], np.int32)
    want = [1, 5, 6, 3, 7, 8, 9, 5, 6]
    assert lite.expand(tf.constant(ids), *table).numpy().tolist() == want
    assert run(ids=ids)["out"].tolist() == want


def test_words_and_their_bytes_are_str_split_s_in_litert():
    """The string-in files' words: Python's `str.split` words (every one of its 29 spaces, the
    multi-byte ones included, where tf_text's WhitespaceTokenizer kept a no-break space's first
    byte in the word before it) and each word's UTF-8 byte range, run in LiteRT."""
    from albert_tf.tokenization.characters import unicode_tables

    splitter = lite.WordSplitter()

    @tf.function(input_signature=[tf.TensorSpec([1], tf.string, name="text")])
    def words(text):
        words, starts, ends = splitter.split(text)
        return {"words": words, "starts": starts, "ends": ends}
    run = lite.interpreter(model_content=lite.convert(words, "none", splitter=splitter)
                           ).get_signature_runner()
    spaces = unicode_tables()["split_spaces"]
    assert len(spaces) == 29 and "\u00a0" in spaces and "\u3000" in spaces
    texts = ["Café\u00a0Müller", "", " ", "a", "x" + "".join(spaces) + "ü" + spaces[-1],
             "".join(f"w{i}é{space}" for i, space in enumerate(spaces)),
             "  Ünï\u2003x\u200by\u00a0\u00a0z\t\u3000東京 "]  # U+200B is no space
    for text in texts:
        text = "first " + text  # a word in every text: LiteRT's Python API reads no empty output
        got = run(text=np.array([text.encode()], object))
        encoded = text.encode()
        want = [(m.group().encode(), len(text[:m.start()].encode()),
                 len(text[:m.end()].encode())) for m in re.finditer(r"\S+", text)]
        assert [m.group() for m in re.finditer(r"\S+", text)] == text.split()
        assert list(zip(got["words"].tolist(), got["starts"].tolist(),
                        got["ends"].tolist())) == want, text
        assert all(encoded[a:b] == w for w, a, b in want)


def test_wordpiece_maps_compatibility_characters_unlike_bert(vocabularies, caplog):
    """The known difference (docs/export.md): FastBertNormalizer folds fullwidth forms to
    ASCII, where BERT's tokenizer keeps them, and the export says so; SentencePiece models fold
    them themselves."""
    full = _full(vocabularies["wordpiece"])
    with caplog.at_level("WARNING", logger="absl"):
        tokenizer = lite.LiteTokenizer(vocabularies["wordpiece"], do_lower_case=True)
    assert "folds fullwidth forms (，→ ,) that the model's tokenizer keeps" in caplog.text
    got = tokenizer.tokenize(tf.constant(["，"])).numpy().tolist()
    assert full.convert_tokens_to_ids(full.tokenize("，")) == [full.vocab["，"]]
    assert got == [full.vocab[","]]


def test_string_in_pair_classifier_equals_the_serving_path(vocabularies, recwarn):
    """WordPiece, float and quantized (the SentencePiece run_classifier / run_squad exports are
    checked end to end in test_export_finetuned.py); no deprecation notice of the TFLite
    interpreter that TensorFlow's calibrator uses reaches the user."""
    vocab = vocabularies["wordpiece"]
    tf.keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertConfig(**dict(TINY, vocab_size=len(_full(vocab)))), 3)
    graph_tokenizer = tokenization.in_graph_tokenizer(vocab, True)
    pairs = [("Anna went to Paris today and stayed there", "yes"), ("", ""),
             ("Price 12, and 7,", "x" * 300), ("北京 hello", "中国人民")]
    packed = [{k: v.numpy() for k, v in pack_texts(
        graph_tokenizer, [tf.constant([a]), tf.constant([b])], 16).items()} for a, b in pairs]
    reference = [model(p, training=False)["probabilities"].numpy() for p in packed]
    tolerance = {"none": 1e-6, "float16": 1e-4, "dynamic_int8": 1e-4, "int8": 2e-2}
    for quantization, atol in tolerance.items():
        flatbuffer = lite.text_model_to_tflite(
            model, vocab, True, 16, ("text_a", "text_b"),
            lambda out: {"probabilities": out["probabilities"]}, quantization=quantization,
            calibration=lambda: iter(packed))
        run = lite.interpreter(model_content=flatbuffer).get_signature_runner()
        for (a, b), want in zip(pairs, reference):
            got = run(text_a=np.array([a.encode()], object),
                      text_b=np.array([b.encode()], object))["probabilities"]
            assert got.shape == (1, 3)
            np.testing.assert_allclose(got, want, atol=atol)
    assert not [w for w in recwarn if "tf.lite.Interpreter" in str(w.message)]
    # int8: weights and activations (the calibrated model computes in int8)
    tensors = lite.interpreter(model_content=flatbuffer).get_tensor_details()
    assert sum(t["dtype"] == np.int8 for t in tensors) > sum(t["dtype"] == np.float32
                                                            for t in tensors)


def test_the_report_scores_each_model_once(vocabularies, tmp_path, caplog):
    """At --tflite_quantization=none the ids-in file is the float32 model: scored once (the
    dev set used to be run through it twice) and logged once; float16 scores its file and the
    float32 one. Counts are logged as whole numbers."""
    import json

    from albert_tf.serving.finetuned import export_finetuned
    vocab = vocabularies["sentencepiece"]
    model = AlbertClassifier(AlbertConfig(**dict(TINY, vocab_size=len(_full(vocab)))), 2)
    for quantization, calls in (("none", 1), ("float16", 2)):
        scored = []

        def score(flatbuffer):
            scored.append(len(flatbuffer))
            caplog.set_level("INFO", logger="absl")  # (a conversion may have raised it)
            return {"eval_accuracy": 0.5 + len(scored) / 10, "total": 2.0}
        out = tmp_path / quantization
        caplog.clear()
        caplog.set_level("INFO", logger="absl")
        export_finetuned(model, out, vocab, True, 16, ("text_a",),
                         lambda o: {"probabilities": o["probabilities"]}, "classifier.tflite",
                         lite_options=lite.LiteOptions(files="ids", quantization=quantization,
                                                       score=score))
        report = json.loads((out / "tflite_report.json").read_text())
        assert len(scored) == calls
        assert report["ids_model"] == {"bytes": scored[0],
                                       "dev": {"eval_accuracy": 0.6, "total": 2.0}}
        assert report["float32_ids_model"] == {"bytes": scored[-1], "dev": {
            "eval_accuracy": 0.5 + calls / 10, "total": 2.0}}
        lines = [m for m in caplog.messages if "ids-in model" in m]
        assert [line.split(":")[0] for line in lines] == (
            ["ids-in model (none, float32)"] if quantization == "none" else
            ["ids-in model (float16)", "float32 ids-in model"])
        assert lines[0].endswith("; dev eval_accuracy 0.6000, total 2"), lines


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_calibration_texts_come_back_from_packed_ids(vocabularies, kind):
    """int8 calibrates string-in models on the task's packed ids turned back into text."""
    full = _full(vocabularies[kind])
    pair = ("anna smith went to paris.", "price 12, and 7,")
    ids = [full.special_ids()[tokenization.CLS]]
    types = [0]
    for segment, text in enumerate(pair):
        piece_ids = full.convert_tokens_to_ids(full.tokenize(text))
        ids += piece_ids + [full.special_ids()[tokenization.SEP]]
        types += [segment] * (len(piece_ids) + 1)
    ids, types = np.array(ids + [0, 0]), np.array(types + [0, 0])
    texts = lite.segment_texts(full, ids, types, 2)
    assert [full.encode(t) for t in texts] == [full.encode(t) for t in pair], texts


def test_an_unknown_quantization_is_refused():
    converter = tf.lite.TFLiteConverter.from_concrete_functions([])
    with pytest.raises(ValueError, match="--tflite_quantization='int4': use one of none, "
                                         "float16, dynamic_int8, int8"):
        lite.quantize(converter, "int4")
    with pytest.raises(ValueError, match="int8 calibrates on the task's data"):
        lite.quantize(converter, "int8")


def test_string_in_tagger_equals_the_serving_tagger_wordpiece(vocabularies):
    """run_ner's tagger_text.tflite (SentencePiece: test_run_ner.py) with a WordPiece
    vocabulary: words, tags and scores of the serving tagger, a word with no piece read as
    [UNK], sentences longer than a window through the same windows (two strides), no word for
    an empty sentence, and words separated by multi-byte spaces."""
    vocab = vocabularies["wordpiece"]
    tf.keras.utils.set_random_seed(0)
    model = AlbertTokenClassifier(AlbertConfig(**dict(TINY, vocab_size=len(_full(vocab)))), 3)
    labels = ["O", "B-X", "I-X"]
    long = " ".join(["Anna Smith went to Paris, 北京 and x \u0301 y."] * 7)  # ~70 pieces
    for stride in (None, 7):
        runner = lite.interpreter(model_content=lite.tagger_to_tflite(
            model, vocab, True, 32, labels, stride=stride)).get_signature_runner()
        served = tagging_function(model, tokenization.in_graph_tokenizer(vocab, True), 32,
                                  labels, stride)
        for text in ["Anna Smith went to Paris.", "北京 hello 中国人民", "x \u0301 y", long, " ",
                     "Café\u00a0Müller went\u2003to Paris."]:
            got = runner(sentences=np.array([text.encode()], object))
            want = {k: v.numpy()[0] for k, v in served(tf.constant([text])).items()}
            n = int(want["word_count"])
            assert [w.decode() for w in got["words"]] == text.split()
            assert got["tags"].tolist() == want["tags"][:n].tolist()
            np.testing.assert_allclose(got["scores"], want["scores"][:n], atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_models_under_a_mixed_policy_convert_in_float32(vocabularies, policy):
    """Models built under a mixed policy (Keras's fit on a TPU, a GPU, an AMX CPU) convert to
    files LiteRT runs, with their float32 copy's outputs: a file converted from the bfloat16 or
    float16 graph failed on the device (no such MatMul kernel). The models are left as they
    were, and so is the global policy."""
    vocab = vocabularies["sentencepiece"]
    config = AlbertConfig(**dict(TINY, vocab_size=len(_full(vocab))))
    keras.mixed_precision.set_global_policy(policy)
    try:
        tf.keras.utils.set_random_seed(0)
        classifier, tagger = AlbertClassifier(config, 2), AlbertTokenClassifier(config, 3)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    copy = float32_model(classifier)
    assert copy.dtype_policy.name == "float32" and classifier.dtype_policy.name == policy
    ids = np.array([[2, 7, 9, 11, 3] + [0] * 11], np.int32)
    inputs = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
              "input_type_ids": np.zeros_like(ids)}
    runner = lite.interpreter(model_content=model_to_tflite(classifier, 16)).get_signature_runner()
    np.testing.assert_allclose(runner(**inputs)["probabilities"],
                               copy(inputs)["probabilities"].numpy(), atol=1e-5)
    text = "Anna Smith went to Paris."
    got = lite.interpreter(model_content=lite.text_model_to_tflite(
        classifier, vocab, True, 16, ["text"], lambda out: {"probabilities": out["probabilities"]})
    ).get_signature_runner()(text=np.array([text.encode()], object))["probabilities"]
    packed = pack_texts(tokenization.in_graph_tokenizer(vocab, True), [tf.constant([text])], 16)
    np.testing.assert_allclose(got, copy(packed)["probabilities"].numpy(), atol=1e-5)
    labels = ["O", "B-X", "I-X"]
    long = " ".join([text] * 4)  # three windows of 14 pieces
    on_device = lite.interpreter(model_content=lite.tagger_to_tflite(
        tagger, vocab, True, 16, labels)).get_signature_runner()(
            sentences=np.array([long.encode()], object))
    served = tagging_function(float32_model(tagger), tokenization.in_graph_tokenizer(vocab, True),
                              16, labels)(tf.constant([long]))
    assert on_device["tags"].tolist() == served["tags"].numpy()[0].tolist()
    np.testing.assert_allclose(on_device["scores"], served["scores"].numpy()[0], atol=1e-5)
    assert keras.mixed_precision.global_policy().name == "float32"


def test_int8_without_calibration_data_is_one_clear_error():
    """The driver's calibration raises when the task has neither training nor dev data: the
    converter passes the error on unchanged (the CLI prints it as one line)."""
    from albert_tf.serving.finetuned import model_to_tflite

    def calibration():
        raise ValueError("--tflite_quantization=int8 calibrates on the task's training or dev "
                         "data: found neither")
    model = AlbertClassifier(AlbertConfig(**TINY), 2)
    with pytest.raises(ValueError, match="calibrates on the task's training or dev data"):
        model_to_tflite(model, 16, quantization="int8", calibration=calibration)


def test_report_warns_when_quantization_costs_more_than_a_point(tmp_path, caplog):
    """tflite_report.json holds both models' scores; the log warns, with what to use instead,
    when the quantized one is more than a point below float32 (the figures: the demo's
    classifier, int8 and dynamic int8)."""
    import json
    import logging

    from albert_tf.serving.finetuned import write_lite_report
    metric = ("eval_accuracy", True)
    with caplog.at_level(logging.WARNING, logger="absl"):
        write_lite_report(tmp_path, "int8", {"classifier.tflite": 883384},
                          (883384, {"eval_accuracy": 0.586}), (3178728, {"eval_accuracy": 0.724}),
                          metric)
    assert ("The int8 .tflite files lose 0.1380 of dev eval_accuracy against float32 (0.5860 "
            "against 0.7240): use --tflite_quantization=dynamic_int8") in caplog.text
    report = json.loads((tmp_path / "tflite_report.json").read_text())
    assert report["ids_model"] == {"bytes": 883384, "dev": {"eval_accuracy": 0.586}}
    assert report["float32_ids_model"]["dev"] == {"eval_accuracy": 0.724}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="absl"):
        write_lite_report(tmp_path, "dynamic_int8", {}, (853840, {"eval_accuracy": 0.726}),
                          (3178728, {"eval_accuracy": 0.724}), metric)
        write_lite_report(tmp_path, "float16", {}, (1, {"eval_loss": 1.2}), (2, {"eval_loss": 1.0}),
                          ("eval_loss", False))
    assert "lose" in caplog.text and "dynamic_int8" not in caplog.text
    assert "The float16 .tflite files lose 0.2000 of dev eval_loss" in caplog.text


def test_scoring_a_dev_set_logs_progress_and_throughput(monkeypatch, caplog):
    """Scoring runs one example at a time (minutes on a SQuAD dev set): a line every
    PROGRESS_SECONDS with the count done of the total, and one at the end with examples/s."""
    import logging

    class Runner:
        def get_input_details(self):
            return {"input_word_ids": {}}

        def __call__(self, input_word_ids):
            return {"logits": input_word_ids.astype(np.float32) * 2}

    class Interpreter:
        def get_signature_runner(self):
            return Runner()
    clock = iter(np.arange(0.0, 1000.0, 10.0))  # 10 s an example
    monkeypatch.setattr(lite, "interpreter", lambda **_: Interpreter())
    monkeypatch.setattr(lite.time, "monotonic", lambda: float(next(clock)))
    batches = [{"input_word_ids": np.full([1, 4], i), "input_mask": np.ones([1, 4])}
               for i in range(7)]
    with caplog.at_level(logging.INFO, logger="absl"):
        outputs = lite.score_ids_model(b"x" * 2**20, batches,
                                       lambda batch, got: {"doubled": got["logits"][:, 0]},
                                       total=7)
    np.testing.assert_array_equal(outputs["doubled"], 2 * np.arange(7))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["Scoring the .tflite model (1.00 MB): 3/7 examples, 0.1/s",
                     "Scoring the .tflite model (1.00 MB): 6/7 examples, 0.1/s",
                     "Scored the .tflite model (1.00 MB) on 7 examples in 80.0 s (0.1/s)"]
