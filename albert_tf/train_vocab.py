"""Trains a SentencePiece vocabulary with the original ALBERT settings.

    python -m albert_tf.train_vocab --input_file=corpus/*.txt --model_prefix=30k-clean \
        --vocab_size=30000

Gives <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4, then the original user-defined symbols.
"""

import os

from absl import app, flags, logging

CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")


def _sentences(files, do_lower_case):
    from albert_tf.tokenization import preprocess_text

    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = preprocess_text(line, lower=do_lower_case)
                if line:
                    yield line


def train_sentencepiece(input_files, model_prefix, vocab_size=30000, do_lower_case=True,
                        character_coverage=0.99995, input_sentence_size=10_000_000,
                        num_threads=1, **extra):
    """Trains `{model_prefix}.model` and `.vocab` from text files (one sentence per line)."""
    import sentencepiece as spm

    from albert_tf.create_pretraining_data import expand_globs

    files = expand_globs(input_files)
    os.makedirs(os.path.dirname(os.path.abspath(model_prefix)), exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=_sentences(files, do_lower_case),
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
        **extra)
    return model_prefix + ".model"


FLAGS = flags.FLAGS


def define_flags():
    """The entry point's flags (defined on demand so that importing this module is free)."""
    flags.DEFINE_string("input_file", None,
                        "Text file(s), comma-separated globs, one sentence a line.")
    flags.DEFINE_string("model_prefix", None,
                        "Writes <model_prefix>.model and <model_prefix>.vocab.")
    flags.DEFINE_integer("vocab_size", 30000, "Number of pieces.")
    flags.DEFINE_bool("do_lower_case", True,
                      "Lowercase the text (with the builder's preprocess_text) before training.")
    flags.DEFINE_float("character_coverage", 0.99995, "SentencePiece character_coverage.")
    flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training.")
    flags.DEFINE_integer("num_threads", os.cpu_count() or 1, "SentencePiece trainer threads.")
    flags.DEFINE_bool("hard_vocab_limit", True, "False lets a small corpus give fewer pieces.")


def main(argv):
    del argv
    path = train_sentencepiece(
        FLAGS.input_file, FLAGS.model_prefix, FLAGS.vocab_size, FLAGS.do_lower_case,
        FLAGS.character_coverage, FLAGS.input_sentence_size, FLAGS.num_threads,
        hard_vocab_limit=FLAGS.hard_vocab_limit)
    logging.info("Wrote %s and %s.vocab", path, FLAGS.model_prefix)


if __name__ == "__main__":
    define_flags()
    flags.mark_flags_as_required(["input_file", "model_prefix"])
    app.run(main)
