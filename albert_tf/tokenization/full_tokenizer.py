"""The original's `FullTokenizer`, for either kind of vocabulary, with what the data builder,
the feature converters and the exports ask of a tokenizer (ids, offsets, word starts, special
ids, a digest for caches)."""

import hashlib
import os

import numpy as np

from albert_tf.tokenization.sentencepiece_tokenizer import (FastEncoder, encode_ids,
                                                            encode_pieces, is_start_piece,
                                                            load_sp_model, preprocess_text,
                                                            special_ids)
from albert_tf.tokenization.vocabulary import (SENTENCEPIECE, SPECIAL_PIECES, WORDPIECE,
                                               WORDPIECE_SPECIALS, convert_to_unicode,
                                               vocabulary_kind)
from albert_tf.tokenization.wordpiece_tokenizer import (BasicTokenizer, WordpieceTokenizer,
                                                        convert_by_vocab, is_wordpiece_start,
                                                        load_vocab)


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

    @property
    def uncased(self):
        """Whether no piece of the vocabulary but its [CLS]-like specials has a capital letter
        (a vocabulary made from lower-cased text)."""
        return not any(piece != piece.lower() and not (piece.startswith("[") and piece.isupper())
                       for piece in self.convert_ids_to_tokens(range(len(self))))

    def fingerprint(self, do_lower_case=None):
        """31 bits of a hash of the vocabulary's pieces and a lower-casing (default its own):
        what create_pretraining_data writes into every record, so that pretraining can tell
        records built with another vocabulary or casing."""
        lower = self.do_lower_case if do_lower_case is None else do_lower_case
        pieces = "\n".join(self.convert_ids_to_tokens(range(len(self))))
        h = hashlib.sha256(f"{self.kind}|lower={bool(lower)}|{pieces}".encode("utf-8"))
        return int.from_bytes(h.digest()[:4], "big") >> 1

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

