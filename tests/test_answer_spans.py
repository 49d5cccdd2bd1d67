"""The SQuAD export's in-graph answers (serving.answer_spans) against what run_squad computes on
the host: the same windows, ids and most-context flags as data.squad.convert_questions, each
piece's bytes, and the same answer as data.squad_answers.postprocess for any model outputs."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import squad
from albert_tf.data.squad_answers import postprocess
from albert_tf.data.vocab import train_sentencepiece
from albert_tf.serving.answer_spans import best_answers, question_windows
from albert_tf.tokenization import FullTokenizer, in_graph_tokenizer
import zh_release

WORDS = ("the cat sat on a mat, while (muller) ran far away and a bird sang in the tree near "
         "the house by the river. 3.0 seventy zebra anna").split()
ACCENTED = ("  Café\u00a0Müller,  sang «naïve» ﬁne songs,\tnear\n\nthe  RIVER. Márta. "
            "İstanbul\u2003x  ")
CHINESE = "学生在２０１９年购买了火锅和Ｇｏｏｇｌｅ，花了5071元。公司今天购买足球！"
# (max_seq_length, doc_stride, max_query_length): stride below and above the window.
SHAPES = [(40, 16, 12), (24, 5, 12), (64, 128, 4)]


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    rng = np.random.RandomState(0)
    (root / "c.txt").write_text("\n".join(" ".join(rng.choice(WORDS, 12)) for _ in range(800)),
                                encoding="utf-8")
    spm = train_sentencepiece(str(root / "c.txt"), str(root / "spm"), 70, do_lower_case=True,
                              hard_vocab_limit=False)
    return {"sentencepiece": spm, "wordpiece": zh_release.write_vocab(root / "vocab.txt")}


def _questions(seed=1):
    rng = np.random.RandomState(seed)
    contexts = [" ".join(rng.choice(WORDS, rng.randint(3, 40))).capitalize()
                for _ in range(24)] + ["", ACCENTED, "北京 zebra anna，学生。"]
    return [squad.Question(f"q{i}", "who came after zebra ?" if i % 3 else "who?", c, i, [])
            for i, c in enumerate(contexts)]


def _windows(tokenizer, questions, shape):
    inputs, example, offsets, most = question_windows(
        tokenizer, tf.constant([q.question for q in questions]),
        tf.constant([q.context for q in questions]), *shape)
    return ({k: v.numpy() for k, v in inputs.items()}, example.numpy(), offsets.numpy(),
            most.numpy())


@pytest.mark.parametrize("kind,lower", [("sentencepiece", True), ("sentencepiece", False),
                                        ("wordpiece", True)])
def test_windows_are_the_features_run_squad_reads(vocabularies, kind, lower):
    """Each shape: the windows, their ids and owners, and each position's most-context flag
    equal the host features'; each context piece's bytes are the characters the host gives it,
    accented words, ligatures, no-break spaces, runs of Chinese characters with fullwidth
    digits and letters included (once each piece of such a run got the whole run)."""
    host = FullTokenizer(vocabularies[kind], lower)
    graph = in_graph_tokenizer(vocabularies[kind], do_lower_case=lower)
    questions = _questions()
    questions.append(squad.Question("zh", "who?", CHINESE, len(questions), []))
    pieces = 0
    for shape in SHAPES:
        features = squad.convert_questions(questions, host, *shape, is_training=False)
        inputs, example, offsets, most = _windows(graph, questions, shape)
        bounds = np.concatenate([[0], np.cumsum(features["lengths"])])
        assert len(inputs["input_word_ids"]) == len(features["lengths"]) > len(questions)
        np.testing.assert_array_equal(example, features["host_question"])
        for w, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            n = b - a
            np.testing.assert_array_equal(inputs["input_word_ids"][w, :n],
                                          features["input_word_ids"][a:b])
            assert not inputs["input_mask"][w, n:].any()
            np.testing.assert_array_equal(most[w, :n], features["host_max_context"][a:b] == 1)
            context = questions[example[w]].context
            data = context.encode()
            for p in range(n):
                first, last = features["host_start_char"][a + p], features["host_end_char"][a + p]
                start, end = offsets[w, p]
                assert (first < 0) == (start < 0), (w, p)
                if first < 0 or start == end:  # SentencePiece's lone "▁": no bytes of its own
                    continue
                pieces += 1
                got, want = data[start:end].decode(), context[first:last + 1]
                assert got.strip() == want.strip(), (got, want)
    assert pieces > 300, pieces


def _random_outputs(rng, windows, length, version_2, k=(5, 3)):
    if version_2 == "span":  # v1's outputs and the [CLS] span's score
        return dict(_random_outputs(rng, windows, length, False, k),
                    null_logits=rng.randn(windows) * 3)
    if version_2:
        k1, k2 = k
        return {"start_top_index": rng.randint(0, length, (windows, k1)),
                "start_top_log_probs": -rng.rand(windows, k1) * 5,
                "end_top_index": rng.randint(0, length, (windows, k1 * k2)),
                "end_top_log_probs": -rng.rand(windows, k1 * k2) * 5,
                "cls_logits": rng.randn(windows) * 3}
    return {"start_top_index": rng.randint(0, length + 2, (windows, k[0])),
            "start_top_logits": rng.randn(windows, k[0]) * 3,
            "end_top_index": rng.randint(0, length + 2, (windows, k[0])),
            "end_top_logits": rng.randn(windows, k[0]) * 3}


@pytest.mark.parametrize("version_2", [False, True, "span"])
def test_answers_are_the_host_post_processing_s(vocabularies, version_2):
    """Random top-k outputs on every window (positions anywhere: the question, [SEP], padding,
    past the end): the in-graph answer, its characters and score are postprocess's best
    span's; v2's null_odds its lowest cls_logits (the span head's: its lowest [CLS] span score
    less its best span's), its answer "" past the threshold."""
    host = FullTokenizer(vocabularies["sentencepiece"], True)
    graph = in_graph_tokenizer(vocabularies["sentencepiece"])
    questions = _questions(2)
    shape, max_answer_length, threshold = (32, 6, 8), 4, 0.5
    features = squad.convert_questions(questions, host, *shape, is_training=False)
    inputs, example, offsets, most = _windows(graph, questions, shape)
    rng = np.random.RandomState(0)
    answered = 0
    for _ in range(5):
        outputs = _random_outputs(rng, len(example), shape[0], version_2)
        _, nbest, null_odds = postprocess(questions, features, outputs, 20, max_answer_length,
                                          bool(version_2), char_spans=True)
        got = best_answers({k: tf.constant(v) for k, v in outputs.items()},
                           tf.constant([q.context for q in questions]), tf.constant(example),
                           tf.constant(offsets), tf.constant(most), max_answer_length,
                           bool(version_2), threshold)
        got = {k: v.numpy() for k, v in got.items()}
        for i, q in enumerate(questions):
            best = nbest[q.qas_id][0]
            text = got["best_span" if version_2 else "answer"][i].decode()
            assert text == best["text"], (i, text, best)
            if version_2:
                assert got["null_odds"][i] == pytest.approx(null_odds[q.qas_id], abs=1e-5)
                if null_odds[q.qas_id] > threshold:
                    assert got["answer"][i] == b"" and got["start"][i] == -1
                    continue
            # A span of only a lone "▁" piece is "" with its score, as none found with 0.
            score = best["start_logit"] + best["end_logit"]
            assert got["score"][i] == pytest.approx(score, abs=1e-4)
            answered += bool(best["text"])
            assert (got["start"][i], got["end"][i]) == (
                (best["start"], best["end"]) if best["text"] else (-1, -1))
    assert answered >= 20, answered


def test_the_default_stride_leaves_no_context_piece_out():
    """Without a run's doc_stride (a transformers AlbertForQuestionAnswering): run_squad's 128
    at its 384-token windows, and windows that overlap where 128 would leave gaps (128-token
    windows hold at most 61 context pieces after a 64-piece question)."""
    from albert_tf.serving.answer import default_doc_stride
    assert default_doc_stride(384) == 128
    assert default_doc_stride(128) == 30
    for length in (96, 128, 200, 512):
        room = length - 64 - 3
        assert 1 <= default_doc_stride(length) <= room
