"""AlbertPreprocessor: raw strings → the encoder's int32 inputs, as a Keras layer in the graph.

The ids are FullTokenizer's (the in-graph tensorflow-text twin of either vocabulary kind),
packed `[CLS] A [SEP] (B [SEP])` and truncated as the original classifier, then padded. Put in
front of a classifier (`AlbertClassifier(..., preprocessor=...)`), it lets `fit` take
`(strings, labels)` and `predict` take strings; the vocabulary travels inside `.keras` files as
an asset, and a SavedModel exported from such a model serves raw strings.
"""

import os

import keras
import tensorflow as tf

from albert_tf.serving.saved_model import pack_texts
from albert_tf.tokenization import in_graph_tokenizer


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPreprocessor(keras.layers.Layer):
    """Strings [batch] (or a pair of segments: a tuple of two) → `input_word_ids`, `input_mask`,
    `input_type_ids` int32 [batch, length].

    vocabulary: the SentencePiece model or the WordPiece vocabulary file.
    length is `seq_length`, or with `pad_to_longest` each batch's longest packed text (at most
    `seq_length`): the same outputs at real positions for less work.
    """

    def __init__(self, vocabulary=None, do_lower_case=True, seq_length=128,
                 pad_to_longest=False, **kwargs):
        kwargs.setdefault("name", "albert_preprocessor")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # Python strings and lists of them go to call() as they are (_segments converts them).
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.do_lower_case = bool(do_lower_case)
        self.seq_length = int(seq_length)
        self.pad_to_longest = bool(pad_to_longest)
        if self.seq_length < 3:
            raise ValueError(f"seq_length={seq_length} leaves no room for text")
        self.vocabulary = None  # the file's path, as given
        self.tokenizer = None
        self._vocabulary_bytes = None  # what .keras files store, whatever becomes of the path
        if vocabulary is not None:
            self._set_vocabulary(os.fspath(vocabulary))

    def _set_vocabulary(self, path):
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"vocabulary not found: {path}")
        with tf.io.gfile.GFile(path, "rb") as f:
            self._vocabulary_bytes = f.read()
        self.vocabulary = path
        self.tokenizer = in_graph_tokenizer(path, do_lower_case=self.do_lower_case)

    @property
    def vocab_size(self):
        return self.tokenizer.vocab_size

    def call(self, inputs):
        if self.tokenizer is None:
            raise ValueError("AlbertPreprocessor has no vocabulary: give `vocabulary=`")
        return pack_texts(self.tokenizer, _segments(inputs), self.seq_length,
                          self.pad_to_longest)

    def compute_output_spec(self, inputs):
        first = inputs[0] if isinstance(inputs, tuple) else inputs
        batch = len(first) if isinstance(first, list) else first.shape[0]
        length = None if self.pad_to_longest else self.seq_length
        spec = keras.KerasTensor((batch, length), dtype="int32")
        return {k: spec for k in ("input_word_ids", "input_mask", "input_type_ids")}

    def get_config(self):
        # The file itself goes into .keras files as an asset (save_assets); the path is kept for
        # configs used without one (cloning a model on the machine that has the file).
        return {**super().get_config(), "vocabulary": self.vocabulary,
                "do_lower_case": self.do_lower_case, "seq_length": self.seq_length,
                "pad_to_longest": self.pad_to_longest}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        path = config.get("vocabulary")
        if path is not None and not tf.io.gfile.exists(path):
            config["vocabulary"] = None  # a .keras file's asset gives it (load_assets)
        return cls(**config)

    def save_assets(self, dir_path):
        if self._vocabulary_bytes is not None:
            with open(os.path.join(dir_path, os.path.basename(self.vocabulary)), "wb") as f:
                f.write(self._vocabulary_bytes)

    def load_assets(self, dir_path):
        names = sorted(os.listdir(dir_path))
        if not names:
            raise ValueError("this .keras file holds no vocabulary for its AlbertPreprocessor")
        self._set_vocabulary(os.path.join(dir_path, names[0]))


def _segments(inputs):
    """1 or 2 string tensors [batch]: a tuple is a pair of segments; a tensor, array or list
    of strings is one batch of texts."""
    parts = list(inputs) if isinstance(inputs, tuple) else [inputs]
    if not 1 <= len(parts) <= 2:
        raise ValueError(f"AlbertPreprocessor takes 1 text segment or a pair, got {len(parts)}")
    out = []
    for part in parts:
        if isinstance(part, list):
            part = tf.stack([tf.convert_to_tensor(t, tf.string) for t in part])
        part = tf.convert_to_tensor(part)
        if part.dtype != tf.string:
            raise ValueError(f"AlbertPreprocessor takes strings, got {part.dtype.name}")
        out.append(tf.reshape(part, [-1]))
    return out
