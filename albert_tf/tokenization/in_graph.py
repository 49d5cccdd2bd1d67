"""The tokenizers' in-graph twins (tensorflow-text ops), for exports that take raw strings:
the same ids as `FullTokenizer.encode` inside a TensorFlow graph.

Known limit of both: NFKD/NFD and lowercasing run in ICU inside TensorFlow; characters whose
Unicode data differs between ICU and this Python's `unicodedata` may give different ids.
"""

import functools
import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenization.characters import re2_class, unicode_tables
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.sentencepiece_tokenizer import (FastEncoder, load_sp_model,
                                                            special_ids)
from albert_tf.tokenization.vocabulary import (CLS, MASK, PAD, SENTENCEPIECE, SEP, UNK,
                                               WORDPIECE_SPECIALS, vocabulary_kind)


@functools.lru_cache(maxsize=None)
def _regexes():
    """(whitespace class, combining-mark class) as RE2 classes."""
    t = unicode_tables()
    return re2_class(map(ord, t["split_spaces"])), re2_class(map(ord, t["combining"]))


def split_words(strings):
    """`str.split`'s words of a string tensor [batch] (ragged [batch, (words)]) and their UTF-8
    byte starts and ends, as `tf_text.regex_split_with_offsets` gives them. Neither
    `tf.strings.split` (ASCII whitespace only) nor tf_text's WhitespaceTokenizer (a word before
    a multi-byte space keeps that space's first bytes) splits as `str.split` does."""
    return tf_text.regex_split_with_offsets(strings, _regexes()[0] + "+")


class InGraphTokenizer(tf.Module):
    """The `FullTokenizer` in TensorFlow ops: `tokenize(strings) -> tf.RaggedTensor[int32]`.

    Same preprocessing (whitespace collapsing, NFKD, combining marks dropped, lowercasing)
    and the digit-comma rule by a per-id replacement table, so ids match `FullTokenizer.encode`.
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
        self.space, self._combining = _regexes()  # one whitespace character; marks

        split = FastEncoder(sp_model).split_table
        rows = [split.get(i, [i]) for i in range(self.vocab_size)]
        self._needs_split = bool(split)
        self._replacements = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)
        self._sp = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)

    def preprocess(self, strings):
        """`preprocess_text` on a tf.string tensor."""
        x = tf.strings.regex_replace(strings, self.space + "+", " ")
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

    def tokenize_words_with_offsets(self, words):
        """Ids of a batch of whitespace-free words (string [words]), ragged [words, (pieces)],
        and each piece's UTF-8 byte range [start, end) in its word (`_in_word_bytes`). A piece
        split by the digit-comma rule gives its parts its range."""
        processed = self.preprocess(words)
        ids, starts, ends = self._sp.tokenize_with_offsets(processed)
        if self._needs_split:
            parts = tf.gather(self._replacements, ids)  # [words, (pieces), (parts)]
            repeat = parts.values.row_lengths()
            ids = parts.merge_dims(1, 2)
            starts = ids.with_flat_values(tf.repeat(starts.flat_values, repeat))
            ends = ids.with_flat_values(tf.repeat(ends.flat_values, repeat))
        return ids, _in_word_bytes(words, processed, starts, ends, self.preprocess)


class InGraphWordpieceTokenizer(tf.Module):
    """The WordPiece `FullTokenizer` in TensorFlow ops: `tokenize(strings) ->
    tf.RaggedTensor[int32]`, ids equal to `FullTokenizer.encode`.

    The basic tokenizer's character classes are this Python's (as `FullTokenizer` uses),
    written into regular expressions. The vocabulary is held as a table of constants, so the
    ids are those of `load_vocab` whatever the file's layout.
    """

    def __init__(self, vocab_file, do_lower_case=True, name="in_graph_wordpiece_tokenizer"):
        super().__init__(name=name)
        host = FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
        ids = host.special_ids()
        self.do_lower_case = do_lower_case
        self.vocab_size = len(host)
        self.pad_id, self.unk_id = ids[PAD], ids[UNK]
        self.cls_id, self.sep_id, self.mask_id = ids[CLS], ids[SEP], ids[MASK]
        t = unicode_tables()
        classes = {k: re2_class(map(ord, t[k])) for k in
                   ("dropped", "spaces", "cjk", "marks", "punct", "split_spaces")}
        self._dropped, self._spaces, self._cjk = (classes["dropped"], classes["spaces"],
                                                  classes["cjk"])
        self._marks, self._punct = classes["marks"], classes["punct"]
        self.space = classes["split_spaces"]  # one whitespace character, as a regex
        self._split = f"{self.space}+|{self._punct}"
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

    def tokenize_words_with_offsets(self, words):
        """As `InGraphTokenizer.tokenize_words_with_offsets`: ids of whitespace-free words and
        each piece's byte range in its word (`_in_word_bytes`)."""
        processed = self.preprocess(words)
        tokens, token_starts, _ = tf_text.regex_split_with_offsets(processed, self._split,
                                                                    self._punct)
        too_long = tf.strings.length(tokens.flat_values, unit="UTF8_CHAR") > self._max_chars
        tokens = tokens.with_flat_values(
            tf.where(too_long, WORDPIECE_SPECIALS[UNK], tokens.flat_values))
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(tokens)  # [w, (t), (p)]
        first = tf.cast(tf.repeat(token_starts.flat_values, ids.values.row_lengths()), tf.int64)
        ids = tf.cast(ids.merge_dims(1, 2), tf.int32)
        starts = ids.with_flat_values(first + tf.cast(starts.flat_values, tf.int64))
        ends = ids.with_flat_values(first + tf.cast(ends.flat_values, tf.int64))
        return ids, _in_word_bytes(words, processed, starts, ends, self.preprocess)


def _in_word_bytes(words, processed, starts, ends, preprocess):
    """The pieces' byte offsets in `processed` (each word preprocessed) as offsets in `words`.
    Where each character preprocessed alone gives the word's preprocessed bytes (nearly always:
    NFKD, lower-casing, marks dropped and CJK characters spaced apart all work a character at
    a time), an offset moves to its character's: a piece of "Müller" or of "学生在２０１９年" gets
    its own characters. Elsewhere the bytes before and after the changed part are matched from
    either end (ASCII case aside): an offset there moves with them, one inside it goes to the
    part's edge."""
    by_char = _by_character(words, processed, preprocess)
    length, changed = tf.strings.length(words), tf.strings.length(processed)
    ours, theirs = (tf.strings.bytes_split(tf.strings.lower(x)) for x in (words, processed))
    head = _common_prefix(ours, theirs)
    tail = tf.minimum(_common_prefix(_reversed(ours), _reversed(theirs)),
                      tf.minimum(length, changed) - head)
    owner = starts.value_rowids()
    head, tail, length, changed = (tf.gather(x, owner) for x in (head, tail, length, changed))

    def moved(x, inside, last):
        x = tf.cast(x.flat_values, tf.int32)
        mapped = tf.where(x <= head, x, tf.where(x >= changed - tail, x + length - changed,
                                                 inside))
        mapped = tf.where(length == changed, x, mapped)
        return by_char(owner, x, last, mapped)
    first, last = moved(starts, head, False), moved(ends, length - tail, True)
    empty = tf.cast(ends.flat_values, tf.int32) <= tf.cast(starts.flat_values, tf.int32)
    return (starts.with_flat_values(first),  # a piece of no bytes (a lone "▁") keeps none
            ends.with_flat_values(tf.where(empty, first, last)))


def _by_character(words, processed, preprocess):
    """A function (owner word, offset in its preprocessed bytes, whether it ends a piece,
    fallback) → the offset in the word of the character that preprocessed byte came from,
    where the word's characters preprocessed one by one give its preprocessed length."""
    chars = tf.strings.unicode_split(words, "UTF-8")  # [words, (characters)]
    size_in = tf.strings.length(chars.flat_values)
    size_out = tf.strings.length(preprocess(chars.flat_values))
    exact = tf.equal(tf.reduce_sum(chars.with_flat_values(size_out), axis=1),
                     tf.strings.length(processed))
    end_in, end_out = tf.cumsum(size_in), tf.cumsum(size_out)  # over all words' characters
    base_in = tf.gather(tf.concat([[0], end_in], 0), chars.row_starts())
    base_out = tf.gather(tf.concat([[0], end_out], 0), chars.row_starts())
    last_char = tf.maximum(tf.size(end_out) - 1, 0)

    def move(owner, x, is_end, fallback):
        at = tf.gather(base_out, owner) + x
        if is_end:  # the character holding the piece's last byte, up to its own end
            k = tf.minimum(tf.searchsorted(end_out, at - 1, side="right"), last_char)
            mapped = tf.gather(end_in, k)
        else:  # the character holding its first byte, from its start
            k = tf.minimum(tf.searchsorted(end_out, at, side="right"), last_char)
            mapped = tf.gather(end_in - size_in, k)
        mapped = mapped - tf.gather(base_in, owner)
        return tf.where(tf.gather(exact, owner) & (tf.size(end_out) > 0), mapped, fallback)
    return move


def _common_prefix(a, b):
    """How many leading items of each row of ragged `a` and `b` are equal: int32 [rows]."""
    shorter = tf.minimum(a.row_lengths(), b.row_lengths())
    width = tf.maximum(tf.reduce_max(tf.concat([a.row_lengths(), b.row_lengths(), [0]], 0)), 1)
    a, b = (x.to_tensor("", shape=tf.stack([x.nrows(), width])) for x in (a, b))
    inside = tf.range(width, dtype=shorter.dtype)[None] < shorter[:, None]
    same = tf.cast(tf.equal(a, b) & inside, tf.int32)
    return tf.reduce_sum(tf.math.cumprod(same, axis=1), axis=1)


def _reversed(ragged):
    """Each row of `ragged` in reverse order."""
    rows = ragged.value_rowids()
    place = tf.range(tf.size(ragged.flat_values, out_type=rows.dtype)) - tf.gather(
        ragged.row_starts(), rows)
    return ragged.with_flat_values(tf.gather(ragged.flat_values,
                                             tf.gather(ragged.row_limits(), rows) - 1 - place))


def in_graph_tokenizer(vocabulary, do_lower_case=True):
    """The in-graph twin of `FullTokenizer` for a SentencePiece model (path or bytes) or a
    WordPiece vocabulary file."""
    if vocabulary_kind(vocabulary) == SENTENCEPIECE:
        return InGraphTokenizer(vocabulary, do_lower_case=do_lower_case)
    return InGraphWordpieceTokenizer(vocabulary, do_lower_case=do_lower_case)
