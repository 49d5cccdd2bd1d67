"""The SentencePiece side of the original tokenization (the English releases): text
preprocessing, pieces with the digit-comma rule, the whole-word start rule, and a batch encoder
for the data builder."""

import os
import unicodedata

import numpy as np
import sentencepiece as spm

from albert_tf.tokenization.vocabulary import SPECIAL_PIECES, SPIECE_UNDERLINE

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
