"""A tokenizer from the vocabulary a tool's flags name, with a clear error for a missing or
unusable one. Every tool gets its tokenizer here: the data builder directly (it does without
TensorFlow), the others through `albert_tf.formats.tokenizers.load_tokenizer`, which also finds
the vocabulary a model carries."""

import fnmatch
import os

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.vocabulary import exists, vocabulary_file

REQUIRED = ("--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is required")
HF_FAST_TOKENIZER = "tokenizer.json"
HF_FAST_TOKENIZER_IS = (
    "a Hugging Face fast tokenizer, which albert_tf does not read: give the SentencePiece model "
    "it was made from (spiece.model; transformers 5's save_pretrained may leave it out) or a "
    "WordPiece vocab.txt")


def open_vocabulary(path, do_lower_case=True):
    """FullTokenizer for a SentencePiece model or WordPiece vocabulary file whose special
    pieces ALBERT needs are there; ValueError (FileNotFoundError) naming the file otherwise."""
    tokenizer = FullTokenizer(vocab_file=path, do_lower_case=do_lower_case)
    tokenizer.special_ids()
    return tokenizer


def tokenizer_from_flags(spm_model_file=None, vocab_file=None, do_lower_case=True,
                         required=True):
    """The tokenizer of --spm_model_file or --vocab_file (see `vocabulary_file`); None when
    neither is given and not `required`."""
    path = vocabulary_file(spm_model_file, vocab_file)
    if path is None:
        if required:
            raise ValueError(REQUIRED)
        return None
    flag = "spm_model_file" if path == spm_model_file else "vocab_file"
    if not exists(path):
        raise FileNotFoundError(f"--{flag}={path} does not exist")
    if os.path.isdir(path):
        inside = sorted(n for n in os.listdir(path)
                        if fnmatch.fnmatch(n, "*.model") or fnmatch.fnmatch(n, "vocab*.txt"))
        raise ValueError(f"--{flag}={path} is a directory: give the vocabulary file in it" + (
            f" ({', '.join(os.path.join(path, n) for n in inside)})" if inside else
            " (a SentencePiece *.model or a WordPiece vocab*.txt; there is none)"))
    if os.path.basename(path) == HF_FAST_TOKENIZER:
        raise ValueError(f"--{flag}={path} is {HF_FAST_TOKENIZER_IS}")
    if flag == "spm_model_file" and path.endswith(".vocab"):  # the listing beside the model
        raise ValueError(f"--{flag}={path} is the listing SentencePiece writes beside its model: "
                         f"pass the model, {path[:-len('.vocab')]}.model")
    return open_vocabulary(path, do_lower_case)
