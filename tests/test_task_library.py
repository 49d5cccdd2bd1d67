"""The ids-in LiteRT files with the TFLite Task Library's metadata (serving.lite_metadata): the
Task Library itself (tflite-support 0.4.4, in its own environment: tests/side_envs.py) reads
the metadata, tokenizes with the packed vocabulary and gives our model's numbers."""

import random

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder, tokenization
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.serving import lite
from albert_tf.serving.finetuned import model_to_tflite
from albert_tf.serving.lite_metadata import task_library_model
from albert_tf.tasks.squad import TASK_LIBRARY_SEQ_LENGTH, SquadServing, SquadTask
from conftest import TINY
import ner_data
import task_library
import zh_release

LABELS = ["negative", "neutral", "positive"]


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    root = tmp_path_factory.mktemp("task_library")
    return {"sentencepiece": ner_data.sentencepiece_model(root), "wordpiece": zh_release.write_vocab(root / "vocab.txt")}


def _texts(kind):
    if kind == "wordpiece":
        return zh_release.sentences(3, seed=4)
    return [" ".join(w for w, _ in ner_data.sentence(random.Random(s))) for s in range(3)]


def _packed(tokenizer, segments, seq_length):
    """[CLS] a [SEP] (b [SEP]) from token lists, padded: the encoder inputs, int32 [1, n]."""
    pieces, types = ["[CLS]"], [0]
    for i, segment in enumerate(segments):
        pieces += segment + ["[SEP]"]
        types += [i] * (len(segment) + 1)
    ids = tokenizer.convert_tokens_to_ids(pieces)
    pad = seq_length - len(ids)
    return {"input_word_ids": np.array([ids + [0] * pad], np.int32),
            "input_mask": np.array([[1] * len(ids) + [0] * pad], np.int32),
            "input_type_ids": np.array([types + [0] * pad], np.int32)}


def _full(vocabulary):
    if vocabulary.endswith(".model"):
        return tokenization.FullTokenizer(spm_model_file=vocabulary)
    return tokenization.FullTokenizer(vocab_file=vocabulary)


def _check_metadata(out, vocabulary, outputs, labels):
    metadata = out["metadata"]
    assert metadata["min_parser_version"] == "1.1.0"
    subgraph = metadata["subgraph_metadata"][0]
    assert sorted(t["name"] for t in subgraph["input_tensor_metadata"]) == [
        "ids", "mask", "segment_ids"]
    assert [t["name"] for t in subgraph["output_tensor_metadata"]] == outputs
    unit = subgraph["input_process_units"][0]
    if vocabulary.endswith(".model"):
        assert unit["options_type"] == "SentencePieceTokenizerOptions"
        assert unit["options"]["sentencePiece_model"][0]["name"] == "spm.model"
    else:
        assert unit["options_type"] == "BertTokenizerOptions"
        assert unit["options"]["vocab_file"][0] == {
            "name": "vocab.txt", "description": "The WordPiece vocabulary.", "type": "VOCABULARY"}
    expected_files = [vocabulary.rsplit("/", 1)[-1]] + (["labels.txt"] if labels else [])
    assert sorted(out["packed_files"]) == sorted(expected_files)


@pytest.mark.parametrize("kind,quantization", [("sentencepiece", "none"),
                                               ("wordpiece", "none"),
                                               ("sentencepiece", "dynamic_int8")])
def test_classifier_runs_in_the_task_library(vocabularies, tmp_path, kind, quantization):
    vocabulary = vocabularies[kind]
    tokenizer = _full(vocabulary)
    config = AlbertConfig(**dict(TINY, vocab_size=len(tokenizer)))
    model = AlbertClassifier(AlbertEncoder(config), num_labels=len(LABELS))
    ids_model = model_to_tflite(model, 32, lambda o: {"probabilities": o["probabilities"],
                                                      "logits": o["logits"]},
                                quantization=quantization)
    path = tmp_path / "classifier_task_library.tflite"
    path.write_bytes(task_library_model(ids_model, vocabulary, {"probabilities": "probability"},
                                        LABELS))
    texts = _texts(kind)
    out = task_library.run("classify", path, texts)
    _check_metadata(out, vocabulary, ["probability"], LABELS)
    run = lite.interpreter(model_content=ids_model).get_signature_runner()
    for text, got in zip(texts, out["results"]):
        expected = run(**_packed(tokenizer, [tokenizer.tokenize(text)], 32))["probabilities"][0]
        assert sorted(got) == sorted(LABELS)
        np.testing.assert_allclose([got[label] for label in LABELS], expected, atol=1e-5)


def test_question_answerer_runs_in_the_task_library(vocabularies, tmp_path):
    """run_squad's export (v1 at 384 tokens) writes albert_model_task_library.tflite."""
    vocabulary = vocabularies["sentencepiece"]
    tokenizer = _full(vocabulary)
    seq_length = TASK_LIBRARY_SEQ_LENGTH
    config = AlbertConfig(**dict(TINY, vocab_size=len(tokenizer),
                                 max_position_embeddings=seq_length))
    model = AlbertSquad(config)
    keys = SquadServing(model).outputs
    task = SquadTask(tokenizer, None, None, str(tmp_path / "cache"), max_seq_length=seq_length)
    task.export(model, tmp_path / "export", lite.LiteOptions(files="ids"))
    path = tmp_path / "export" / "albert_model_task_library.tflite"
    ids_model = (tmp_path / "export" / "albert_model.tflite").read_bytes()
    texts = _texts("sentencepiece")
    pairs = [(texts[0], texts[1] + " " + texts[2]), (texts[2], texts[0])]
    out = task_library.run("answer", path, pairs)
    _check_metadata(out, vocabulary, [k for k in keys], None)
    run = lite.interpreter(model_content=ids_model).get_signature_runner()
    for (question, context), answers in zip(pairs, out["results"]):
        # The Task Library's packing: the context split on spaces, each word tokenized alone.
        words = context.split()
        doc, owner = [], []
        for i, word in enumerate(words):
            pieces = tokenizer.tokenize(word)
            doc += pieces
            owner += [i] * len(pieces)
        query = tokenizer.tokenize(question)
        logits = run(**_packed(tokenizer, [query, doc], seq_length))
        offset = len(query) + 2  # the context's first position
        assert answers, "no answer"
        for answer in answers:
            start, end = answer["start"], answer["end"]
            assert offset <= start <= end < offset + len(doc)
            np.testing.assert_allclose(answer["logit"], logits["start_logits"][0][start]
                                       + logits["end_logits"][0][end], atol=1e-4)
            assert answer["text"] == " ".join(words[owner[start - offset]:
                                                    owner[end - offset] + 1])
        assert answers[0]["logit"] == max(a["logit"] for a in answers)


def test_task_library_model_names_what_is_missing(vocabularies):
    config = AlbertConfig(**TINY)
    model = AlbertClassifier(AlbertEncoder(config), num_labels=2)
    ids_model = model_to_tflite(model, 16, lambda o: {"logits": o["logits"]})
    with pytest.raises(ValueError, match=r"the outputs \['probabilities'\]; this .tflite has "
                                         r"the inputs .* and the outputs \['logits'\]"):
        task_library_model(ids_model, vocabularies["sentencepiece"],
                           {"probabilities": "probability"})
