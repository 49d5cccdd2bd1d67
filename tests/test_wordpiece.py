"""WordPiece (the Chinese releases): tokens and ids against the original tokenizer, the
original module's API, vocabulary formats, offsets, and the in-graph twin."""

import random
import unicodedata

import pytest

from albert_tf import tokenization
from albert_tf.tokenization.characters import unicode_tables
import zh_release

WORDS = ["learning", "deep", "tensorflow", "unaffable", "Café", "naïve", "ΣΟΦΟΣ", "İstanbul"]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return zh_release.write_vocab(tmp_path_factory.mktemp("wp") / "vocab_chinese.txt")


@pytest.fixture(scope="module")
def original():
    """The original tokenization module (PyPI albert-tensorflow 1.1), its TF1 file API mapped
    to tf.compat.v1."""
    import tensorflow as tf
    from albert import tokenization as module  # noqa: imports TensorFlow
    module.tf = tf.compat.v1
    return module


def _fuzz_pool():
    """Characters of every class the basic tokenizer treats apart."""
    rng = random.Random(0)
    pool = list("abcXYZ019 ,.!?-'\"") + list(zh_release.CHARS[:40]) + list(zh_release.PUNCT)
    pool += ["\t", "\n", "\r", "\x00", "\x07", "\x1c", "\x85", "\ufffd", "\u200b", "\u200d",
             "\u00a0", "\u3000", "\u2028", "\u2029", "\u202f", "\u0301", "\u0308", "\u1fef",
             "\u037e", "ＡＢ", "１", "％", "😀", "👍🏽", "★", "é", "Ü", "ß", "ﬁ", "İ", "Σ", "ς",
             "ǅ", "²", "Ⅻ", "\U00020000", "\U0002F800", "\uf900", "ㄱ", "か", "ไ", "ـ", "،"]
    pool += [chr(rng.randrange(0x20, 0x30000)) for _ in range(200)]
    return [c for c in pool if not 0xD800 <= ord(c[0]) <= 0xDFFF]


def _texts(n=600, seed=1):
    rng = random.Random(seed)
    pool = _fuzz_pool()
    texts = list(zh_release.TRICKY) + zh_release.sentences(50, seed)
    for _ in range(n):
        k = rng.randint(1, 30)
        texts.append("".join(rng.choice(pool) if rng.random() < 0.7 else
                             rng.choice(WORDS) + " " for _ in range(k)))
    return texts


@pytest.mark.parametrize("lower", [True, False])
def test_tokens_and_ids_match_the_original(vocab_file, original, lower):
    ours = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
    theirs = original.FullTokenizer(vocab_file, do_lower_case=lower)
    assert ours.kind == tokenization.WORDPIECE and ours.vocab == theirs.vocab
    for text in _texts():
        expected = theirs.tokenize(text)
        assert ours.tokenize(text) == expected, repr(text)
        assert ours.encode(text) == theirs.convert_tokens_to_ids(expected), repr(text)
        assert ours.basic_tokenizer.tokenize(text) == theirs.basic_tokenizer.tokenize(text)
    assert ours.tokenize("我爱ALBERT大学！") == (
        ["我", "爱", "albert", "大", "学", "！"] if lower else
        ["我", "爱", "[UNK]", "大", "学", "！"])
    assert ours.tokenize("learning tokens") == ["learn", "##ing", "token", "##s"]


def test_original_api(vocab_file, original):
    positional = tokenization.FullTokenizer(vocab_file, False)
    keyword = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=False,
                                         spm_model_file=None)
    assert positional.tokenize("Deep 学生") == keyword.tokenize("Deep 学生") == ["[UNK]", "学",
                                                                                "生"]
    assert keyword.convert_ids_to_tokens(keyword.convert_tokens_to_ids(["我", "##s"])) == [
        "我", "##s"]
    vocab = tokenization.load_vocab(vocab_file)
    assert vocab == original.load_vocab(vocab_file)
    inv = {i: t for t, i in vocab.items()}
    assert tokenization.convert_tokens_to_ids(vocab, ["[CLS]", "我"]) == [vocab["[CLS]"],
                                                                          vocab["我"]]
    assert tokenization.convert_ids_to_tokens(inv, [4, 5]) == ["[CLS]", "[SEP]"]
    assert tokenization.convert_to_unicode(b"\xe4\xb8\xad\xff") == "中"
    assert tokenization.printable_text("中") == "中"
    assert tokenization.whitespace_tokenize(" a\u3000b \n") == ["a", "b"]
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    assert basic.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you",
                                                            "?"]
    wordpiece = tokenization.WordpieceTokenizer(
        {t: i for i, t in enumerate(["[UNK]", "un", "##aff", "##able", "runn", "##ing"])})
    assert wordpiece.tokenize("unaffable running unwanted") == [
        "un", "##aff", "##able", "runn", "##ing", "[UNK]"]
    assert tokenization.WordpieceTokenizer({"a": 0}, max_input_chars_per_word=3).tokenize(
        "aaaa aaa") == ["[UNK]", "[UNK]"]


def test_vocabulary_formats(tmp_path, original):
    counted = zh_release.write_vocab(tmp_path / "counted.txt", with_counts=True)
    plain = zh_release.write_vocab(tmp_path / "plain.txt")
    assert tokenization.load_vocab(counted) == tokenization.load_vocab(plain) == (
        original.load_vocab(counted))
    odd = tmp_path / "odd.txt"
    odd.write_bytes("[PAD]\r\n[UNK] 7\n中\n中\n \n\u3000\nlast".encode())
    # A repeated token takes no new id; a whitespace-only line is " " (the original since PR #118).
    assert list(tokenization.load_vocab(str(odd)).items()) == [
        ("[PAD]", 0), ("[UNK]", 1), ("中", 2), (" ", 3), ("last", 4)]
    (tmp_path / "binary.txt").write_bytes(b"\x0a\x0b\xff\xfe")
    with pytest.raises(ValueError, match="not a WordPiece vocabulary"):
        tokenization.load_vocab(str(tmp_path / "binary.txt"))
    with pytest.raises(FileNotFoundError, match="WordPiece vocabulary not found"):
        tokenization.FullTokenizer(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match=r"lacks \[CLS\], \[SEP\], \[MASK\]"):
        (tmp_path / "small.txt").write_text("[PAD]\n[UNK]\n中\n")
        tokenization.FullTokenizer(str(tmp_path / "small.txt")).special_ids()
    with pytest.raises(ValueError, match="needs a vocab_file"):
        tokenization.FullTokenizer()


def test_special_ids_and_word_starts(vocab_file):
    tokenizer = tokenization.FullTokenizer(vocab_file)
    assert tokenizer.special_ids() == {"<pad>": 0, "<unk>": 3, "[CLS]": 4, "[SEP]": 5,
                                       "[MASK]": 6}
    assert len(tokenizer) == len(zh_release.vocab_tokens())
    table = tokenizer.start_table
    for token in ("我", "[CLS]", "learn", "##ing", "##我", "，"):
        assert table[tokenizer.vocab[token]] == (not token.startswith("##")), token


@pytest.mark.parametrize("lower", [True, False])
def test_offsets_give_the_pieces_and_their_characters(vocab_file, lower):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
    for text in _texts(300, seed=5):
        pieces, starts, ends = tokenizer.tokenize_with_offsets(text)
        assert pieces == tokenizer.tokenize(text), repr(text)
        assert all(0 <= s <= e < len(text) for s, e in zip(starts, ends))
        assert starts == sorted(starts)
        for piece, s, e in zip(pieces, starts, ends):
            if piece == "[UNK]":
                continue
            surface = tokenizer.basic_tokenizer.normalize(text[s:e + 1]).replace(" ", "")
            assert piece.removeprefix("##") in surface, (text, piece, text[s:e + 1])
    text = "ALBERT大学，learning！"
    pieces, starts, ends = tokenizer.tokenize_with_offsets(text)
    spans = [text[s:e + 1] for s, e in zip(starts, ends)]
    if lower:
        assert list(zip(pieces, spans)) == [
            ("albert", "ALBERT"), ("大", "大"), ("学", "学"), ("，", "，"), ("learn", "learn"),
            ("##ing", "ing"), ("！", "！")]
    assert tokenizer.tokenize_with_offsets("Café 中")[1:] == ([0, 5], [3, 5])


def test_basic_tokenizer_tables_follow_the_original_rules(original):
    """Every code point's class (dropped, whitespace, punctuation, CJK) as the original's, and
    the SentencePiece preprocessing's (split whitespace, combining marks) as Python's."""
    t = unicode_tables()
    basic = original.BasicTokenizer()
    dropped, spaces, punct = set(t["dropped"]), set(t["spaces"]), set(t["punct"])
    cjk, split, combining = set(t["cjk"]), set(t["split_spaces"]), set(t["combining"])
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        c = chr(code)
        assert (c in dropped) == (code in (0, 0xFFFD) or original._is_control(c)), hex(code)
        assert (c in spaces) == original._is_whitespace(c), hex(code)
        assert (c in punct) == original._is_punctuation(c), hex(code)
        assert (c in cjk) == basic._is_chinese_char(code), hex(code)
        assert (c in split) == c.isspace() and (c in combining) == bool(
            unicodedata.combining(c)), hex(code)
        if c not in cjk:  # the tokenizer splits CJK after normalizing: none may appear there
            assert cjk.isdisjoint(unicodedata.normalize("NFD", c.lower())), hex(code)
    assert all(unicodedata.category(c) == "Mn" for c in t["marks"])


def test_in_graph_tokenizer_matches_full_tokenizer(vocab_file, tmp_path):
    import tensorflow as tf

    texts = [t for t in _texts(400, seed=7)]
    for lower in (True, False):
        full = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
        graph = tokenization.in_graph_tokenizer(vocab_file, do_lower_case=lower)
        assert isinstance(graph, tokenization.InGraphWordpieceTokenizer)
        got = graph.tokenize(tf.constant(texts))
        assert got.dtype == tf.int32
        for text, ids in zip(texts, got.to_list()):
            assert ids == full.encode(text), repr(text)
    assert (graph.pad_id, graph.unk_id, graph.cls_id, graph.sep_id, graph.mask_id) == (
        0, 3, 4, 5, 6)
    long_word = "a" * 201
    assert graph.tokenize(tf.constant([long_word + " 我"])).to_list() == [[3, full.vocab["我"]]]

    module = tf.Module()
    module.tokenizer = graph
    module.ids = tf.function(lambda s: module.tokenizer.tokenize(s).to_tensor(-1),
                             input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    sample = zh_release.TRICKY[:4]
    got = loaded.ids(tf.constant(sample)).numpy().tolist()
    assert [[i for i in row if i >= 0] for row in got] == [full.encode(t) for t in sample]


def test_repeated_vocabulary_lines_keep_the_original_ids_and_warn(tmp_path, caplog):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n中\n国\n中\n人\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        vocab = tokenization.load_vocab(str(path))
    assert vocab["人"] == 7 and len(vocab) == 8  # the original's ids: a repeat takes none
    assert "repeats 1 tokens (first '中', line 8)" in caplog.text
