"""Vocabularies trained from text in the original ALBERT layouts.

SentencePiece (the English releases): <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4, then the
original user-defined symbols. WordPiece (the Chinese releases, BERT-style): [PAD]=0,
[unused1]..[unused99], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, then the learnt pieces,
from tensorflow-text's WordPiece learner over the basic tokenizer's words (each CJK character
one word, so one token).
"""

import hashlib
import os
import re

from absl import logging

from albert_tf.outputs import check_output_files, make_parent_dir
from albert_tf.tokenization.wordpiece_tokenizer import BasicTokenizer

CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
# SentencePiece's trainer leaves out, without a word, every line longer than its
# max_sentence_length (4,192 bytes by default: 1,400 Chinese characters); ours is this, and
# longer lines are counted and said.
MAX_LINE_BYTES = 1 << 16
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")


class _Sentences:
    """The files' lines for SentencePiece's trainer, preprocessed, each distinct line once
    unless `keep_duplicates` (SentencePiece's seed step slows down by orders of magnitude on
    repeated lines: 155 s against 1 s on 264 KB of license texts with 40% of their lines
    repeated). An error reading a file ends the lines and is kept in `error`: raised inside the
    trainer, it would come out wrapped in its own."""

    def __init__(self, files, do_lower_case, keep_duplicates=False):
        self.files, self.do_lower_case, self.error = files, do_lower_case, None
        self.keep_duplicates = keep_duplicates
        self.lines, self.duplicates, self.too_long = 0, 0, 0

    def __iter__(self):
        from albert_tf.data.build_records import InputError, read_lines
        from albert_tf.tokenization import preprocess_text

        seen = set()  # 16-byte digests: a corpus's distinct lines in a fraction of their size
        try:
            for path in self.files:
                for line in read_lines(path):
                    line = preprocess_text(line, lower=self.do_lower_case)
                    if not line:
                        continue
                    if len(line.encode()) > MAX_LINE_BYTES:
                        self.too_long += 1
                        continue
                    self.lines += 1
                    if not self.keep_duplicates:
                        digest = hashlib.blake2b(line.encode(), digest_size=16).digest()
                        if digest in seen:
                            self.duplicates += 1
                            continue
                        seen.add(digest)
                    yield line
        except InputError as e:
            self.error = e

    def log(self):
        if self.too_long:
            logging.warning("%s", self.too_long_said())
        if self.duplicates:
            logging.info("Trained on %d distinct lines of %d: %d repeated lines read once "
                         "(--keep_duplicate_lines counts every copy)", self.lines -
                         self.duplicates, self.lines, self.duplicates)

    def too_long_said(self):
        return (f"{self.too_long} lines longer than {MAX_LINE_BYTES} bytes were left out of "
                f"training (SentencePiece's max_sentence_length): split them into sentences")


def train_sentencepiece(input_files, model_prefix, vocab_size=30000, do_lower_case=True,
                        character_coverage=0.99995, input_sentence_size=10_000_000,
                        num_threads=1, overwrite=False, keep_duplicate_lines=False, **extra):
    """Trains `{model_prefix}.model` and `.vocab` from text files (one sentence per line; a
    line repeated is read once unless `keep_duplicate_lines`). Existing files there are
    replaced only with `overwrite`, never when they are inputs."""
    import sentencepiece as spm

    from albert_tf.data.build_records import InputError, check_input_files, expand_globs

    files = expand_globs(input_files)
    check_input_files(files)
    check_output_files([model_prefix + ".model", model_prefix + ".vocab"], "model_prefix",
                       what="a SentencePiece vocabulary", overwrite=overwrite,
                       inputs={"input_file": files})
    make_parent_dir(model_prefix)
    sentences = _Sentences(files, do_lower_case, keep_duplicate_lines)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_prefix=model_prefix,
            vocab_size=vocab_size,
            model_type="unigram",
            pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
            control_symbols=list(CONTROL_SYMBOLS),
            user_defined_symbols=list(USER_DEFINED_SYMBOLS),
            shuffle_input_sentence=True,
            input_sentence_size=input_sentence_size,
            character_coverage=character_coverage,
            num_threads=num_threads,
            minloglevel=2,
            **{"max_sentence_length": MAX_LINE_BYTES, **extra})
    except RuntimeError as e:
        if sentences.error:
            raise sentences.error from None
        most = re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)",
                         str(e))
        fewest = re.search(r"Vocabulary size is smaller than required_chars\. \d+ vs (\d+)",
                           str(e))
        if fewest:
            raise InputError(f"--vocab_size={vocab_size} is less than this corpus needs: its "
                             f"{fewest.group(1)} characters are each a piece of their own, "
                             f"besides the special pieces. Raise --vocab_size") from None
        if most:
            raise InputError(f"--vocab_size={vocab_size} is more than this corpus gives: at most "
                             f"{most.group(1)} pieces. Lower --vocab_size, add text, or pass "
                             f"--nohard_vocab_limit" + (f" ({sentences.too_long_said()})"
                                                        if sentences.too_long else "")) from None
        if any(m in str(e) for m in ("!sentences_.empty()", "(all_chars_count) > (0)",
                                     "!required_chars_.empty()")):  # by sentencepiece version
            raise InputError(f"--input_file={input_files} holds no text") from None
        raise
    if sentences.error:  # the trainer learnt from the lines before it
        for path in (model_prefix + ".model", model_prefix + ".vocab"):
            if os.path.exists(path):
                os.remove(path)
        raise sentences.error
    sentences.log()
    return model_prefix + ".model"


# The Chinese releases' (and BERT's) first 104 lines.
WORDPIECE_RESERVED = (["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)]
                      + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])


def train_wordpiece(input_files, model_prefix, vocab_size=21128, do_lower_case=True,
                    overwrite=False):
    """Learns `{model_prefix}.txt`, a WordPiece vocabulary in the original layout, from text
    files (one sentence per line); returns its path. Replaced only with `overwrite`."""
    # tensorflow-text's learner runs on tf.data; the SentencePiece path does without TensorFlow.
    import tensorflow as tf
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

    from albert_tf.data.build_records import (InputError, check_input_files, expand_globs,
                                              read_lines)
    from albert_tf.files import atomic_write_text

    files = expand_globs(input_files)
    check_input_files(files)
    path = model_prefix + ".txt"
    check_output_files([path], "model_prefix", what="a WordPiece vocabulary",
                       overwrite=overwrite, inputs={"input_file": files})
    if vocab_size <= len(WORDPIECE_RESERVED):
        raise InputError(f"--vocab_size={vocab_size} leaves no room for pieces after the "
                         f"{len(WORDPIECE_RESERVED)} reserved tokens")
    # The words of the basic tokenizer every tool reads with, spaced apart: tensorflow-text's
    # own with lower_case folds with NFKC, which turned "，！？" and fullwidth digits into ASCII
    # pieces, so the vocabulary lacked them and every tool read them as [UNK].
    basic = BasicTokenizer(do_lower_case)
    lines = [" ".join(words) for f in files for words in map(basic.tokenize, read_lines(f))
             if words]
    if not lines:
        raise InputError(f"--input_file={input_files} holds no text")
    vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
        tf.data.Dataset.from_tensor_slices(lines).batch(1024), vocab_size,
        list(WORDPIECE_RESERVED), bert_tokenizer_params={"lower_case": False},
        learn_params={"max_unique_chars": vocab_size, "lower_thresh": 1})
    make_parent_dir(path)
    atomic_write_text(path, "".join(token + "\n" for token in vocab))
    return path
