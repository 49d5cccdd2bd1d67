"""The WordPiece side of the original tokenization (the Chinese releases and BERT-style
vocabularies): the vocabulary file, the basic tokenizer and greedy WordPiece, by Unicode tables
and regular expressions."""

import collections
import functools
import re
import unicodedata

from absl import logging

from albert_tf.tokenization.characters import py_class, unicode_tables
from albert_tf.tokenization.vocabulary import convert_to_unicode, read_bytes

_WARNED = set()


def load_vocab(vocab_file):
    """{token: id} of a WordPiece vocabulary, as the original reads it.

    One entry per line, `token` or `token count`: the first field is the token. A repeated
    token keeps its first id and takes no new one; a whitespace-only line is the token " ".
    """
    raw = read_bytes(vocab_file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{vocab_file} is not a WordPiece vocabulary (UTF-8 text, one token "
                         f"per line); a SentencePiece model goes in --spm_model_file") from None
    vocab, repeated = collections.OrderedDict(), []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        token = line.strip().split()[0] if line.strip() else " "
        if token not in vocab:
            vocab[token] = len(vocab)
        else:
            repeated.append((number, token))
    if not vocab:
        raise ValueError(f"WordPiece vocabulary {vocab_file} is empty")
    if repeated and vocab_file not in _WARNED:  # once per file: the builder reads it per shard
        _WARNED.add(vocab_file)
        number, token = repeated[0]
        logging.warning("WordPiece vocabulary %s repeats %d tokens (first %r, line %d): a repeat "
                        "takes no id, so each later token's id is its line's index less the "
                        "repeats above it (as in the original)", vocab_file, len(repeated),
                        token, number)
    return vocab


def convert_by_vocab(vocab, items):
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    return text.split()


class _WordpieceRegexes:
    """Compiled forms of `unicode_tables()`: translate tables and Python regexes."""

    def __init__(self):
        t = unicode_tables()
        self.clean = {ord(c): None for c in t["dropped"]}
        self.clean.update({ord(c): " " for c in t["spaces"]})
        self.strip_marks = {ord(c): None for c in t["marks"]}
        punct, cjk = py_class(t["punct"]), py_class(t["cjk"])
        self.cjk = re.compile(cjk)
        space = py_class(t["split_spaces"])
        # Each CJK character and each punctuation character a token, whitespace between the
        # rest: the original's spaces around CJK, whitespace split and punctuation split at
        # once (no normalization turns another character into a CJK one; a test checks).
        self.words = re.compile(f"{punct}|{cjk}|[^{punct[1:-1]}{cjk[1:-1]}{space[1:-1]}]+")
        self.is_punct = set(t["punct"])


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

