"""ALBERT tokenization, both kinds the original shipped, and their in-graph twins.

SentencePiece (`spm_model_file`, the English releases) and WordPiece (`vocab_file`, the Chinese
releases and BERT-style vocabularies). `FullTokenizer` gives the same tokens and ids as the
original `tokenization.py` on any text; `in_graph_tokenizer` gives the same ids inside a
TensorFlow graph (tensorflow-text).
"""

import collections
import functools
import hashlib
import os
import re
import unicodedata

import numpy as np
import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_PIECES = (PAD, UNK, CLS, SEP, MASK)
# The same roles in a WordPiece vocabulary; special_ids() keys both kinds by SPECIAL_PIECES.
WORDPIECE_SPECIALS = {PAD: "[PAD]", UNK: "[UNK]", CLS: "[CLS]", SEP: "[SEP]", MASK: "[MASK]"}
SENTENCEPIECE, WORDPIECE = "sentencepiece", "wordpiece"

# The original start-piece rule treats these single characters as word starts. Note: no "'".
_START_PUNCT = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_LETTERS_AND_PUNCT = frozenset("abcdefghijklmnopqrstuvwxyz") | _START_PUNCT


def preprocess_text(text, remove_space=True, lower=False):
    """Collapses whitespace, applies NFKD, strips combining marks and optionally lowercases."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if remove_space:
        text = " ".join(text.strip().split())
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        if not text.isascii():
            text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    return text


def _needs_comma_split(piece):
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _comma_split(sp_model, piece):
    """The digit-comma rule: "▁3.0," becomes the pieces of "3.0" followed by ","."""
    # The original meant to drop a spurious leading "▁" here, but under Python 3 its
    # check compares str with bytes and never fires; we keep that behaviour.
    return sp_model.encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, "")) + [piece[-1]]


def encode_pieces(sp_model, text):
    """SentencePiece pieces of already preprocessed `text`, with the digit-comma rule."""
    pieces = []
    for piece in sp_model.encode_as_pieces(text):
        if _needs_comma_split(piece):
            pieces.extend(_comma_split(sp_model, piece))
        else:
            pieces.append(piece)
    return pieces


def encode_ids(sp_model, text):
    """Ids of `encode_pieces(sp_model, text)`."""
    return [sp_model.piece_to_id(p) for p in encode_pieces(sp_model, text)]


def is_start_piece(piece):
    """The original SentencePiece word-start rule used for whole-word masking."""
    return (piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<") or piece in _START_PUNCT
            or not all(c.lower() in _LETTERS_AND_PUNCT for c in piece))


def load_sp_model(model):
    """A SentencePieceProcessor from a file path or a serialized model proto."""
    if isinstance(model, spm.SentencePieceProcessor):
        return model
    if isinstance(model, (bytes, bytearray)):
        return spm.SentencePieceProcessor(model_proto=bytes(model))
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"SentencePiece model not found: {path}")
    try:
        return spm.SentencePieceProcessor(model_file=path)
    except (RuntimeError, OSError) as e:
        raise ValueError(f"{path} is not a SentencePiece model: {e}") from None


def special_ids(sp_model, name="the SentencePiece model"):
    """Ids of <pad>, <unk>, [CLS], [SEP], [MASK]; a clear error when a piece is missing."""
    ids, missing = {}, []
    for piece in SPECIAL_PIECES:
        i = sp_model.piece_to_id(piece)
        if sp_model.id_to_piece(i) != piece:
            missing.append(piece)
        ids[piece] = i
    if missing:
        raise ValueError(
            f"{name} lacks the special pieces {', '.join(missing)}; ALBERT needs <pad>, <unk>, "
            "[CLS], [SEP] and [MASK]. Train one with `python -m albert_tf.train_vocab`.")
    return ids


# ----------------------------------------------------------------------------------------
# WordPiece: the original BasicTokenizer + WordpieceTokenizer, by tables and regular expressions


def convert_to_unicode(text):
    """`text` as str (bytes are decoded as UTF-8, undecodable bytes dropped, as the original)."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "ignore")
    raise ValueError(f"Unsupported string type: {type(text)}")


printable_text = convert_to_unicode


def _read_text(path):
    path = os.fspath(path)
    if "://" in path:  # a bucket: TensorFlow's file system, imported only for remote paths
        import tensorflow as tf
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"WordPiece vocabulary not found: {path}")
    with open(path, "rb") as f:
        return f.read()


def load_vocab(vocab_file):
    """{token: id} of a WordPiece vocabulary, as the original reads it.

    One entry per line, `token` or `token count`: the first field is the token. A repeated
    token keeps its first id and takes no new one; a whitespace-only line is the token " ".
    """
    raw = _read_text(vocab_file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{vocab_file} is not a WordPiece vocabulary (UTF-8 text, one token "
                         f"per line); a SentencePiece model goes in --spm_model_file") from None
    vocab = collections.OrderedDict()
    for line in text.splitlines(keepends=True):
        token = line.strip().split()[0] if line.strip() else " "
        if token not in vocab:
            vocab[token] = len(vocab)
    if not vocab:
        raise ValueError(f"WordPiece vocabulary {vocab_file} is empty")
    return vocab


def convert_by_vocab(vocab, items):
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    return text.split()


CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


# Planes 4-13 are unassigned and 15-16 private use: no character there is in any class below.
_ASSIGNED_PLANES = (range(0x0, 0x40000), range(0xE0000, 0xF0000))


@functools.lru_cache(maxsize=None)
def _unicode_tables():
    """The character classes the tokenizers need, over Unicode (this Python's database), in one
    pass: WordPiece's dropped and whitespace characters, CJK, punctuation and nonspacing marks
    (the original BasicTokenizer's rules); `str.split`'s whitespace; the combining marks that
    `preprocess_text` drops (SentencePiece)."""
    t = {k: [] for k in ("dropped", "spaces", "punct", "marks", "split_spaces", "combining")}
    for block in _ASSIGNED_PLANES:
        for code in block:
            if 0xD800 <= code <= 0xDFFF:
                continue
            c = chr(code)
            category = unicodedata.category(c)
            if category == "Cn":
                continue
            if code == 0 or code == 0xFFFD or (
                    category in ("Cc", "Cf") and c not in "\t\n\r"):
                t["dropped"].append(c)
            if c in " \t\n\r" or category == "Zs":
                t["spaces"].append(c)
            if category[0] == "P" or (c.isascii() and c.isprintable() and not c.isalnum()
                                      and c != " "):
                t["punct"].append(c)
            if category == "Mn":
                t["marks"].append(c)
            if category[0] == "M" and unicodedata.combining(c):
                t["combining"].append(c)
            if c.isspace():
                t["split_spaces"].append(c)
    t["cjk"] = [chr(c) for a, b in CJK_RANGES for c in range(a, b + 1)]
    return t


class _WordpieceRegexes:
    """Compiled forms of `_unicode_tables()`: translate tables and Python regexes."""

    def __init__(self):
        t = _unicode_tables()
        self.clean = {ord(c): None for c in t["dropped"]}
        self.clean.update({ord(c): " " for c in t["spaces"]})
        self.strip_marks = {ord(c): None for c in t["marks"]}
        punct, cjk = _py_class(t["punct"]), _py_class(t["cjk"])
        self.cjk = re.compile(cjk)
        space = _py_class(t["split_spaces"])
        # Each CJK character and each punctuation character a token, whitespace between the
        # rest: the original's spaces around CJK, whitespace split and punctuation split at
        # once (no normalization turns another character into a CJK one; a test checks).
        self.words = re.compile(f"{punct}|{cjk}|[^{punct[1:-1]}{cjk[1:-1]}{space[1:-1]}]+")
        self.is_punct = set(t["punct"])


def _ranges(codepoints):
    """(first, last) runs of consecutive code points, from sorted code points."""
    ranges, start, prev = [], None, None
    for c in codepoints:
        if start is None:
            start = prev = c
        elif c == prev + 1:
            prev = c
        else:
            ranges.append((start, prev))
            start = prev = c
    if start is not None:
        ranges.append((start, prev))
    return ranges


def _py_class(chars):
    """A Python regex character class matching exactly `chars` (sorted)."""
    parts = [re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
             for a, b in _ranges(map(ord, chars))]
    return "[" + "".join(parts) + "]"


def _char_class(codepoints):
    """An RE2 character class matching the given sorted code points."""
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
             for a, b in _ranges(codepoints)]
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def _wordpiece_regexes():
    return _WordpieceRegexes()


class BasicTokenizer:
    """The original BERT basic tokenizer: drops control characters, splits off each CJK
    character and each punctuation character, splits on whitespace, and with `do_lower_case`
    lowercases and strips accents (NFD without nonspacing marks)."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def normalize(self, text):
        """The cleaned, CJK-spaced, maybe lowercased text that `tokenize` splits."""
        r = _wordpiece_regexes()
        text = convert_to_unicode(text).translate(r.clean)
        if not text.isascii():
            text = r.cjk.sub(r" \g<0> ", text)
        return self._fold(text)

    def _fold(self, text):
        if self.do_lower_case:
            text = text.lower()
            if not text.isascii():
                text = unicodedata.normalize("NFD", text).translate(
                    _wordpiece_regexes().strip_marks)
        return text

    def tokenize(self, text):
        r = _wordpiece_regexes()
        return r.words.findall(self._fold(convert_to_unicode(text).translate(r.clean)))

    def tokenize_with_offsets(self, text):
        """(tokens, first character, last character): each token of `tokenize(text)` with the
        inclusive span of `text` it came from."""
        r = _wordpiece_regexes()
        text = convert_to_unicode(text)
        cjk = r.cjk
        raw_words, word = [], []
        for i, c in enumerate(text):  # clean + CJK split + whitespace split, keeping indices
            kept = c.translate(r.clean)
            if not kept:  # a dropped character joins its neighbours
                continue
            if kept.isspace():
                if word:
                    raw_words.append(word)
                    word = []
            elif cjk.match(c):
                if word:
                    raw_words.append(word)
                raw_words.append([(c, i)])
                word = []
            else:
                word.append((c, i))
        if word:
            raw_words.append(word)
        tokens, starts, ends = [], [], []
        for word in raw_words:
            chars = self._normalized_chars(word)
            current = None
            for c, first, last in chars:
                if c.isspace():
                    current = None
                elif c in r.is_punct:
                    tokens.append(c)
                    starts.append(first)
                    ends.append(last)
                    current = None
                elif current is None:
                    current = len(tokens)
                    tokens.append(c)
                    starts.append(first)
                    ends.append(last)
                else:
                    tokens[current] += c
                    ends[current] = max(ends[current], last)
        return tokens, starts, ends

    def _normalized_chars(self, word):
        """(character, first, last) of a raw word's normalized text, each mapped to the raw
        characters it came from: per character when normalizing character by character gives
        the word's normalization, else every character spans the whole word."""
        if not self.do_lower_case:
            return [(c, i, i) for c, i in word]
        whole = self.normalize("".join(c for c, _ in word))
        per_char = [(n, i, i) for c, i in word for n in self.normalize(c)]
        if "".join(n for n, _, _ in per_char) == whole:
            return per_char
        return [(n, word[0][1], word[-1][1]) for n in whole]


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece with `##` continuations; a word that cannot be
    covered, or longer than `max_input_chars_per_word` characters, is `unk_token`."""

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self._longest = max((len(t) for t in vocab), default=0)

    def tokenize(self, text):
        pieces = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            pieces.extend(self.word_pieces(word))
        return pieces

    def word_pieces(self, word):
        """The pieces of one word."""
        if len(word) > self.max_input_chars_per_word:
            return (self.unk_token,)
        pieces, start, vocab = [], 0, self.vocab
        while start < len(word):
            end = min(len(word), start + self._longest)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            if end == start:
                return (self.unk_token,)
            pieces.append(piece)
            start = end
        return tuple(pieces)

    def word_spans(self, word):
        """(piece, first, last) character offsets within `word` of each piece; the unknown
        token spans the whole word."""
        out, position = [], 0
        for piece in self.word_pieces(word):
            if piece == self.unk_token and position == 0:
                return [(piece, 0, len(word) - 1)]
            length = len(piece) - 2 if piece.startswith("##") and position else len(piece)
            out.append((piece, position, position + length - 1))
            position += length
        return out


def is_wordpiece_start(piece):
    """The original WordPiece word-start rule: a piece starts a word unless it begins with ##."""
    return not piece.startswith("##")


def vocabulary_kind(path):
    """SENTENCEPIECE for a SentencePiece model (a *.model file, KerasHub's *.spm, or its
    bytes), else WORDPIECE."""
    if isinstance(path, (bytes, bytearray, spm.SentencePieceProcessor)):
        return SENTENCEPIECE
    return SENTENCEPIECE if os.fspath(path).endswith((".model", ".spm")) else WORDPIECE


def sentencepiece_listing(path, lines=50):
    """True when `path` is SentencePiece's own `.vocab` listing (`piece<TAB>score`), which
    a WordPiece tokenizer must not read as its vocabulary."""
    try:
        head = _read_text(path)[:20000].decode("utf-8", "ignore").splitlines()[:lines]
    except (OSError, ValueError):
        return False
    rows = [line.split("\t") for line in head if line]
    return bool(rows) and all(len(r) == 2 for r in rows) and (
        any(r[0].startswith(SPIECE_UNDERLINE) for r in rows) or rows[0][0] == PAD)


def vocabulary_file(spm_model_file=None, vocab_file=None):
    """The vocabulary the original's flags name, or None when they name none.

    --spm_model_file wins, as in the original; a --vocab_file beside it must then be the
    SentencePiece model's own listing (the original's run_glue.sh passes 30k-clean.vocab) or
    absent: two different vocabularies are an error, never a silent choice. A --vocab_file
    alone is a WordPiece vocabulary (or a *.model, as TF-Hub's tokenization_info names it).
    """
    spm_model_file = None if spm_model_file in (None, "", "from_tf_hub") else spm_model_file
    vocab_file = vocab_file or None
    if vocab_file and vocabulary_kind(vocab_file) == WORDPIECE and sentencepiece_listing(
            vocab_file) and not spm_model_file:
        model = os.path.splitext(vocab_file)[0] + ".model"
        raise ValueError(f"--vocab_file={vocab_file} is a SentencePiece vocabulary listing, not "
                         f"a WordPiece vocabulary: pass the model, --spm_model_file={model}")
    if spm_model_file and vocab_file and os.path.abspath(vocab_file) != os.path.abspath(
            spm_model_file):
        if vocabulary_kind(vocab_file) == WORDPIECE and not sentencepiece_listing(vocab_file) \
                and _exists(vocab_file):
            raise ValueError(f"--spm_model_file={spm_model_file} and --vocab_file={vocab_file} "
                             f"name two different vocabularies: give --spm_model_file for a "
                             f"SentencePiece model or --vocab_file for a WordPiece vocabulary, "
                             f"not both")
    return spm_model_file or vocab_file


def _exists(path):
    if "://" in os.fspath(path):
        import tensorflow as tf
        return tf.io.gfile.exists(path)
    return os.path.exists(path)


class FullTokenizer:
    """The original `FullTokenizer(vocab_file, do_lower_case=True, spm_model_file=None)`.

    With `spm_model_file` (or a `vocab_file` that is a *.model SentencePiece model, as TF-Hub's
    `tokenization_info` gives it): SentencePiece. The original left `preprocess_text` to its
    callers; here `tokenize` applies it, so `tokenize(text)` equals the original's
    `tokenize(preprocess_text(text, lower=do_lower_case))`. Otherwise `vocab_file` is a
    WordPiece vocabulary and `tokenize` is the original's BasicTokenizer + WordpieceTokenizer.
    """

    def __init__(self, vocab_file=None, do_lower_case=True, spm_model_file=None):
        if not spm_model_file and vocab_file is not None and (
                vocabulary_kind(vocab_file) == SENTENCEPIECE):
            spm_model_file, vocab_file = vocab_file, None
        if not spm_model_file and vocab_file is None:
            raise ValueError("FullTokenizer needs a vocab_file (WordPiece) or an spm_model_file "
                             "(SentencePiece)")
        self.do_lower_case = do_lower_case
        self.sp_model = self.basic_tokenizer = self.wordpiece_tokenizer = None
        self._encoder = self._start_table = None
        if spm_model_file:
            self.kind = SENTENCEPIECE
            self.sp_model = load_sp_model(spm_model_file)
            # The file an export copies; None when built from bytes.
            self.spm_model_file = (os.fspath(spm_model_file)
                                   if isinstance(spm_model_file, (str, os.PathLike)) else None)
            self.vocab_file = None
            self.vocab = {self.sp_model.id_to_piece(i): i
                          for i in range(self.sp_model.get_piece_size())}
        else:
            self.kind = WORDPIECE
            self.vocab_file, self.spm_model_file = os.fspath(vocab_file), None
            self.vocab = load_vocab(vocab_file)
            self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
            self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
            self._ids = {}
        self.inv_vocab = {i: p for p, i in self.vocab.items()}

    @property
    def asset_file(self):
        """The vocabulary file an export carries: the SentencePiece model or the vocab file."""
        return self.spm_model_file or self.vocab_file

    def __len__(self):
        return self.sp_model.get_piece_size() if self.sp_model else len(self.vocab)

    def preprocess(self, text):
        """The text the tokenizer splits: `preprocess_text` (SentencePiece) or the basic
        tokenizer's normalization (WordPiece)."""
        if self.sp_model:
            return preprocess_text(text, lower=self.do_lower_case)
        return self.basic_tokenizer.normalize(text)

    def tokenize(self, text):
        if self.sp_model:
            return encode_pieces(self.sp_model, self.preprocess(text))
        pieces, split = [], self.wordpiece_tokenizer.word_pieces
        for word in self.basic_tokenizer.tokenize(text):
            pieces.extend(split(word))
        return pieces

    def encode(self, text):
        """Ids of `tokenize(text)`."""
        if self.sp_model:
            return encode_ids(self.sp_model, self.preprocess(text))
        words, known = self.basic_tokenizer.tokenize(text), self._ids
        try:
            return [i for word in words for i in known[word]]
        except KeyError:  # memoized by word: corpora repeat their words
            if len(known) > 1_000_000:
                known.clear()
            for word in words:
                if word not in known:
                    known[word] = self.convert_tokens_to_ids(
                        self.wordpiece_tokenizer.word_pieces(word))
            return [i for word in words for i in known[word]]

    def tokenize_with_offsets(self, text):
        """WordPiece only: (pieces, first character, last character), the inclusive span of
        `text` each piece of `tokenize(text)` comes from."""
        if self.sp_model:
            raise NotImplementedError("SentencePiece pieces are aligned by data.squad")
        pieces, starts, ends = [], [], []
        words, word_starts, word_ends = self.basic_tokenizer.tokenize_with_offsets(text)
        for word, first, last in zip(words, word_starts, word_ends):
            exact = last - first + 1 == len(word)  # else a piece spans the whole word
            for piece, a, b in self.wordpiece_tokenizer.word_spans(word):
                pieces.append(piece)
                starts.append(first + a if exact else first)
                ends.append(first + b if exact else last)
        return pieces, starts, ends

    def convert_tokens_to_ids(self, tokens):
        if self.sp_model:
            return [self.sp_model.piece_to_id(t) for t in tokens]
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        if self.sp_model:
            return [self.sp_model.id_to_piece(int(i)) for i in ids]
        return [self.inv_vocab[int(i)] for i in ids]

    def special_ids(self):
        """{<pad>, <unk>, [CLS], [SEP], [MASK]: id}, for WordPiece the ids of [PAD], [UNK]..."""
        if self.sp_model:
            return special_ids(self.sp_model, name=f"SentencePiece model {self.spm_model_file}"
                               if self.spm_model_file else "the SentencePiece model")
        missing = [WORDPIECE_SPECIALS[p] for p in SPECIAL_PIECES
                   if WORDPIECE_SPECIALS[p] not in self.vocab]
        if missing:
            raise ValueError(
                f"WordPiece vocabulary {self.vocab_file} lacks {', '.join(missing)}; ALBERT needs "
                f"[PAD], [UNK], [CLS], [SEP] and [MASK]")
        return {p: self.vocab[WORDPIECE_SPECIALS[p]] for p in SPECIAL_PIECES}

    def is_start_piece(self, piece):
        """The original whole-word rule of this kind of vocabulary."""
        return is_start_piece(piece) if self.sp_model else is_wordpiece_start(piece)

    @property
    def start_table(self):
        """Word-start flag of every id (bool numpy array)."""
        if self._start_table is None:
            self._start_table = np.array(
                [self.is_start_piece(p) for p in self.convert_ids_to_tokens(range(len(self)))],
                dtype=bool)
        return self._start_table

    def digest(self):
        """A hash of the vocabulary and settings that change ids (for feature caches)."""
        h = hashlib.sha256()
        if self.sp_model:
            h.update(self.sp_model.serialized_model_proto())
        else:
            h.update(("wordpiece", self.do_lower_case, list(self.vocab)).__repr__().encode())
        return h.hexdigest()

    def prepare_line(self, line):
        """A corpus line as the original builder reads it: `preprocess_text` (SentencePiece)
        or stripped (WordPiece); an empty result is a document break."""
        if self.sp_model:
            return preprocess_text(line, lower=self.do_lower_case)
        return convert_to_unicode(line).strip()

    def encode_lines(self, lines):
        """Ids of each prepared line (`prepare_line`), as lists; SentencePiece in one batch."""
        if self.sp_model:
            if self._encoder is None:
                self._encoder = FastEncoder(self.sp_model)
            return self._encoder.encode_lines(lines)
        return [self.encode(line) for line in lines]


class FastEncoder:
    """Batch ids for preprocessed lines (the same ids as `encode_ids`) and word-start flags.

    Used by the data builder: ids come from SentencePiece in one C++ call and the digit-comma
    rule is applied through a table over the vocabulary.
    """

    def __init__(self, sp_model):
        self.sp_model = load_sp_model(sp_model)
        size = self.sp_model.get_piece_size()
        pieces = [self.sp_model.id_to_piece(i) for i in range(size)]
        self.start_table = np.array([is_start_piece(p) for p in pieces], dtype=bool)
        sp = self.sp_model
        self.split_table = {i: [sp.piece_to_id(q) for q in _comma_split(sp, p)]
                            for i, p in enumerate(pieces)
                            if _needs_comma_split(p) and not sp.is_unknown(i)}
        self.unk_id = self.sp_model.unk_id()

    def encode_lines(self, lines):
        """Ids of each preprocessed line, as lists."""
        out = []
        split, unk = self.split_table, self.unk_id
        for line, ids in zip(lines, self.sp_model.encode(lines)):
            if unk in ids:  # an unknown piece keeps its surface text: follow the piece route
                ids = encode_ids(self.sp_model, line)
            elif split and not split.keys().isdisjoint(ids):
                ids = [j for i in ids for j in split.get(i, (i,))]
            out.append(ids)
        return out


# ----------------------------------------------------------------------------------------
# In-graph tokenizer (tensorflow-text)


@functools.lru_cache(maxsize=None)
def _regexes():
    """(whitespace class, combining-mark class) as RE2 classes."""
    t = _unicode_tables()
    return _char_class(map(ord, t["split_spaces"])), _char_class(map(ord, t["combining"]))


def _in_graph_tokenizer_class():
    """Defines InGraphTokenizer on first use, so that importing this module needs no TensorFlow."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    class InGraphTokenizer(tf.Module):
        """The `FullTokenizer` in TensorFlow ops: `tokenize(strings) -> tf.RaggedTensor[int32]`.

        Same preprocessing (whitespace collapsing, NFKD, combining marks dropped, lowercasing)
        and the digit-comma rule by a per-id replacement table, so ids match `FullTokenizer.encode`.
        Known limit: NFKD and lowercasing use ICU inside TensorFlow; characters whose Unicode data
        differs between ICU and this Python's `unicodedata` may give different ids.
        """

        def __init__(self, model, do_lower_case=True, name="in_graph_tokenizer"):
            super().__init__(name=name)
            if not isinstance(model, (bytes, bytearray)):
                path = os.fspath(model)
                if not os.path.isfile(path):
                    raise FileNotFoundError(f"SentencePiece model not found: {path}")
                with open(path, "rb") as f:
                    model = f.read()
            self.model_proto = bytes(model)
            sp_model = load_sp_model(self.model_proto)
            self.do_lower_case = do_lower_case
            self.vocab_size = sp_model.get_piece_size()
            ids = special_ids(sp_model)
            self.pad_id, self.unk_id = ids[PAD], ids[UNK]
            self.cls_id, self.sep_id, self.mask_id = ids[CLS], ids[SEP], ids[MASK]
            self._space, self._combining = _regexes()

            split = FastEncoder(sp_model).split_table
            rows = [split.get(i, [i]) for i in range(self.vocab_size)]
            self._needs_split = bool(split)
            self._replacements = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)
            self._sp = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)

        def preprocess(self, strings):
            """`preprocess_text` on a tf.string tensor."""
            x = tf.strings.regex_replace(strings, self._space + "+", " ")
            x = tf.strings.regex_replace(x, "^ | $", "")
            x = tf_text.normalize_utf8(x, "NFKD")
            x = tf.strings.regex_replace(x, self._combining, "")
            if self.do_lower_case:
                x = tf.strings.lower(x, encoding="utf-8")
            return x

        def tokenize(self, strings):
            """Ids for a batch of raw strings, as a RaggedTensor [batch, (tokens)] of int32."""
            strings = tf.convert_to_tensor(strings, dtype=tf.string)
            ids = self._sp.tokenize(self.preprocess(strings))
            if not self._needs_split:
                return ids
            pieces = tf.gather(self._replacements, ids)  # [batch, (tokens), (pieces)]
            return pieces.merge_dims(1, 2)

        __call__ = tokenize

    class InGraphWordpieceTokenizer(tf.Module):
        """The WordPiece `FullTokenizer` in TensorFlow ops: `tokenize(strings) ->
        tf.RaggedTensor[int32]`, ids equal to `FullTokenizer.encode`.

        The basic tokenizer's character classes are this Python's (as `FullTokenizer` uses),
        written into regular expressions; lowercasing and NFD run in ICU inside TensorFlow
        (the same known limit as the SentencePiece twin). The vocabulary is held as a table of
        constants, so the ids are those of `load_vocab` whatever the file's layout.
        """

        def __init__(self, vocab_file, do_lower_case=True, name="in_graph_wordpiece_tokenizer"):
            super().__init__(name=name)
            host = FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
            ids = host.special_ids()
            self.do_lower_case = do_lower_case
            self.vocab_size = len(host)
            self.pad_id, self.unk_id = ids[PAD], ids[UNK]
            self.cls_id, self.sep_id, self.mask_id = ids[CLS], ids[SEP], ids[MASK]
            t = _unicode_tables()
            classes = {k: _char_class(map(ord, t[k])) for k in
                       ("dropped", "spaces", "cjk", "marks", "punct", "split_spaces")}
            self._dropped, self._spaces, self._cjk = (classes["dropped"], classes["spaces"],
                                                      classes["cjk"])
            self._marks, self._punct = classes["marks"], classes["punct"]
            self._split = f"{classes['split_spaces']}+|{self._punct}"
            self._max_chars = host.wordpiece_tokenizer.max_input_chars_per_word
            self._table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(host.vocab)), tf.constant(list(host.vocab.values()),
                                                           tf.int64)), -1)
            self._wordpiece = tf_text.WordpieceTokenizer(
                self._table, suffix_indicator="##", max_bytes_per_word=4 * self._max_chars,
                token_out_type=tf.int64, unknown_token=WORDPIECE_SPECIALS[UNK])

        def preprocess(self, strings):
            """The basic tokenizer's `normalize` on a tf.string tensor."""
            x = tf.strings.regex_replace(strings, self._dropped, "")
            x = tf.strings.regex_replace(x, self._spaces, " ")
            x = tf.strings.regex_replace(x, self._cjk, " \\0 ")
            if self.do_lower_case:
                x = tf.strings.lower(x, encoding="utf-8")
                x = tf_text.normalize_utf8(x, "NFD")
                x = tf.strings.regex_replace(x, self._marks, "")
            return x

        def tokenize(self, strings):
            """Ids for a batch of raw strings, as a RaggedTensor [batch, (tokens)] of int32."""
            strings = tf.convert_to_tensor(strings, dtype=tf.string)
            words = tf_text.regex_split(self.preprocess(strings), self._split, self._punct)
            too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self._max_chars
            words = words.with_flat_values(
                tf.where(too_long, WORDPIECE_SPECIALS[UNK], words.flat_values))
            return tf.cast(self._wordpiece.tokenize(words).merge_dims(1, 2), tf.int32)

        __call__ = tokenize

    return InGraphTokenizer, InGraphWordpieceTokenizer


def in_graph_tokenizer(vocabulary, do_lower_case=True):
    """The in-graph twin of `FullTokenizer` for a SentencePiece model (path or bytes) or a
    WordPiece vocabulary file."""
    if vocabulary_kind(vocabulary) == SENTENCEPIECE:
        return __getattr__("InGraphTokenizer")(vocabulary, do_lower_case=do_lower_case)
    return __getattr__("InGraphWordpieceTokenizer")(vocabulary, do_lower_case=do_lower_case)


def __getattr__(name):
    if name in ("InGraphTokenizer", "InGraphWordpieceTokenizer"):
        classes = _in_graph_tokenizer_class()
        globals()["InGraphTokenizer"], globals()["InGraphWordpieceTokenizer"] = classes
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
