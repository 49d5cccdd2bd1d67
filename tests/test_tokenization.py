"""Tokenization: preprocessing, pieces and ids against the original tokenizer, in-graph parity."""

import random

import numpy as np
import pytest
import sentencepiece as spm

from albert_tf import tokenization
from albert_tf.data.vocab import USER_DEFINED_SYMBOLS, train_sentencepiece

WORDS = ("the cat sat on a mat and it cost about dollars in total when we paid Café naïve "
         "résumé Über façade coöperate jalapeño déjà vu").split()
NUMBERS = ["3.0,", "12,", "2.5,", "1,", "4.0,", "1999", "7.5"]

TRICKY = [
    "It cost 3.0, and 12, or 1, then 2.5,x",
    "  Café\u00a0 naïve \t résumé\u3000ÜBER  ",
    "ﬁne ligatures: ﬂow, Ⅻ, ²3, x²,",
    "a0, b12, 3,4,5, 6.0,7.0,",
    "Ελληνικά ΣΟΦΙΑ και İstanbul",
    "emoji 😀 and 中文 text, 5,",
    "quotes “like” this — and ‘that’ … ok",
    "",
    "   ",
    "line\nbreak\r\nand\ttabs",
    "DÉJÀ VU, 4.0, Jalapeño!",
]


def _corpus_lines(n=3000, seed=0):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        w = rng.choices(WORDS, k=8)
        w.insert(rng.randint(0, 8), rng.choice(NUMBERS))
        lines.append(" ".join(w))
    return lines


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("spm")
    text = d / "corpus.txt"
    text.write_text("\n".join(_corpus_lines()), encoding="utf-8")
    return train_sentencepiece(str(text), str(d / "tiny"), 200, do_lower_case=True,
                               hard_vocab_limit=False)


@pytest.fixture(scope="module")
def tokenizer(model_path):
    return tokenization.FullTokenizer(model_path, do_lower_case=True)


def test_special_ids_and_user_symbols(tokenizer):
    ids = tokenizer.special_ids()
    assert ids == {"<pad>": 0, "<unk>": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    assert tokenizer.convert_ids_to_tokens(range(5, 5 + len(USER_DEFINED_SYMBOLS))) == list(
        USER_DEFINED_SYMBOLS)
    assert tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", "[MASK]", "no-such-piece"]) == [
        2, 3, 4, 1]


def test_preprocess_text():
    pre = tokenization.preprocess_text
    assert pre("  Héllo\t\u00a0Wörld \n", lower=True) == "hello world"
    assert pre("  Héllo  Wörld ", lower=False) == "Hello World"
    assert pre("ﬁ ²", lower=False) == "fi 2"  # NFKD compatibility decomposition
    # NFKD splits off the dot of İ before lowercasing; final sigma lowercases to ς.
    assert pre("İSTANBUL ΣΟΦΟΣ", lower=True) == "istanbul σοφος"
    assert pre(b"caf\xc3\xa9", lower=True) == "cafe"
    assert pre("a  b", remove_space=False) == "a  b"


def test_digit_comma_rule(tokenizer):
    sp = tokenizer.sp_model
    raw = sp.encode_as_pieces("it cost 12, or 3.0,")
    assert any(len(p) > 1 and p.endswith(",") and p[-2].isdigit() for p in raw), raw
    pieces = tokenizer.tokenize("It cost 12, or 3.0,")
    assert not any(len(p) > 1 and p.endswith(",") and p[-2].isdigit() for p in pieces)
    assert pieces.count(",") == 2
    assert "".join(pieces).replace("\u2581", "") == "itcost12,or3.0,"
    assert tokenizer.encode("It cost 12, or 3.0,") == tokenizer.convert_tokens_to_ids(pieces)


@pytest.mark.parametrize("piece,start", [
    ("\u2581the", True), ("ing", False), ("Ing", False), (",", True), ("'s", True),
    ("s", False), ("12", True), ("x1", True), ("<unk>", True), ("ing.", False),
    ("\u00e9t\u00e9", True), ("[MASK]", False),
])
def test_start_piece_rule(piece, start):
    assert tokenization.is_start_piece(piece) is start


def _original():
    """The original tokenizer (PyPI albert-tensorflow 1.1, the 2019 copy of the repository)."""
    from albert import tokenization as original  # noqa: imports TensorFlow
    return original


def _as_str(piece):
    return piece.decode("utf-8") if isinstance(piece, bytes) else piece


def test_pieces_match_original_tokenizer(tokenizer, model_path):
    original = _original()
    sp = spm.SentencePieceProcessor(model_file=model_path)
    rng = random.Random(1)
    texts = TRICKY + [" ".join(rng.choices(WORDS + NUMBERS + TRICKY, k=12)) for _ in range(300)]
    for lower in (True, False):
        ours = tokenization.FullTokenizer(model_path, do_lower_case=lower)
        for text in texts:
            pre = original.preprocess_text(text, lower=lower)
            assert tokenization.preprocess_text(text, lower=lower) == pre
            expected = [_as_str(p) for p in original.encode_pieces(sp, pre)]
            assert ours.tokenize(text) == expected, text
            assert ours.encode(text) == original.encode_ids(sp, pre), text


def test_fast_encoder_matches_encode_ids(tokenizer):
    encoder = tokenization.FastEncoder(tokenizer.sp_model)
    lines = [tokenization.preprocess_text(t, lower=True) for t in TRICKY + _corpus_lines(200, 2)]
    got = encoder.encode_lines(lines)
    assert got == [tokenization.encode_ids(tokenizer.sp_model, t) for t in lines]
    assert encoder.split_table, "the tiny model must have digit-comma pieces"
    pieces = [tokenizer.sp_model.id_to_piece(i) for i in range(len(tokenizer))]
    assert encoder.start_table.tolist() == [tokenization.is_start_piece(p) for p in pieces]


def test_in_graph_tokenizer_matches_full_tokenizer(model_path, tokenizer):
    import tensorflow as tf

    rng = random.Random(3)
    texts = TRICKY + [" ".join(rng.choices(WORDS + NUMBERS + TRICKY, k=10)) for _ in range(100)]
    for lower in (True, False):
        full = tokenization.FullTokenizer(model_path, do_lower_case=lower)
        graph = tokenization.InGraphTokenizer(model_path, do_lower_case=lower)
        got = graph.tokenize(tf.constant(texts))
        assert isinstance(got, tf.RaggedTensor) and got.dtype == tf.int32
        assert got.to_list() == [full.encode(t) for t in texts]

    with open(model_path, "rb") as f:
        graph = tokenization.InGraphTokenizer(f.read())
    assert (graph.pad_id, graph.unk_id, graph.cls_id, graph.sep_id, graph.mask_id) == (
        0, 1, 2, 3, 4)
    fn = tf.function(graph.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert fn(tf.constant(["It cost 3.0, ok"])).to_list() == [
        tokenizer.encode("It cost 3.0, ok")]


def test_model_without_special_pieces_is_rejected(tmp_path):
    text = tmp_path / "c.txt"
    text.write_text("\n".join(_corpus_lines(500)), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "plain"),
                                   vocab_size=100, hard_vocab_limit=False, minloglevel=2)
    with pytest.raises(ValueError, match=r"lacks the special pieces <pad>, \[CLS\], \[SEP\], "
                                         r"\[MASK\]"):
        tokenization.FullTokenizer(str(tmp_path / "plain.model")).special_ids()
    with pytest.raises(ValueError, match="lacks the special pieces"):
        tokenization.InGraphTokenizer(str(tmp_path / "plain.model"))
    with pytest.raises(FileNotFoundError, match="not found"):
        tokenization.FullTokenizer(str(tmp_path / "missing.model"))


def test_train_vocab_settings(model_path):
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto()
    with open(model_path, "rb") as f:
        proto.ParseFromString(f.read())
    spec = proto.trainer_spec
    assert spec.model_type == model_pb2.TrainerSpec.UNIGRAM
    assert (spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id) == (0, 1, -1, -1)
    assert list(spec.control_symbols) == ["[CLS]", "[SEP]", "[MASK]"]
    assert list(spec.user_defined_symbols) == list(USER_DEFINED_SYMBOLS)
    assert spec.character_coverage == pytest.approx(0.99995)
    assert spec.shuffle_input_sentence
    assert np.all([p.piece == p.piece.lower() for p in proto.pieces if p.type == 1])


def test_train_vocab_reads_a_repeated_line_once(tmp_path, caplog):
    """Each distinct (preprocessed) line once: the vocabulary of the corpus without its copies,
    piece for piece and score for score, said in the log; --keep_duplicate_lines counts every
    copy (other scores)."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    def pieces(path):
        proto = model_pb2.ModelProto()
        with open(path, "rb") as f:
            proto.ParseFromString(f.read())
        return [(p.piece, round(p.score, 4)) for p in proto.pieces]
    lines = _corpus_lines(400)
    (tmp_path / "once.txt").write_text("\n".join(lines), encoding="utf-8")
    # Each line 3 times, the copies differing in case and spacing only (preprocessed alike).
    (tmp_path / "thrice.txt").write_text("\n".join(
        lines + [line.upper() for line in lines] + [f"  {line}\t" for line in lines]),
        encoding="utf-8")
    caplog.set_level("INFO", logger="absl")
    once = train_sentencepiece(str(tmp_path / "once.txt"), str(tmp_path / "once"), 120,
                               hard_vocab_limit=False)
    assert "repeated lines read once" not in caplog.text
    thrice = train_sentencepiece(str(tmp_path / "thrice.txt"), str(tmp_path / "thrice"), 120,
                                 hard_vocab_limit=False)
    assert pieces(thrice) == pieces(once)
    assert ("Trained on 400 distinct lines of 1200: 800 repeated lines read once "
            "(--keep_duplicate_lines counts every copy)") in caplog.text
    every = train_sentencepiece(str(tmp_path / "thrice.txt"), str(tmp_path / "every"), 120,
                                hard_vocab_limit=False, keep_duplicate_lines=True)
    assert pieces(every) != pieces(once)


def test_train_vocab_learns_from_long_lines_and_says_which_it_left_out(tmp_path, caplog):
    """Lines of a paragraph (past SentencePiece's 4,192-byte default, which dropped them without
    a word) are learnt from; those past MAX_LINE_BYTES are counted in a warning."""
    from albert_tf.data.vocab import MAX_LINE_BYTES
    rng = np.random.RandomState(0)
    characters = [chr(c) for c in range(0x4E00, 0x4E00 + 300)]
    paragraph = lambda n: "".join(rng.choice(characters, n))  # noqa: E731
    # 60 lines of 2,000 characters (6,000 bytes), one short line and two past the limit.
    lines = [paragraph(2000) for _ in range(60)] + ["一二三"]
    lines += [paragraph(MAX_LINE_BYTES // 3 + 10) for _ in range(2)]
    (tmp_path / "long.txt").write_text("\n".join(lines), encoding="utf-8")
    caplog.set_level("INFO", logger="absl")
    import sentencepiece
    path = train_sentencepiece(str(tmp_path / "long.txt"), str(tmp_path / "long"), 400,
                               hard_vocab_limit=False)
    assert sentencepiece.SentencePieceProcessor(model_file=path).get_piece_size() == 400
    assert (f"2 lines longer than {MAX_LINE_BYTES} bytes were left out of training "
            f"(SentencePiece's max_sentence_length): split them into sentences") in caplog.text


def test_in_graph_tokenizer_in_a_saved_model(model_path, tokenizer, tmp_path):
    import tensorflow as tf

    module = tf.Module()
    module.tokenizer = tokenization.InGraphTokenizer(model_path)
    module.ids = tf.function(lambda s: module.tokenizer.tokenize(s).to_tensor(-1),
                             input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    texts = ["It cost 3.0, ok", "Café naïve 12,"]
    got = loaded.ids(tf.constant(texts)).numpy().tolist()
    assert [[i for i in row if i >= 0] for row in got] == [tokenizer.encode(t) for t in texts]


def test_hugging_face_tokenizer_files(model_path, tmp_path):
    """spiece.model + tokenizer_config.json: transformers' AutoTokenizer gives our ids, except
    where the original's digit-comma rule splits a piece (transformers does not apply it)."""
    import re

    import transformers

    from albert_tf.formats.hf import write_hf_tokenizer

    for lower in (True, False):
        ours = tokenization.FullTokenizer(model_path, do_lower_case=lower)
        out = tmp_path / f"hf-{lower}"
        out.mkdir()
        write_hf_tokenizer(ours, str(out), 128)
        theirs = transformers.AutoTokenizer.from_pretrained(str(out))
        rng = random.Random(4)
        texts = [t for t in TRICKY + [" ".join(rng.choices(WORDS, k=10)) for _ in range(50)]
                 if not re.search(r"\d,", t)]
        for text in texts:
            assert theirs(text, add_special_tokens=False)["input_ids"] == ours.encode(text), text
        assert theirs("the cat")["input_ids"] == [2] + ours.encode("the cat") + [3]
        # A pair: its second segment is segment 1, as the model was trained (transformers 5
        # gives no token_type_ids unless the config names them).
        pair = theirs("the cat", "a mat")
        assert pair["token_type_ids"] == [0] * (len(ours.encode("the cat")) + 2) + [1] * (
            len(ours.encode("a mat")) + 1)
        assert theirs.tokenize("cost 12,") != ours.tokenize("cost 12,")


def test_a_casing_other_than_the_model_s_is_warned(model_path, tmp_path, caplog):
    """--nodo_lower_case on a model that reads lower-cased text (its tokenizer_config.json), or
    on a vocabulary with no capital letter, names the mismatch; the model's own casing, or a
    cased vocabulary read cased, does not."""
    import shutil

    from albert_tf.formats.tokenizers import load_tokenizer
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(model_path, model / "spm.model")
    (model / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    corpus = tmp_path / "cased.txt"
    corpus.write_text("\n".join(line.title() for line in _corpus_lines(500)), encoding="utf-8")
    cased = train_sentencepiece(str(corpus), str(tmp_path / "cased"), 200, do_lower_case=False,
                                hard_vocab_limit=False)
    for kwargs, warned in ((dict(model=model, do_lower_case=False), 2),
                           (dict(model=model), 0), (dict(model=model, do_lower_case=True), 0),
                           (dict(spm_model_file=model_path, do_lower_case=False), 1),
                           (dict(spm_model_file=cased, do_lower_case=False), 0)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="absl"):
            load_tokenizer(**kwargs)
        expected = [f"--do_lower_case=False, but the model in {model} reads text with "
                    f"do_lower_case=True: its vocabulary meets text cased otherwise than in its "
                    f"training (drop the flag to take the model's)"][:warned - 1] + [
            f"do_lower_case=False, but the vocabulary "
            f"{model / 'spm.model' if 'model' in kwargs else model_path} has no upper-case "
            f"piece: an uncased vocabulary, in which capital letters are unknown pieces (give "
            f"--do_lower_case)"][:warned]
        assert caplog.messages == expected, kwargs


def test_a_listing_beside_from_tf_hub_is_not_read(model_path):
    """--spm_model_file=from_tf_hub (the original README's hub route) with run_glue.sh's
    --vocab_file=30k-clean.vocab: the module's model serves, the listing is not read; alone,
    the listing is refused naming the model."""
    from albert_tf.tokenization import vocabulary_file
    listing = model_path[:-len(".model")] + ".vocab"
    assert vocabulary_file("from_tf_hub", listing) is None
    assert vocabulary_file(model_path, listing) == model_path
    with pytest.raises(ValueError, match=r"is a SentencePiece vocabulary listing, not a "
                                         r"WordPiece vocabulary: pass the model"):
        vocabulary_file(None, listing)
