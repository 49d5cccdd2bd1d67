"""ALBERT tokenization: the original preprocessing, SentencePiece pieces and ids, in-graph twin.

`FullTokenizer` gives the same pieces as the original `tokenization.py` on any text;
`InGraphTokenizer` gives the same ids inside a TensorFlow graph (tensorflow-text).
"""

import functools
import os
import unicodedata

import numpy as np
import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_PIECES = (PAD, UNK, CLS, SEP, MASK)

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


class FullTokenizer:
    """The original SentencePiece tokenizer; `tokenize` also applies `preprocess_text`.

    The original `FullTokenizer.tokenize` left preprocessing to its callers; here it is
    built in, so `tokenize(text)` equals the original `tokenize(preprocess_text(text, lower))`.
    """

    def __init__(self, spm_model_file, do_lower_case=True):
        self.sp_model = load_sp_model(spm_model_file)
        self.do_lower_case = do_lower_case
        # The file an export copies; None when built from bytes.
        self.spm_model_file = (os.fspath(spm_model_file)
                               if isinstance(spm_model_file, (str, os.PathLike)) else None)
        self.vocab = {self.sp_model.id_to_piece(i): i for i in range(len(self))}
        self.inv_vocab = {i: p for p, i in self.vocab.items()}

    def __len__(self):
        return self.sp_model.get_piece_size()

    def preprocess(self, text):
        return preprocess_text(text, lower=self.do_lower_case)

    def tokenize(self, text):
        return encode_pieces(self.sp_model, self.preprocess(text))

    def encode(self, text):
        """Ids of `tokenize(text)`."""
        return encode_ids(self.sp_model, self.preprocess(text))

    def convert_tokens_to_ids(self, tokens):
        return [self.sp_model.piece_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.sp_model.id_to_piece(int(i)) for i in ids]

    def special_ids(self):
        return special_ids(self.sp_model)


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


def _char_class(codepoints):
    """An RE2 character class matching the given sorted code points."""
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
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def _regexes():
    """(whitespace class, combining-mark class) from this Python's Unicode database."""
    valid = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    space = [c for c in valid if chr(c).isspace()]
    combining = [c for c in valid if unicodedata.combining(chr(c))]
    return _char_class(space), _char_class(combining)


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

    return InGraphTokenizer


def __getattr__(name):
    if name == "InGraphTokenizer":
        cls = globals()["InGraphTokenizer"] = _in_graph_tokenizer_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
