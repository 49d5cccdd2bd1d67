"""Token classification pieces: the window plan against a direct reading of the max-context
rule, features from CoNLL sentences (SentencePiece and WordPiece), the in-graph tagger against
the features, the model's objective, entity spans and the label set of a run."""

import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, tokenization
from albert_tf.data import conll, tagging
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.serving.tag import entities, tagging_function
from albert_tf.tasks import ner
import ner_data
import zh_release

CONFIG = dict(embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
              intermediate_size=32, max_position_embeddings=40)


def expected_plan(counts, window, stride):
    """Windows every `stride` pieces until one reaches the end; each word in the window whose
    first piece has the most context on its shorter side (the first such window on ties)."""
    windows, words = [], []
    for sentence, pieces in enumerate(counts):
        total, starts = sum(pieces), [0]
        while starts[-1] + window < total:
            starts.append(starts[-1] + stride)
        first_window = len(windows)
        windows += [(sentence, s, min(window, total - s)) for s in starts]
        first = 0
        for n in pieces:
            scored = []
            for k, s in enumerate(starts):
                end = min(s + window, total) - 1
                if s <= first <= end:
                    scored.append((min(first - s, end - first), -k))
            _, k = max(scored)
            words.append((first_window - k, first - starts[-k]))
            first += n
    return windows, words


def test_window_plan_follows_the_max_context_rule():
    rng = random.Random(0)
    for _ in range(300):
        window = rng.randint(1, 12)
        stride = rng.randint(1, window)
        counts = [[rng.randint(1, 4) for _ in range(rng.randint(0, 15))]
                  for _ in range(rng.randint(1, 5))]
        plan = tagging.plan_windows(tf.ragged.constant(counts, dtype=tf.int32,
                                                       ragged_rank=1), window, stride)
        windows, words = expected_plan(counts, window, stride)
        got = list(zip(*(plan[k].numpy().tolist()
                         for k in ("window_sentence", "window_start", "window_length"))))
        assert got == windows, (counts, window, stride)
        assert list(zip(plan["word_window"].numpy().tolist(),
                        plan["word_position"].numpy().tolist())) == words


def test_a_sentence_of_200000_words_is_planned_without_a_window_by_word_matrix():
    """A file without blank lines reads as one huge sentence: planned in memory linear in it."""
    plan = tagging.plan_windows(tf.RaggedTensor.from_row_lengths(
        tf.ones([200_000], tf.int32), [200_000]), 126, 63)
    assert plan["window_start"].shape[0] == (200_000 - 126) // 63 + 2
    position = plan["word_position"].numpy()
    assert 0 <= position.min() and position.max() < 126
    window = plan["word_window"].numpy()
    assert (np.diff(window) >= 0).all() and window[-1] == plan["window_start"].shape[0] - 1
    middle = position[126:-126]  # a quarter window of context or more on either side
    assert middle.min() >= 31 and middle.max() <= 94


@pytest.fixture(scope="module")
def spm_tokenizer(tmp_path_factory):
    root = tmp_path_factory.mktemp("tagging")
    return tokenization.FullTokenizer(spm_model_file=ner_data.sentencepiece_model(root))


@pytest.fixture(scope="module")
def wordpiece_tokenizer(tmp_path_factory):
    path = zh_release.write_vocab(tmp_path_factory.mktemp("wp") / "vocab_chinese.txt")
    return tokenization.FullTokenizer(vocab_file=path)


def _sentences(tokenizer_kind):
    if tokenizer_kind == "wordpiece":
        data = ner_data.chinese_sentences(30, seed=3)
        data.append([(c, "O") for c in zh_release.CHARS[:45]])  # longer than a window
    else:
        rng = random.Random(2)
        data = [ner_data.sentence(rng) for _ in range(25)]
        data += [ner_data.sentence(rng, 40, 60) for _ in range(3)]
        data.append([("\u200b", "O"), ("anna", "B-PER")])  # a word with no piece
    return [conll.Sentence([w for w, _ in s], [t for _, t in s], [f"{w} {t}" for w, t in s])
            for s in data]


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_features_score_every_word_once_on_its_first_piece(kind, spm_tokenizer,
                                                           wordpiece_tokenizer):
    tokenizer = spm_tokenizer if kind == "sentencepiece" else wordpiece_tokenizer
    sentences = _sentences(kind)
    labels = conll.label_list(sentences[:-1])
    max_seq_length = 16
    features = tagging.convert_sentences(sentences, tokenizer, max_seq_length, labels)
    lengths = features["lengths"]
    assert lengths.max() <= max_seq_length
    rows = np.split(features["input_word_ids"], np.cumsum(lengths)[:-1])
    masks = np.split(features["tag_mask"], np.cumsum(lengths)[:-1])
    tags = np.split(features["tag_ids"], np.cumsum(lengths)[:-1])
    special = tokenizer.special_ids()
    assert all(r[0] == special["[CLS]"] and r[-1] == special["[SEP]"] for r in rows)
    assert len(rows) > len(sentences)  # the long sentences span several windows
    assert sum(int(m.sum()) for m in masks) == sum(len(s.tokens) for s in sentences)
    window, position = features["host_word_window"], features["host_word_position"]
    pieces = tagging.word_pieces(tokenizer, [w for s in sentences for w in s.tokens])
    words = [(i, w) for i, s in enumerate(sentences) for w in range(len(s.tokens))]
    for (i, w), k, p, word_ids in zip(words, window, position, pieces):
        assert masks[k][p] == 1
        assert rows[k][p] == word_ids[0]  # the word's first piece
        tag = sentences[i].tags[w]
        assert tags[k][p] == (labels.index(tag) + 1 if tag in labels else 0)
    unk = special["<unk>"]
    if kind == "sentencepiece":
        assert pieces[-2] == [unk]  # the zero-width space: one [UNK] so it gets a tag
    predicted = tagging.words_of_windows(features, np.stack(
        [np.pad(t, (0, max_seq_length - len(t))) for t in tags]))
    assert [list(p) for p in predicted] == [
        [labels.index(t) + 1 if t in labels else 0 for t in s.tags] for s in sentences]


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_in_graph_tagger_equals_the_features_path(kind, spm_tokenizer, wordpiece_tokenizer):
    """The serving function (words by whitespace, windows in the graph) gives each word the
    tag the eval path reads from the same model's windows."""
    tokenizer = spm_tokenizer if kind == "sentencepiece" else wordpiece_tokenizer
    sentences = _sentences(kind)
    labels = conll.label_list(sentences)
    tf.keras.utils.set_random_seed(1)
    model = AlbertTokenClassifier(AlbertConfig(vocab_size=len(tokenizer), **CONFIG),
                                  len(labels), 0.0)
    max_seq_length = 16
    features = tagging.convert_sentences(sentences, tokenizer, max_seq_length, labels)
    rows = np.split(features["input_word_ids"], np.cumsum(features["lengths"])[:-1])
    ids = np.stack([np.pad(r, (0, max_seq_length - len(r))) for r in rows])
    mask = (np.arange(max_seq_length) < features["lengths"][:, None]).astype(np.int32)
    probabilities = model({"input_word_ids": ids, "input_mask": mask,
                           "input_type_ids": np.zeros_like(ids)})["probabilities"]
    expected = [[labels[i] for i in row] for row in tagging.words_of_windows(
        features, np.argmax(probabilities, -1))]
    graph_tokenizer = tokenization.in_graph_tokenizer(tokenizer.asset_file,
                                                      tokenizer.do_lower_case)
    tag = tagging_function(model, graph_tokenizer, max_seq_length, labels)
    out = tag(tf.constant([" ".join(s.tokens) for s in sentences]))
    for i, sentence in enumerate(sentences):
        n = int(out["word_count"][i])
        words = [w.decode() for w in out["words"][i, :n].numpy()]
        assert words == [w for w in sentence.tokens if w.strip()]
        if len(words) == len(sentence.tokens):
            assert [t.decode() for t in out["tags"][i, :n].numpy()] == expected[i], i
    assert out["scores"].shape == out["tags"].shape


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_objective_is_the_mean_cross_entropy_of_labelled_first_pieces(policy):
    import keras
    keras.mixed_precision.set_global_policy(policy)
    tf.keras.utils.set_random_seed(0)
    model = AlbertTokenClassifier(AlbertConfig(vocab_size=30, **CONFIG), 3, 0.0)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 30, (4, 10)).astype(np.int32)
    mask = (rng.random((4, 10)) < 0.5).astype(np.int32)
    tag_ids = rng.integers(0, 4, (4, 10)).astype(np.int32) * mask  # 0: scored, no label
    features = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids), "tag_ids": tag_ids, "tag_mask": mask,
                "is_real_example": np.array([1, 1, 1, 0], np.float32)}
    outputs = model(features)
    assert outputs["logits"].dtype == tf.float32 and outputs["logits"].shape == (4, 10, 3)
    sums = model.loss_sums(features, outputs)
    weight = (mask * (tag_ids > 0)) * features["is_real_example"][:, None]
    logits = outputs["logits"].numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, np.maximum(tag_ids - 1, 0)[..., None], -1)[..., 0]
    expected = (nll * weight).sum() / weight.sum()
    loss = model.replica_loss(sums, model.denominators(features))
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(sums["token_count"]) == weight.sum()
    predicted = model.prediction_outputs(dict(features, example_index=np.arange(4)), outputs)
    assert predicted["tag_ids"].shape == (4, 40)  # padded to max_position_embeddings
    np.testing.assert_array_equal(predicted["tag_ids"][:, :10], np.argmax(logits, -1))
    assert float(np.sum(predicted["loss_sum"][:3])) == pytest.approx(float(sums["loss_sum"]),
                                                                     rel=1e-5)


def test_entities_carry_their_text_and_character_span():
    sentence = "  Anna  Smith met ACME Corp in Paris ."
    words = sentence.split()
    tags = ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "O", "S-LOC", "O"]
    assert entities(sentence, words, tags) == [
        {"type": "PER", "text": "Anna  Smith", "start": 2, "end": 13, "words": [0, 2]},
        {"type": "ORG", "text": "ACME Corp", "start": 18, "end": 27, "words": [3, 5]},
        {"type": "LOC", "text": "Paris", "start": 31, "end": 36, "words": [6, 7]}]


def test_label_sets_and_metric_choice(tmp_path):
    assert ner.is_chunk_scheme(["O", "B-PER", "I-PER", "S-LOC", "E-LOC"])
    assert not ner.is_chunk_scheme(["NN", "VB", "DT"])  # POS: token accuracy
    assert not ner.is_chunk_scheme(["O"])
    data = tmp_path / "data"
    ner_data.write_conll(str(data), sizes=(("train", 20), ("dev", 5), ("test", 5)))
    out = tmp_path / "out"
    labels = ner.run_labels(str(out), str(data), needed=True)
    assert labels[0] == "O" and not out.exists()  # kept when training starts
    out.mkdir()
    conll.write_labels(out, labels)
    assert ner.run_labels(str(out), str(data), needed=False) == labels
    ner_data.write_sentences(str(data / "train.txt"), [[("anna", "B-PERSON")]])
    kept = (out / "labels.txt").read_bytes()
    with pytest.raises(ValueError, match="B-PERSON.*use a new --output_dir"):
        ner.run_labels(str(out), str(data), needed=True)
    assert (out / "labels.txt").read_bytes() == kept  # never replaced
    pos = ner.tag_metrics([["NN", "VB"]], [["NN", "NN"]], chunked=False)
    assert pos == {"eval_accuracy": 0.5}
