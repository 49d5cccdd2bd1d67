"""SQuAD pieces: official metrics on hand-computed cases, piece↔character alignment, doc-stride
windows and labels, post-processing, reading errors, and the v1/v2 heads."""

import json
import logging

import numpy as np
import pytest

from albert_tf.tasks import squad_metrics as m
from albert_tf.data import squad
from albert_tf.data import squad_answers
from albert_tf.data.vocab import train_sentencepiece

CORPUS = ("the cat sat on the mat while muller ran far away and a bird sang in the tree near "
          "the house by the river cafe naive resume tokyo 3.0 seventy").split()


# ---- official metrics ----------------------------------------------------------------------

def test_normalize_answer():
    assert m.normalize_answer("The  Cat!") == "cat"
    assert m.normalize_answer("an apple, a pear; THE end.") == "apple pear end"
    assert m.normalize_answer("theater anatomy") == "theater anatomy"  # whole words only
    assert m.normalize_answer("  Rock-'n'-roll\t") == "rocknroll"
    assert m.normalize_answer("a") == ""


def test_v1_exact_and_f1():
    assert m.exact_match("The Cat.", "cat") == 1
    assert m.f1_v1("the big cat", "a cat") == pytest.approx(2 / 3)  # p 1/2, r 1
    assert m.f1_v1("cat cat dog", "cat dog dog") == pytest.approx(2 / 3)  # counts clip
    assert m.f1_v1("", "") == 0.0 and m.f1_v2("", "") == 1.0 and m.f1_v2("x", "") == 0.0
    golds = {"q1": ["Denver Broncos", "Broncos"], "q2": ["a cat"], "q3": ["x"]}
    result = m.squad_v1(golds, {"q1": "broncos", "q2": "the big cat"})  # q3 unanswered
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)


def test_v2_scores_splits_and_threshold():
    golds = {"q1": ["Paris"], "q2": [], "q3": ["blue whale", "whale"], "q4": ["the"]}
    predictions = {"q1": "paris", "q2": "something", "q3": "a big whale", "q4": "x"}
    na = {"q1": 0.1, "q2": 0.9, "q3": 0.2, "q4": 0.7}
    # q4's only answer normalises to "": unanswerable like q2.
    result = m.squad_v2(golds, predictions, na, threshold=0.5)
    assert result["total"] == 4 and result["HasAns_total"] == 2 and result["NoAns_total"] == 2
    assert result["exact"] == pytest.approx(75.0)          # q1, q2, q4 right
    assert result["f1"] == pytest.approx(100 * (1 + 1 + 2 / 3 + 1) / 4)
    assert result["HasAns_exact"] == 50.0 and result["HasAns_f1"] == pytest.approx(250 / 3)
    assert result["NoAns_exact"] == 100.0 and result["NoAns_f1"] == 100.0
    without = m.squad_v2(golds, predictions)  # no no-answer scores: every answer stands
    assert without["NoAns_exact"] == 0.0 and without["exact"] == 25.0


def test_best_threshold_search():
    golds = {"a": ["x"], "b": [], "c": ["y"], "d": []}
    predictions = {"a": "x", "b": "z", "c": "w", "d": "v"}
    na = {"a": 0.2, "b": 0.6, "c": 0.4, "d": 0.5}
    # Start from all-null (2 of 4); a (+1) at 0.2 is the peak: answer only a.
    threshold, best = m.tune_threshold_v2(golds, predictions, na)
    assert threshold == 0.2 and best == pytest.approx(75.0)
    assert m.squad_v2(golds, predictions, na, threshold)["f1"] == pytest.approx(75.0)
    threshold, best = m.tune_threshold_v2(golds, {**predictions, "a": "q"}, na)
    assert threshold == 0.0 and best == 50.0  # nothing beats answering nothing


# ---- alignment, windows, labels ------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    from albert_tf.tokenization import FullTokenizer
    root = tmp_path_factory.mktemp("spm")
    rng = np.random.RandomState(0)
    (root / "c.txt").write_text("\n".join(" ".join(rng.choice(CORPUS, 12)) for _ in range(800)),
                                encoding="utf-8")
    path = train_sentencepiece(str(root / "c.txt"), str(root / "spm"), 70, do_lower_case=True,
                               hard_vocab_limit=False)
    return FullTokenizer(path, True), FullTokenizer(path, False)


CONTEXT = ("  Café\u00a0Müller  sang «naïve» ﬁne songs,\tΟΔΟΣ road; 東京 at 3.0, x3.0, "
           "Ｔｏｋｙｏ\u2003near\n\nthe  RIVER.  ")
ANSWERS = ["Café", "Müller", "«naïve»", "ﬁne", "songs,", "ΟΔΟΣ", "東京", "3.0,", "x3.0,",
           "Ｔｏｋｙｏ", "RIVER.", "Müller  sang", "the  RIVER"]


@pytest.mark.parametrize("lower", [True, False])
def test_predicted_spans_map_back_to_original_characters(tokenizers, lower):
    """Each answer → training labels → fake logits on those labels → the exact original text."""
    tokenizer = tokenizers[0 if lower else 1]
    questions = []
    for i, answer in enumerate(ANSWERS):
        start = CONTEXT.index(answer)
        questions.append(squad.Question(f"q{i}", "who", CONTEXT, 0, [answer], start, answer))
    train = squad.convert_questions(questions, tokenizer, 200, 128, 8, is_training=True)
    assert len(train["lengths"]) == len(ANSWERS) and not train["is_impossible"].any()
    evaluation = squad.convert_questions(questions, tokenizer, 200, 128, 8, is_training=False)
    k = 3
    outputs = {"start_top_index": np.zeros((len(ANSWERS), k), np.int32),
               "end_top_index": np.zeros((len(ANSWERS), k), np.int32),
               "start_top_logits": np.tile([5.0, 0.0, -1.0], (len(ANSWERS), 1)),
               "end_top_logits": np.tile([5.0, 0.0, -1.0], (len(ANSWERS), 1))}
    outputs["start_top_index"][:, 0] = train["start_positions"]
    outputs["end_top_index"][:, 0] = train["end_positions"]
    predictions, nbest, _ = squad_answers.postprocess(questions, evaluation, outputs, 20, 30, False)
    assert [predictions[f"q{i}"] for i in range(len(ANSWERS))] == ANSWERS
    assert nbest["q0"][0]["probability"] > 0.5


ZH_CONTEXT = "２０１９年，ALBERT模型在北京发布！learning很好，Café也不错。\u3000张三说：“我们都是学生”。"
ZH_ANSWERS = ["２０１９年", "ALBERT", "ALBERT模型", "北京", "learning", "Café", "张三",
              "“我们都是学生”", "学生", "ALBERT模型在北京发布！learning"]


@pytest.mark.parametrize("lower", [True, False])
def test_wordpiece_spans_are_exact_characters_of_a_chinese_context(tmp_path, lower):
    """A context without spaces (CMRC 2018, DRCD): each answer → labels → fake logits → the
    exact characters, no ## and no added spaces; also pieces split inside a word."""
    import zh_release
    from albert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(zh_release.write_vocab(tmp_path / "vocab.txt"), lower)
    questions = [squad.Question(f"q{i}", "谁？", ZH_CONTEXT, 0, [a], ZH_CONTEXT.index(a), a)
                 for i, a in enumerate(ZH_ANSWERS)]
    train = squad.convert_questions(questions, tokenizer, 128, 64, 8, is_training=True)
    assert not train["is_impossible"].any()
    evaluation = squad.convert_questions(questions, tokenizer, 128, 64, 8, is_training=False)
    n = len(ZH_ANSWERS)
    outputs = {"start_top_index": np.zeros((n, 3), np.int32),
               "end_top_index": np.zeros((n, 3), np.int32),
               "start_top_logits": np.tile([5.0, 0.0, -1.0], (n, 1)),
               "end_top_logits": np.tile([5.0, 0.0, -1.0], (n, 1))}
    outputs["start_top_index"][:, 0] = train["start_positions"]
    outputs["end_top_index"][:, 0] = train["end_positions"]
    predictions, _, _ = squad_answers.postprocess(questions, evaluation, outputs, 20, 30, False)
    # Cased, ALBERT and Café are [UNK] in this lowercase vocabulary: still whole spans.
    assert [predictions[f"q{i}"] for i in range(n)] == ZH_ANSWERS
    pieces, starts, ends = tokenizer.tokenize_with_offsets("learning")
    assert pieces == ["learn", "##ing"] and (starts, ends) == ([0, 5], [4, 7])


def test_chinese_answers_are_scored_by_character():
    """CMRC 2018's rules for gold answers with Chinese characters; SQuAD's for the others."""
    assert m.mixed_segments("ALBERT模型，在 2019年发布!") == [
        "albert", "模", "型", "在", "2019", "年", "发", "布"]
    assert m.exact_match("北京大学。", "北京大学") == 1          # punctuation removed
    assert m.exact_match("北京 大学", "北京大学") == 1           # spaces are not characters
    assert m.exact_match("北京", "北京大学") == 0
    assert m.f1_v1("北京", "北京大学") == pytest.approx(2 / 3)   # p 1, r 1/2
    assert m.f1_v1("albert", "ALBERT模型") == pytest.approx(0.5)  # p 1, r 1/3
    # A contiguous run, not a bag: "学大" shares two characters but a run of one.
    assert m.f1_v1("学大", "大学") == pytest.approx(0.5)
    assert m.f1_v1("没有", "北京") == 0.0 and m.f1_v2("", "北京") == 0.0
    assert m.f1_v1("the big cat", "a cat") == pytest.approx(2 / 3)  # no CJK: SQuAD's F1
    golds = {"a": ["北京大学", "北大"], "b": ["张三"]}
    result = m.squad_v1(golds, {"a": "北大。", "b": "张三丰"})
    assert result["exact_match"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (1 + 0.8) / 2)


def test_align_pieces_whitespace_and_unicode(tokenizers):
    tokenizer = tokenizers[0]
    pieces = tokenizer.tokenize(CONTEXT)
    starts, ends = squad.align_pieces(CONTEXT, pieces, True)
    assert np.all(np.diff(starts) >= 0) and np.all(ends >= starts)
    texts = ["".join(CONTEXT[s:e + 1].split()) for s, e in zip(starts, ends)]
    assert "".join(texts).startswith("CaféMüllersang")
    assert CONTEXT[starts[-1]:ends[-1] + 1] == "."


def test_windows_and_max_context():
    assert squad.windows(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert squad.windows(10, 4, 6) == [(0, 4), (4, 4), (8, 2)]
    assert squad.windows(3, 4, 2) == [(0, 3)]
    spans = [(0, 4), (3, 4), (6, 4)]
    assert squad.max_context(spans, 3) == 0   # a tie keeps the first window
    assert squad.max_context(spans, 4) == 1
    assert squad.max_context(spans, 9) == 2


def test_doc_stride_features_and_labels(tokenizers):
    tokenizer = tokenizers[0]
    context = " ".join(CORPUS)
    answer = "tokyo"
    q = squad.Question("q", "the cat", context, 0, [answer], context.index(answer), answer)
    train = squad.convert_questions([q], tokenizer, 24, 6, 8, is_training=True)
    evaluation = squad.convert_questions([q], tokenizer, 24, 6, 8, is_training=False)
    n = len(train["lengths"])
    assert n > 3 and train["lengths"].max() <= 24
    answer_ids = tokenizer.encode(answer)
    offsets = np.concatenate([[0], np.cumsum(train["lengths"])[:-1]])
    inside = 0
    for f in range(n):
        seq = train["input_word_ids"][offsets[f]:offsets[f] + train["lengths"][f]]
        p_mask = train["p_mask"][offsets[f]:offsets[f] + train["lengths"][f]]
        s, e = train["start_positions"][f], train["end_positions"][f]
        if train["is_impossible"][f]:
            assert s == e == 0
            continue
        inside += 1
        assert seq[s:e + 1].tolist() == answer_ids and not p_mask[s:e + 1].any()
        assert p_mask[0] == 0 and p_mask[-1] == 1
    assert 0 < inside < n
    # Every document token is the max-context token of exactly one window.
    doc_tokens = len(tokenizer.tokenize(context))
    assert int(evaluation["host_max_context"].sum()) == doc_tokens
    assert evaluation["host_question"].tolist() == [0] * n


# ---- reading ----------------------------------------------------------------------------

def _write(tmp_path, data, name="f.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def _squad(qas, context="Anna met Boris in Paris."):
    return {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_reading_errors_name_file_and_question(tmp_path):
    bad = {"id": "q7", "question": "who?", "answers": [{"text": "Boris", "answer_start": "9"}]}
    path = _write(tmp_path, _squad([bad]))
    with pytest.raises(ValueError, match=r"f\.json: question 'q7', answer 0: 'answer_start' "
                                         r"should be an integer, found a string"):
        squad.read_squad(path, True, False)
    with pytest.raises(ValueError, match=r"paragraph 0: missing key 'context'"):
        squad.read_squad(_write(tmp_path, {"data": [{"paragraphs": [{"qas": []}]}]}), False,
                         False)
    with pytest.raises(ValueError, match="not valid JSON"):
        squad.read_squad(_write(tmp_path, "{"), False, False)
    with pytest.raises(ValueError, match="'data' list"):
        squad.read_squad(_write(tmp_path, {"version": "1.1"}), False, False)
    with pytest.raises(FileNotFoundError, match="nothing.json"):
        squad.read_squad(str(tmp_path / "nothing.json"), False, False)
    no_answer = {"id": "q8", "question": "who?", "answers": []}
    with pytest.raises(ValueError, match="question 'q8' has no answer; training needs one"):
        squad.read_squad(_write(tmp_path, _squad([no_answer])), True, False)
    twice = _squad([no_answer, dict(no_answer, question="and who?")])
    with pytest.raises(ValueError, match=r"paragraph 0, question 1: id 'q8' is also the id of "
                                         r"article 0, paragraph 0, question 0: each question "
                                         r"needs an id of its own"):
        squad.read_squad(_write(tmp_path, twice), False, False)


def test_misaligned_training_answers_are_skipped_and_counted(tmp_path, caplog):
    qas = [{"id": "ok", "question": "who?", "answers": [{"text": "Boris", "answer_start": 9}]},
           {"id": "off", "question": "who?", "answers": [{"text": "Boris", "answer_start": 3}]},
           {"id": "gone", "question": "who?", "answers": [{"text": "Carl", "answer_start": 0}]},
           {"id": "none", "question": "who?", "answers": [], "is_impossible": True}]
    path = _write(tmp_path, _squad(qas))
    with caplog.at_level(logging.WARNING):
        questions, stats = squad.read_squad(path, True, True)
    assert [q.qas_id for q in questions] == ["ok", "none"] and stats.misaligned == 2
    assert "question 'off': answer 'Boris' is not at answer_start 3" in caplog.text
    assert questions[1].is_impossible and questions[1].answers == []
    evaluation, _ = squad.read_squad(path, False, True)  # evaluation keeps every question
    assert [q.answers for q in evaluation] == [["Boris"], ["Boris"], ["Carl"], []]
    only_bad = _write(tmp_path, _squad(qas[1:3]), "bad.json")
    with pytest.raises(ValueError, match="bad.json holds no usable questions"):
        squad.read_squad(only_bad, True, True)


def test_answer_starts_counted_in_bytes_are_refused_naming_the_cause(tmp_path):
    """Offsets counted in UTF-8 bytes (a common mistake with accented text) put most answers
    past their text: refused in one line (before: each skipped with a warning, the run trained
    on the rest)."""
    context = "Zoë met Boris in Zürich."
    qas = [{"id": f"q{i}", "question": "where?", "answers": [
        {"text": text, "answer_start": len(context[:context.index(text)].encode("utf-8"))}]}
        for i, text in enumerate(("Zoë", "Boris", "Zürich"))]
    with pytest.raises(ValueError) as e:
        squad.read_squad(_write(tmp_path, _squad(qas, context)), True, False)
    assert str(e.value) == (f"{tmp_path}/f.json: 2 training answers are not at their "
                            f"answer_start, 2 of them that many UTF-8 bytes into the context: "
                            f"answer_start counts characters (a Python str index), not bytes")
    for qa in qas:  # counted in characters: every one read
        qa["answers"][0]["answer_start"] = context.index(qa["answers"][0]["text"])
    questions, stats = squad.read_squad(_write(tmp_path, _squad(qas, context)), True, False)
    assert [q.answer_start for q in questions] == [0, 8, 17] and stats.misaligned == 0


# ---- heads ----------------------------------------------------------------------------------

def _model_inputs(rng, batch=3, length=12):
    ids = rng.randint(5, 50, (batch, length)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[0, 9:] = 0
    p_mask = np.zeros_like(ids)
    p_mask[:, 1:4] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids),
            "p_mask": p_mask, "example_index": np.arange(batch),
            "is_real_example": np.ones(batch, np.float32)}


def test_head_variables_and_masking(tiny_config, tmp_path):
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.modeling.squad import AlbertSquad
    h = tiny_config.hidden_size
    v1 = AlbertSquad(tiny_config, version_2=False, n_best_size=20)
    v2 = AlbertSquad(tiny_config, version_2=True)
    heads = lambda model: {k: tuple(v.shape) for k, v in model.tf1_weights().items()  # noqa
                           if not k.startswith("bert/")}
    assert heads(v1) == {"cls/squad/output_weights": (2, h), "cls/squad/output_bias": (2,)}
    assert heads(v2) == {
        "start_logits/dense/kernel": (h, 1), "start_logits/dense/bias": (1,),
        "end_logits/dense_0/kernel": (2 * h, h), "end_logits/dense_0/bias": (h,),
        "end_logits/LayerNorm/gamma": (h,), "end_logits/LayerNorm/beta": (h,),
        "end_logits/dense_1/kernel": (h, 1), "end_logits/dense_1/bias": (1,),
        "answer_class/dense_0/kernel": (2 * h, h), "answer_class/dense_0/bias": (h,),
        "answer_class/dense_1/kernel": (h, 1)}
    features = _model_inputs(np.random.RandomState(0))
    out = v1(features, training=False)
    valid = (features["input_mask"] == 1) & (features["p_mask"] == 0)
    top = v1.prediction_outputs(features, out)
    assert top["start_top_index"].shape == (3, 20)  # padded past the 12 positions
    for row in range(3):  # the best valid-count indexes are all valid positions
        count = int(valid[row].sum())
        assert valid[row][top["start_top_index"][row, :count].numpy()].all()
    out = v2(features, training=False)
    top = v2.prediction_outputs(features, out)
    assert top["end_top_index"].shape == (3, 25) and top["cls_logits"].shape == (3,)
    assert np.array_equal(top["start_top_index"][:, 0],
                          np.argmax(out["start_log_probs"].numpy(), -1))
    # The end distribution depends on the (gold) start it is conditioned on.
    a = v2({**features, "start_positions": np.array([5, 5, 5])}, training=True)
    b = v2({**features, "start_positions": np.array([6, 6, 6])}, training=True)
    assert not np.allclose(a["end_log_probs"].numpy(), b["end_log_probs"].numpy())
    # A pretraining checkpoint (with its cls/ heads) initialises the encoder.
    pretrainer = AlbertPretrainer(tiny_config)
    pretrainer.save_pretrained(str(tmp_path / "pre"))
    loaded = AlbertSquad.from_pretrained(str(tmp_path / "pre"), version_2=False)
    word = "bert/embeddings/word_embeddings"
    assert np.array_equal(loaded.tf1_weights()[word].numpy(),
                          pretrainer.tf1_weights()[word].numpy())


def test_the_v2_span_head_is_v1_s_with_the_cls_span_for_no_answer(tiny_config):
    """--v2_head=span: v1's weights and logits; null_logits is the [CLS] span's score, and a
    question's null_odds is its windows' lowest less its best span's (BERT's score
    difference)."""
    from albert_tf.modeling.squad import V1_HEAD, AlbertSquad
    v1 = AlbertSquad(tiny_config, version_2=False, n_best_size=4)
    span = AlbertSquad(tiny_config, version_2=True, v2_head="span", n_best_size=4)
    assert span.head_names == V1_HEAD and span.keras_outputs() == v1.keras_outputs()
    span.set_weights(v1.get_weights())
    features = _model_inputs(np.random.RandomState(3))
    a, b = v1(features, training=False), span(features, training=False)
    for key in ("start_logits", "end_logits", "start_top_index", "end_top_logits"):
        np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
    np.testing.assert_allclose(b["null_logits"].numpy(),
                               a["start_logits"][:, 0] + a["end_logits"][:, 0], rtol=1e-6)
    top = {k: v.numpy() for k, v in span.prediction_outputs(features, b).items()}
    assert "null_logits" in top and "cls_logits" not in top
    # One question read in two windows of 3 tokens, the context's after [CLS].
    windows = {"lengths": np.array([3, 3]), "host_question": np.array([0, 0]),
               "host_start_char": np.array([-1, 0, 4, -1, 4, 8]),
               "host_end_char": np.array([-1, 2, 6, -1, 6, 10]),
               "host_max_context": np.array([0, 1, 1, 0, 0, 1])}
    outputs = {"start_top_index": np.array([[1, 2], [2, 1]]),
               "start_top_logits": np.array([[2.0, 1.0], [3.0, 0.5]]),
               "end_top_index": np.array([[2, 1], [2, 1]]),
               "end_top_logits": np.array([[1.5, 0.5], [2.0, 1.0]]),
               "null_logits": np.array([4.0, 6.0])}
    question = squad.Question("q", "which?", "abc def ghi", 0, [])
    predictions, _, null_odds = squad_answers.postprocess(
        [question], windows, outputs, 4, 5, True)
    # The best span: window 1's (2, 2), "ghi", 3.0 + 2.0; the lowest [CLS] score 4.0.
    assert predictions == {"q": "ghi"} and null_odds == {"q": pytest.approx(4.0 - 5.0)}
    with pytest.raises(ValueError, match="v2_head='beam': one of answer_class, span"):
        AlbertSquad(tiny_config, version_2=True, v2_head="beam")


def test_losses(tiny_config):
    from albert_tf.modeling.squad import AlbertSquad
    features = _model_inputs(np.random.RandomState(1))
    features.update(start_positions=np.array([5, 0, 6]), end_positions=np.array([7, 0, 6]),
                    is_impossible=np.array([0, 1, 0]))
    for version_2 in (False, True):
        model = AlbertSquad(tiny_config, version_2=version_2)
        out = model(features, training=True)
        per_example = model.per_example_loss(features, out).numpy()
        assert per_example.shape == (3,) and np.all(np.isfinite(per_example))
        sums = model.loss_sums({**features, "is_real_example": np.array([1, 1, 0], np.float32)},
                               out)
        assert float(sums["loss_sum"]) == pytest.approx(per_example[:2].sum(), rel=1e-5)
    # Untrained v1: about log(valid positions) per side.
    model = AlbertSquad(tiny_config, version_2=False)
    loss = model.per_example_loss(features, model(features, training=True)).numpy()
    assert loss[1] == pytest.approx(np.log(9), abs=0.5)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_heads_train_under_mixed_precision(tiny_config, policy):
    """Both heads run in float32 on the float32 sequence output under a mixed policy (they once
    failed with an einsum of float32 and bfloat16): finite losses and gradients, outputs
    float32, losses close to the float32 model's with the same weights."""
    import keras
    import tensorflow as tf

    from albert_tf.modeling.squad import AlbertSquad
    features = _model_inputs(np.random.RandomState(2))
    features.update(start_positions=np.array([5, 0, 6]), end_positions=np.array([7, 0, 6]),
                    is_impossible=np.array([0, 1, 0]))
    for version_2, head in ((False, "answer_class"), (True, "answer_class"), (True, "span")):
        reference = AlbertSquad(tiny_config, version_2=version_2, dropout_prob=0.0,
                                v2_head=head)
        keras.mixed_precision.set_global_policy(policy)
        try:
            model = AlbertSquad(tiny_config, version_2=version_2, dropout_prob=0.0,
                                v2_head=head)
            model.set_weights(reference.get_weights())
            with tf.GradientTape() as tape:
                out = model(features, training=True)
                loss = tf.reduce_mean(model.per_example_loss(features, out))
            grads = tape.gradient(loss, model.trainable_variables)
            inference = model(features, training=False)
        finally:
            keras.mixed_precision.set_global_policy("float32")
        assert all(v.dtype == tf.float32 for v in out.values() if v.dtype.is_floating)
        assert all(np.all(np.isfinite(tf.convert_to_tensor(g).numpy()))
                   for g in grads if g is not None)  # only the unused pooler has none
        head_grads = [g for v, g in zip(model.trainable_variables, grads)
                      if v.path.startswith("albert_squad/")]
        assert len(head_grads) == (11 if model.beam else 2), head
        assert all(g is not None for g in head_grads)
        expected = tf.reduce_mean(reference.per_example_loss(
            features, reference(features, training=True)))
        assert float(loss) == pytest.approx(float(expected), rel=0.03), (head, policy)
        assert inference["start_top_index"].shape[0] == 3


def test_trainer_leaves_the_unused_pooler_as_it_is(tiny_config, tmp_path, caplog):
    """No loss reaches the pooler under the span head: as the original's optimizers skip a
    variable without a gradient, it keeps its weights (no weight decay; LAMB's trust ratio
    would otherwise shrink it by the learning rate each step), and keeps its slots, so
    checkpoints hold the same variables as before."""
    import tensorflow as tf
    from albert_tf import create_optimizer
    from albert_tf.modeling.squad import AlbertSquad
    from albert_tf.training.trainer import Trainer
    from albert_tf.training.trainer_options import TrainerOptions
    batch = dict(_model_inputs(np.random.RandomState(0), batch=4),
                 start_positions=np.array([4, 5, 6, 7]), end_positions=np.array([5, 6, 7, 8]))
    trainer = Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"),
                      lambda: AlbertSquad(tiny_config, dropout_prob=0.0),
                      lambda: create_optimizer(0.1, 10, 0, "lamb"), str(tmp_path),
                      TrainerOptions(global_batch_size=4, save_checkpoints_steps=3, log_steps=3))
    before = {k: v.numpy() for k, v in trainer.model.tf1_weights().items()}
    with caplog.at_level(logging.INFO, logger="absl"):
        trainer.train(lambda ctx: tf.data.Dataset.from_tensors(batch).repeat(), 3)
    after = {k: v.numpy() for k, v in trainer.model.tf1_weights().items()}
    pooler = {k for k in before if "/pooler/" in k}
    assert pooler == {"bert/pooler/dense/kernel", "bert/pooler/dense/bias"}
    for name in before:
        assert np.array_equal(after[name], before[name]) == (name in pooler), name
    assert "No loss reaches pooler/kernel, pooler/bias: not updated" in caplog.text
    optimizer, variables = trainer.optimizer, trainer.model.trainable_variables
    for variable in variables:
        if "pooler" in variable.path:
            i = optimizer._get_variable_index(variable)
            assert not optimizer._m[i].numpy().any() and not optimizer._v[i].numpy().any()
    saved = tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path)))
    slots = [n for n, _ in saved if n.startswith("optimizer/_variables/")]
    assert len(slots) == 2 * len(variables) == len(optimizer.variables) - 1  # and the step
