r"""Trains a vocabulary in the original ALBERT layouts: SentencePiece (the English releases) or
WordPiece (the Chinese releases, BERT-style).

    python -m albert_tf.train_vocab --input_file=corpus/*.txt --model_prefix=30k-clean \
        --vocab_size=30000
    python -m albert_tf.train_vocab --model_type=wordpiece --input_file=zh/*.txt \
        --model_prefix=vocab_chinese --vocab_size=21128

SentencePiece gives <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4, then the original
user-defined symbols (<model_prefix>.model, for --spm_model_file); WordPiece gives [PAD]=0,
[unused1-99], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103 (<model_prefix>.txt, for
--vocab_file). The library behind it: `albert_tf.data.vocab`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import os

from absl import flags, logging

from albert_tf import cli
from albert_tf.data.vocab import train_sentencepiece, train_wordpiece

FLAGS = flags.FLAGS


def define_flags():
    """The entry point's flags (defined on demand so that importing this module is free)."""
    flags.DEFINE_string("input_file", None,
                        "Text file(s), comma-separated globs, one sentence a line.")
    flags.DEFINE_enum("model_type", "unigram", ["unigram", "wordpiece"],
                      "unigram: a SentencePiece model, as the English releases; wordpiece: a "
                      "WordPiece vocab.txt, as the Chinese releases (tensorflow-text's learner).")
    flags.DEFINE_string("model_prefix", None,
                        "Writes <model_prefix>.model and <model_prefix>.vocab (unigram) or "
                        "<model_prefix>.txt (wordpiece).")
    flags.DEFINE_integer("vocab_size", 30000, "Number of pieces.", lower_bound=1)
    flags.DEFINE_bool("do_lower_case", True,
                      "Lowercase the text (with the builder's preprocess_text) before training.")
    flags.DEFINE_float("character_coverage", 0.99995, "SentencePiece character_coverage.")
    flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training.")
    flags.DEFINE_integer("num_threads", os.cpu_count() or 1, "SentencePiece trainer threads.")
    flags.DEFINE_bool("hard_vocab_limit", True, "False lets a small corpus give fewer pieces.")
    flags.DEFINE_bool("keep_duplicate_lines", False,
                      "SentencePiece: train on every copy of a repeated line (by default each "
                      "distinct line is read once: repeated lines slow SentencePiece's trainer "
                      "down by orders of magnitude).")
    flags.DEFINE_bool("overwrite", False,
                      "Replace <model_prefix>.model and .vocab if they exist.")


def main(_):
    if FLAGS.model_type == "wordpiece":
        path = train_wordpiece(FLAGS.input_file, FLAGS.model_prefix, FLAGS.vocab_size,
                               FLAGS.do_lower_case, FLAGS.overwrite)
        entries = sum(1 for _ in open(path, encoding="utf-8"))
        logging.info("Wrote %s (%d entries): pass it as --vocab_file", path, entries)
        if abs(entries - FLAGS.vocab_size) > 0.1 * FLAGS.vocab_size:
            logging.warning("%d entries, not --vocab_size=%d: tensorflow-text's WordPiece "
                            "learner takes the size as a target (every character of the corpus "
                            "is kept, and a small corpus gives fewer pieces); the model's "
                            "vocab_size must be %d", entries, FLAGS.vocab_size, entries)
        return
    path = train_sentencepiece(
        FLAGS.input_file, FLAGS.model_prefix, FLAGS.vocab_size, FLAGS.do_lower_case,
        FLAGS.character_coverage, FLAGS.input_sentence_size, FLAGS.num_threads,
        FLAGS.overwrite, FLAGS.keep_duplicate_lines, hard_vocab_limit=FLAGS.hard_vocab_limit)
    logging.info("Wrote %s and %s.vocab", path, FLAGS.model_prefix)


def run(argv=None):
    define_flags()
    cli.run(main, ["input_file", "model_prefix"], argv)


if __name__ == "__main__":
    run()
