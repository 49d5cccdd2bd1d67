"""What every tokenizer shares: the special pieces ALBERT needs, the two kinds of vocabulary
and how to tell them apart, and which vocabulary the original's flags name."""

import os

import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_PIECES = (PAD, UNK, CLS, SEP, MASK)
# The same roles in a WordPiece vocabulary; special_ids() keys both kinds by SPECIAL_PIECES.
WORDPIECE_SPECIALS = {PAD: "[PAD]", UNK: "[UNK]", CLS: "[CLS]", SEP: "[SEP]", MASK: "[MASK]"}
SENTENCEPIECE, WORDPIECE = "sentencepiece", "wordpiece"


def convert_to_unicode(text):
    """`text` as str (bytes are decoded as UTF-8, undecodable bytes dropped, as the original)."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "ignore")
    raise ValueError(f"Unsupported string type: {type(text)}")


printable_text = convert_to_unicode


def _is_remote(path):
    return "://" in os.fspath(path)


def read_bytes(path, what="WordPiece vocabulary"):
    """The bytes of a local file or a bucket object (TensorFlow's file system, imported only
    for remote paths: the data builder's workers and train_vocab do without it)."""
    path = os.fspath(path)
    if _is_remote(path):
        import tensorflow as tf
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    with open(path, "rb") as f:
        return f.read()


def exists(path):
    if _is_remote(path):
        import tensorflow as tf
        return tf.io.gfile.exists(path)
    return os.path.exists(path)


def vocabulary_kind(path):
    """SENTENCEPIECE for a SentencePiece model (a *.model file, KerasHub's *.spm, or its
    bytes), else WORDPIECE."""
    if isinstance(path, (bytes, bytearray, spm.SentencePieceProcessor)):
        return SENTENCEPIECE
    return SENTENCEPIECE if os.fspath(path).endswith((".model", ".spm")) else WORDPIECE


def sentencepiece_listing(path, lines=50):
    """True when `path` is SentencePiece's own `.vocab` listing (`piece<TAB>score`), which
    a WordPiece tokenizer must not read as its vocabulary."""
    try:
        head = read_bytes(path)[:20000].decode("utf-8", "ignore").splitlines()[:lines]
    except (OSError, ValueError):
        return False
    rows = [line.split("\t") for line in head if line]
    return bool(rows) and all(len(r) == 2 for r in rows) and (
        any(r[0].startswith(SPIECE_UNDERLINE) for r in rows) or rows[0][0] == PAD)


def vocabulary_file(spm_model_file=None, vocab_file=None):
    """The vocabulary the original's flags name, or None when they name none.

    --spm_model_file wins, as in the original; a --vocab_file beside it must then be the
    SentencePiece model's own listing (the original's run_glue.sh passes 30k-clean.vocab) or
    absent: two different vocabularies are an error, never a silent choice. A --vocab_file
    alone is a WordPiece vocabulary (or a *.model, as TF-Hub's tokenization_info names it);
    a listing beside --spm_model_file=from_tf_hub (the hub module's model) is not read.
    """
    from_hub = spm_model_file == "from_tf_hub"
    spm_model_file = None if spm_model_file in (None, "", "from_tf_hub") else spm_model_file
    vocab_file = vocab_file or None
    if vocab_file and vocabulary_kind(vocab_file) == WORDPIECE and sentencepiece_listing(
            vocab_file) and not spm_model_file:
        if from_hub:
            return None
        model = os.path.splitext(vocab_file)[0] + ".model"
        raise ValueError(f"--vocab_file={vocab_file} is a SentencePiece vocabulary listing, not "
                         f"a WordPiece vocabulary: pass the model, --spm_model_file={model}")
    if spm_model_file and vocab_file and os.path.abspath(vocab_file) != os.path.abspath(
            spm_model_file):
        if vocabulary_kind(vocab_file) == WORDPIECE and not sentencepiece_listing(vocab_file) \
                and exists(vocab_file):
            raise ValueError(f"--spm_model_file={spm_model_file} and --vocab_file={vocab_file} "
                             f"name two different vocabularies: give --spm_model_file for a "
                             f"SentencePiece model or --vocab_file for a WordPiece vocabulary, "
                             f"not both")
    return spm_model_file or vocab_file
