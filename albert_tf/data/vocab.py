"""A SentencePiece vocabulary trained with the original ALBERT settings.

It gives <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4, then the original user-defined symbols.
"""

import os
import re

from albert_tf.outputs import check_output_files

CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")


def _sentences(files, do_lower_case):
    from albert_tf.data.build_records import read_lines
    from albert_tf.tokenization import preprocess_text

    for path in files:
        for line in read_lines(path):
            line = preprocess_text(line, lower=do_lower_case)
            if line:
                yield line


def train_sentencepiece(input_files, model_prefix, vocab_size=30000, do_lower_case=True,
                        character_coverage=0.99995, input_sentence_size=10_000_000,
                        num_threads=1, overwrite=False, **extra):
    """Trains `{model_prefix}.model` and `.vocab` from text files (one sentence per line).
    Existing files there are replaced only with `overwrite`, never when they are inputs."""
    import sentencepiece as spm

    from albert_tf.data.build_records import InputError, expand_globs

    files = expand_globs(input_files)
    check_output_files([model_prefix + ".model", model_prefix + ".vocab"], "model_prefix",
                       what="a SentencePiece vocabulary", overwrite=overwrite,
                       inputs={"input_file": files})
    os.makedirs(os.path.dirname(os.path.abspath(model_prefix)), exist_ok=True)
    try:
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
    except RuntimeError as e:
        most = re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)",
                         str(e))
        if most:
            raise InputError(f"--vocab_size={vocab_size} is more than this corpus gives: at most "
                             f"{most.group(1)} pieces. Lower --vocab_size, add text, or pass "
                             f"--nohard_vocab_limit") from None
        if "!sentences_.empty()" in str(e) or "(all_chars_count) > (0)" in str(e):
            raise InputError(f"--input_file={input_files} holds no text") from None
        raise
    return model_prefix + ".model"
