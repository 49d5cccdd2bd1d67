"""LiteRT (TFLite) models that take raw text: tensorflow-text's TFLite-ready tokenizers, packing
in builtin ops, the task model, and quantization; and running them with LiteRT's interpreter."""

import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text import tflite_registrar

from albert_tf.serving.saved_model import Trackable, tf_variables
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.sentencepiece_tokenizer import FastEncoder, load_sp_model, special_ids
from albert_tf.tokenization.vocabulary import (CLS, PAD, SENTENCEPIECE, SEP, UNK,
                                               WORDPIECE_SPECIALS, vocabulary_kind)

QUANTIZATIONS = ("none", "float16", "dynamic_int8")


class LiteTokenizer(tf.Module):
    """`FullTokenizer.encode` of one string in ops LiteRT runs: builtins and tensorflow-text's
    TFLite kernels (FastBertNormalize, FastSentencepieceTokenize, FastWordpieceTokenize).

    SentencePiece: lowercasing, NFD and accent stripping by FastBertNormalizer (ALBERT's
    preprocessing does NFKD; the model's own NFKC normalizer then gives the same text for all
    but rare compatibility characters), the digit-comma rule by a replacement table.
    WordPiece: FastBertTokenizer (BERT's basic tokenizer and WordPiece).
    """

    def __init__(self, vocabulary, do_lower_case=True, name="lite_tokenizer"):
        super().__init__(name=name)
        vocabulary = os.fspath(vocabulary)
        self.sentencepiece = vocabulary_kind(vocabulary) == SENTENCEPIECE
        if self.sentencepiece:
            with tf.io.gfile.GFile(vocabulary, "rb") as f:
                proto = f.read()
            sp_model = load_sp_model(proto)
            ids = special_ids(sp_model)
            self._normalizer = tf_text.FastBertNormalizer(
                lower_case_nfd_strip_accents=do_lower_case)
            self._sp = tf_text.FastSentencepieceTokenizer(proto)
            split = FastEncoder(sp_model).split_table
            rows = [split.get(i, [i]) for i in range(sp_model.get_piece_size())]
            lengths = np.array([len(r) for r in rows], np.int32)
            self._split = bool(split)
            self._row_lengths = tf.constant(lengths)
            self._row_starts = tf.constant((np.cumsum(lengths) - lengths).astype(np.int32))
            self._pieces = tf.constant(np.concatenate(rows).astype(np.int32))
        else:
            host = FullTokenizer(vocab_file=vocabulary, do_lower_case=do_lower_case)
            ids = host.special_ids()
            words = [f"[no entry {i}]" for i in range(len(host))]  # ids a repeated line skips
            for word, i in host.vocab.items():
                words[i] = word
            self._bert = tf_text.FastBertTokenizer(
                words, suffix_indicator="##",
                max_bytes_per_word=host.wordpiece_tokenizer.max_input_chars_per_word,
                token_out_type=tf.int32, unknown_token=WORDPIECE_SPECIALS[UNK],
                lower_case_nfd_strip_accents=do_lower_case)
        self.pad_id, self.cls_id, self.sep_id = ids[PAD], ids[CLS], ids[SEP]

    def tokenize(self, text):
        """Ids [n] of a string tensor of shape [1]."""
        if not self.sentencepiece:
            return self._bert.tokenize(text).flat_values
        ids = self._sp.tokenize(self._normalizer.normalize(text)).flat_values
        if not self._split:
            return ids
        return expand(ids, self._row_starts, self._row_lengths, self._pieces)

def expand(ids, row_starts, row_lengths, pieces):
    """Each id replaced by its row of `pieces` (rows given by starts and lengths), in builtin
    ops: the digit-comma rule's table lookup."""
    lengths = tf.gather(row_lengths, ids)
    owner = tf.repeat(tf.range(tf.size(ids)), lengths)
    ends = tf.cumsum(lengths)
    offset = tf.range(tf.reduce_sum(lengths)) - tf.gather(ends - lengths, owner)
    return tf.gather(pieces, tf.gather(tf.gather(row_starts, ids), owner) + offset)


def pack_one(segments, seq_length, cls_id, sep_id, pad_id=0, first_segment_length=None):
    """`pack_inputs` for one example in builtin ops: `[CLS] A [SEP] (B [SEP])` from 1 or 2 id
    vectors, trimmed as the original (`_truncate_seq_pair`: pop from the longer, ties from B),
    zero-padded to `seq_length`. Returns the encoder inputs, int32 [1, seq_length]."""
    budget = seq_length - len(segments) - 1
    if len(segments) == 1:
        kept = [segments[0][:budget]]
    else:
        a, b = segments
        if first_segment_length is not None:
            a = a[:first_segment_length]
            keep_a = tf.minimum(tf.size(a), budget)
        else:
            keep_a = tf.minimum(tf.size(a), tf.maximum(budget - tf.size(b), (budget + 1) // 2))
        kept = [a[:keep_a], b[:budget - keep_a]]
    pieces, types = [tf.constant([cls_id], tf.int32)], [tf.constant([0], tf.int32)]
    for i, ids in enumerate(kept):
        pieces += [ids, tf.constant([sep_id], tf.int32)]
        types.append(tf.fill([tf.size(ids) + 1], i))
    ids, types = tf.concat(pieces, 0), tf.concat(types, 0)
    padding = seq_length - tf.size(ids)

    def pad(x, value):
        return tf.reshape(tf.pad(x, [[0, padding]], constant_values=value), [1, seq_length])
    return {"input_word_ids": pad(ids, pad_id),
            "input_mask": pad(tf.ones_like(ids), 0),
            "input_type_ids": pad(types, 0)}


def text_model_to_tflite(model, vocabulary, do_lower_case, seq_length, keys, output_fn,
                         first_segment_length=None, quantization="none"):
    """TFLite bytes of a model that takes raw strings (inputs `keys`, each shape [1]) and returns
    `output_fn(model outputs)`."""
    tokenizer = LiteTokenizer(vocabulary, do_lower_case)
    specs = {k: tf.TensorSpec([1], tf.string, name=k) for k in keys}

    @tf.function(input_signature=[specs])
    def serving_default(texts):
        inputs = pack_one([tokenizer.tokenize(texts[k]) for k in keys], seq_length,
                          tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id,
                          first_segment_length)
        return dict(output_fn(model(inputs, training=False)))
    root = Trackable()
    root.tokenizer = tokenizer
    root.variables = tf_variables(model.variables)
    root.serving_default = serving_default
    with tempfile.TemporaryDirectory() as stage:
        tf.saved_model.save(root, stage, signatures={"serving_default": serving_default})
        converter = tf.lite.TFLiteConverter.from_saved_model(stage)
        converter.allow_custom_ops = True
        quantize(converter, quantization)
        return converter.convert()


def quantize(converter, quantization):
    """Sets `converter` up for `quantization` (one of QUANTIZATIONS)."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"--tflite_quantization={quantization!r}: use one of "
                         f"{', '.join(QUANTIZATIONS)}")
    if quantization != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]

def interpreter(model_path=None, model_content=None):
    """LiteRT's interpreter with tensorflow-text's TFLite kernels registered."""
    from ai_edge_litert.interpreter import InterpreterWithCustomOps  # the `litert` extra
    return InterpreterWithCustomOps(custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
                                    model_path=model_path, model_content=model_content)
