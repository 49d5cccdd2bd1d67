"""LiteRT (TFLite) models that take raw text: tensorflow-text's TFLite-ready tokenizers, packing
in builtin ops, the task model, and quantization; and running them with LiteRT's interpreter."""

import dataclasses
import os
import tempfile
import time
import warnings
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from absl import logging
from tensorflow_text import tflite_registrar

from albert_tf.data.tagging import check_window, default_stride, plan_windows, window_inputs
from albert_tf.formats.litert import interpreter
from albert_tf.serving.lite_files import QUANTIZATIONS
from albert_tf.serving.saved_model import (Trackable, float32_model, place_offsets, tf_variables,
                                          window_spans)
from albert_tf.tokenization.characters import unicode_tables
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.sentencepiece_tokenizer import FastEncoder, load_sp_model, special_ids
from albert_tf.tokenization.vocabulary import (CLS, PAD, SENTENCEPIECE, SEP, UNK,
                                               WORDPIECE_SPECIALS, vocabulary_kind)
from albert_tf.tracing import graph_function

MAX_DROP = 0.01  # one point of accuracy or F1
PROGRESS_SECONDS = 30


@dataclasses.dataclass
class LiteOptions:
    """What a task export writes as LiteRT models.

    files: "both", "ids" (token ids in), "text" (strings in) or "none".
    quantization: one of QUANTIZATIONS.
    calibration: for "int8", a callable returning an iterable of encoder-input dicts (numpy int32
      [1, seq_length]): a representative sample of the task's data.
    score: a callable taking an ids-in flatbuffer and returning {metric: value} on the task's
      dev set; with it, the export reports each file's size and score beside the float32
      model's (log and `tflite_report.json`).
    metric: the score's main metric and whether higher is better: a quantized model more than
      `MAX_DROP` worse on it than the float32 one is warned about.
    """
    files: str = "both"
    quantization: str = "none"
    calibration: Optional[Callable] = None
    score: Optional[Callable] = None
    metric: Optional[tuple] = None


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
            if do_lower_case:
                logging.warning("The string-in .tflite of the WordPiece vocabulary %s reads text "
                                "through LiteRT's FastBertNormalize, which folds fullwidth forms "
                                "(，→ ,) that the model's tokenizer keeps: Chinese text with them "
                                "gets other ids, and other scores, than the SavedModel and "
                                "training (docs/export.md)", vocabulary)
        self.pad_id, self.cls_id, self.sep_id = ids[PAD], ids[CLS], ids[SEP]
        self.unk_id = ids[UNK]

    def tokenize(self, text):
        """Ids [n] of a string tensor of shape [1]."""
        return self.tokenize_words(text)[0]

    def tokenize_words(self, words):
        """(ids [pieces], pieces per string [n]) of a string tensor [n], each string tokenized
        on its own."""
        if not self.sentencepiece:
            tokens = self._bert.tokenize(words)  # [n, (pieces)]
            return tokens.flat_values, tf.cast(tokens.row_lengths(), tf.int32)
        tokens = self._sp.tokenize(self._normalizer.normalize(words))
        ids, counts = tokens.flat_values, tf.cast(tokens.row_lengths(), tf.int32)
        if not self._split:
            return ids, counts
        # Each string's count after the digit-comma table: differences of the expanded
        # lengths' running sum at the strings' ends.
        ends = tf.gather(tf.concat([[0], tf.cumsum(tf.gather(self._row_lengths, ids))], 0),
                         tf.cumsum(counts))
        counts = ends - tf.concat([[0], ends[:-1]], 0)
        return expand(ids, self._row_starts, self._row_lengths, self._pieces), counts


class WordSplitter(tf.Module):
    """A text's words as `str.split` gives them, with their UTF-8 byte ranges, in ops LiteRT runs
    (tf_text's WhitespaceTokenizer, the one such kernel, keeps the first bytes of a multi-byte
    space such as a no-break space in the word before it): the text's bytes, the spaces found by
    their byte sequences, the words cut out by offset."""

    def __init__(self, name="word_splitter"):
        super().__init__(name=name)
        self._bytes = tf_text.ByteSplitter()
        by_length = {1: [], 2: [], 3: []}  # each space's UTF-8 bytes as one big-endian number
        for space in unicode_tables()["split_spaces"]:
            encoded = space.encode()
            by_length[len(encoded)].append(int.from_bytes(encoded, "big"))
        self._spaces = [tf.constant(by_length[n], tf.int32) for n in (1, 2, 3)]

    def split(self, text):
        """(words [n] string, starts [n] int32, ends [n] int32) of a string tensor of shape [1]:
        its whitespace-separated words and their byte ranges [start, end)."""
        text = tf.reshape(text, [])
        data = tf.cast(self._bytes.split(text), tf.int32)
        size = tf.size(data)
        padded = tf.pad(data, [[0, 2]])
        key, starts_space = tf.zeros_like(data), []
        for n, spaces in enumerate(self._spaces):  # n + 1 bytes from each position
            key = key * 256 + padded[n:n + size]
            starts_space.append(tf.cast(tf.reduce_any(
                tf.equal(key[:, None], spaces[None]), 1), tf.int32))
        # Every byte of a space: where one starts, and the 1 or 2 bytes after a longer one's start.
        space = starts_space[0] + starts_space[1] + starts_space[2]
        space += tf.pad(starts_space[1] + starts_space[2], [[1, 0]])[:size]
        space += tf.pad(starts_space[2], [[2, 0]])[:size]
        word = tf.pad(tf.cast(space == 0, tf.int32), [[1, 1]])  # 0 either side of the text
        inside = word[1:-1]
        starts = tf.cast(tf.where(inside > word[:-2])[:, 0], tf.int32)
        ends = tf.cast(tf.where(inside > word[2:])[:, 0], tf.int32) + 1
        return self._bytes.split_by_offsets(text, starts, ends), starts, ends


def expand(ids, row_starts, row_lengths, pieces):
    """Each id replaced by its row of `pieces` (rows given by starts and lengths), in builtin
    ops: the digit-comma rule's table lookup."""
    lengths = tf.gather(row_lengths, ids)
    owner = tf.repeat(tf.range(tf.size(ids)), lengths)
    ends = tf.cumsum(lengths)
    offset = tf.range(tf.reduce_sum(lengths)) - tf.gather(ends - lengths, owner)
    return tf.gather(pieces, tf.gather(tf.gather(row_starts, ids), owner) + offset)


def pack_one(segments, seq_length, cls_id, sep_id, pad_id=0, first_segment_length=None,
             pad_to_seq_length=True):
    """`pack_inputs` for one example in builtin ops: `[CLS] A [SEP] (B [SEP])` from 1 or 2 id
    vectors, trimmed as the original (`_truncate_seq_pair`: pop from the longer, ties from B),
    zero-padded to `seq_length` (or not: `pad_to_seq_length=False`, for outputs that do not
    depend on the padding). Returns the encoder inputs, int32 [1, seq_length] (or [1, tokens])."""
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
    if not pad_to_seq_length:  # [1, tokens]: no work on padding
        return {"input_word_ids": ids[None], "input_mask": tf.ones_like(ids)[None],
                "input_type_ids": types[None]}
    padding = seq_length - tf.size(ids)

    def pad(x, value):
        return tf.reshape(tf.pad(x, [[0, padding]], constant_values=value), [1, seq_length])
    return {"input_word_ids": pad(ids, pad_id),
            "input_mask": pad(tf.ones_like(ids), 0),
            "input_type_ids": pad(types, 0)}


def text_model_to_tflite(model, vocabulary, do_lower_case, seq_length, keys, output_fn,
                         first_segment_length=None, quantization="none", calibration=None,
                         pad_to_seq_length=True, offsets=False, windows=None):
    """TFLite bytes of a model that takes raw strings (inputs `keys`, each shape [1]) and returns
    `output_fn(model outputs)`; `model` None: the packed encoder inputs (a preprocessor).
    `calibration` (int8): as LiteOptions', ids turned back into text for the string inputs.
    `pad_to_seq_length=False`: the model runs on the text's tokens only
    ([1, tokens] inside; 3.5x faster on short texts), for outputs that do not depend on the
    padding (a classifier's; not SQuAD's per-position logits).
    `offsets`: also `<last key>_offsets`, int32 [1, seq_length, 2]: for each position of the
    last text's pieces, the UTF-8 byte range [start, end) in that text of the whitespace-separated
    word the piece comes from (the token-to-character map of an answer span); (-1, -1) at the
    other positions. That text is then tokenized word by word (the same ids).
    `windows` (stride, pool), one text: read as the serving SavedModel reads it
    (`saved_model.pack_windows`: windows of `seq_length` - 2 tokens every `stride` tokens, all in
    one model call, padded to the longest), `pool(outputs, each window's text, 1)` giving the
    text's outputs from its windows'."""
    if windows and (len(keys) != 1 or offsets):
        raise ValueError(f"windows read one text, without offsets: got {keys}")
    model = float32_model(model)
    tokenizer = LiteTokenizer(vocabulary, do_lower_case)
    whitespace = WordSplitter()
    specs = {k: tf.TensorSpec([1], tf.string, name=k) for k in keys}

    @graph_function(input_signature=[specs])
    def serving_default(texts):
        segments = [tokenizer.tokenize(texts[k]) for k in keys[:-1]]
        if offsets:
            words, starts, ends = whitespace.split(texts[keys[-1]])
            last, counts = tokenizer.tokenize_words(words)
            owner = tf.repeat(tf.range(tf.size(counts)), counts)
            ranges = tf.stack([tf.gather(starts, owner), tf.gather(ends, owner)], -1)
        else:
            last = tokenizer.tokenize(texts[keys[-1]])
        if windows:
            stride, pool = windows
            example, start, end = window_spans(tf.size(last)[None], seq_length - 2, stride)
            inputs = window_inputs(last, start, end - start, tokenizer.cls_id, tokenizer.sep_id,
                                   tokenizer.pad_id)
            return dict(output_fn(pool(model(inputs, training=False), example, 1)))
        inputs = pack_one(segments + [last], seq_length, tokenizer.cls_id, tokenizer.sep_id,
                          tokenizer.pad_id, first_segment_length, pad_to_seq_length)
        if model is None:
            return inputs
        out = dict(output_fn(model(inputs, training=False)))
        if offsets:
            out[f"{keys[-1]}_offsets"] = place_offsets(ranges[None], inputs, len(keys) - 1)
        return out
    return convert(serving_default, quantization, calibration and _as_texts(
        calibration, FullTokenizer(vocabulary, do_lower_case), keys), tokenizer=tokenizer,
        whitespace=whitespace, variables=[] if model is None else tf_variables(model.variables))


def convert(serving_default, quantization, calibration=None, **keep):
    """TFLite bytes of `serving_default` (a tf.function; builtin ops and tensorflow-text's
    TFLite kernels) through a SavedModel, so that the file keeps a `serving_default` signature
    with named inputs and outputs; the SavedModel's root also holds `keep` (tokenizers,
    variables)."""
    root = Trackable()
    for name, value in keep.items():
        setattr(root, name, value)
    root.serving_default = serving_default
    with tempfile.TemporaryDirectory() as stage:
        tf.saved_model.save(root, stage, signatures={"serving_default": serving_default})
        converter = tf.lite.TFLiteConverter.from_saved_model(stage)
        converter.allow_custom_ops = True
        # The calibrator runs the model: it needs the text kernels too (no public setting).
        converter.target_spec._experimental_custom_op_registerers = list(
            tflite_registrar.SELECT_TFTEXT_OPS)
        quantize(converter, quantization, calibration)
        with warnings.catch_warnings():
            # TensorFlow's int8 calibrator builds a tf.lite.Interpreter, whose deprecation
            # notice is addressed to its callers: this module runs LiteRT's.
            warnings.filterwarnings("ignore", r"\s*Warning: tf\.lite\.Interpreter is deprecated",
                                    UserWarning)
            return converter.convert()


def _as_texts(calibration, tokenizer, keys):
    """`calibration`'s packed examples as the string inputs `keys`."""
    def texts():
        for inputs in calibration():
            segments = segment_texts(tokenizer, inputs["input_word_ids"][0],
                                     inputs["input_type_ids"][0], len(keys))
            yield {k: np.array([t.encode()], object) for k, t in zip(keys, segments)}
    return texts


def quantize(converter, quantization, calibration=None):
    """Sets `converter` up for `quantization` (one of QUANTIZATIONS); "int8" (int8 weights and
    activations, calibrated on `calibration()`'s inputs, float where an op has no int8 kernel)
    needs `calibration`."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"--tflite_quantization={quantization!r}: use one of "
                         f"{', '.join(QUANTIZATIONS)}")
    if quantization != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if quantization == "int8":
        if calibration is None:
            raise ValueError("--tflite_quantization=int8 calibrates on the task's data: give "
                             "training or dev data (--data_dir / --train_file / --predict_file)")
        converter.representative_dataset = calibration


def tagger_to_tflite(model, vocabulary, do_lower_case, seq_length, labels,
                     quantization="none", stride=None):
    """TFLite bytes of a tagger on one sentence (`sentences`, string [1]): words split on
    whitespace, each tokenized on its own (a word with no piece is one <unk>), cut into the
    run's overlapping windows of `seq_length - 2` pieces (`stride` apart, as data.tagging cuts
    them; all of a sentence's windows in one model call); outputs, per word, `words` (string),
    `tags` (its first piece's best tag in the window where that piece has the most context) and
    `scores` (that tag's probability).
    `quantization`: none, float16 or dynamic_int8 (int8 has no calibration texts here)."""
    if quantization == "int8":
        raise ValueError("--tflite_quantization=int8: run_ner's .tflite takes none, float16 or "
                         "dynamic_int8")
    stride = stride or default_stride(seq_length)
    check_window(seq_length, stride)
    model = float32_model(model)
    tokenizer = LiteTokenizer(vocabulary, do_lower_case)
    whitespace = WordSplitter()
    label_table = tf.constant(list(labels))

    @graph_function(input_signature=[tf.TensorSpec([1], tf.string, name="sentences")])
    def serving_default(sentences):
        words = whitespace.split(sentences)[0]
        ids, counts = tokenizer.tokenize_words(words)
        # A word with no piece is read as one <unk>: each word's row of ids, or [unk].
        ids = tf.concat([ids, [tokenizer.unk_id]], 0)
        rows = tf.maximum(counts, 1)
        starts = tf.where(counts > 0, tf.cumsum(counts, exclusive=True), tf.size(ids) - 1)
        pieces = expand(tf.range(tf.size(rows)), starts, rows, ids)
        plan = plan_windows(tf.RaggedTensor.from_row_lengths(rows, tf.reshape(tf.size(rows), [1]),
                                                             validate=False),
                            seq_length - 2, stride)
        inputs = window_inputs(pieces, plan["window_start"], plan["window_length"],
                               tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
        probabilities = tf.gather_nd(model(inputs, training=False)["probabilities"],
                                     tf.stack([plan["word_window"], plan["word_position"] + 1], 1))
        return {"words": words,
                "tags": tf.gather(label_table, tf.argmax(probabilities, -1, output_type=tf.int32)),
                "scores": tf.reduce_max(probabilities, -1)}
    return convert(serving_default, quantization, tokenizer=tokenizer, whitespace=whitespace,
                   variables=tf_variables(model.variables))


def segment_texts(tokenizer, ids, types, count):
    """The `count` segments of one packed example as text, its pieces joined back (close to
    the text they came from; for calibration)."""
    ids_of = tokenizer.special_ids()
    special = {ids_of[CLS], ids_of[SEP], ids_of[PAD]}
    out = []
    for segment in range(count):
        pieces = tokenizer.convert_ids_to_tokens(
            [i for i, t in zip(ids.tolist(), types.tolist()) if t == segment and i not in special])
        if tokenizer.sp_model:
            out.append("".join(pieces).replace("\u2581", " ").strip())
        else:
            out.append(" ".join(pieces).replace(" ##", ""))
    return out


def score_ids_model(flatbuffer, batches, prediction_outputs, total=None):
    """Runs an ids-in flatbuffer on each batch of 1 (dicts holding the encoder inputs, int32
    [1, seq_length]) and returns `prediction_outputs(batch, the file's outputs)` stacked: what
    Trainer.predict gives for the Keras model. Logs its progress (of `total` batches) every
    PROGRESS_SECONDS and its throughput at the end."""
    run = interpreter(model_content=flatbuffer, num_threads=os.cpu_count()).get_signature_runner()
    names = set(run.get_input_details())
    what = f"the .tflite model ({len(flatbuffer) / 2**20:.2f} MB)"
    of = f"/{total}" if total else ""
    rows = []
    start = last = time.monotonic()
    for batch in batches:
        got = run(**{k: np.asarray(v, np.int32) for k, v in batch.items() if k in names})
        rows.append({k: np.asarray(v) for k, v in prediction_outputs(batch, got).items()})
        now = time.monotonic()
        if now - last >= PROGRESS_SECONDS:
            logging.info("Scoring %s: %d%s examples, %.1f/s", what, len(rows), of,
                         len(rows) / (now - start))
            last = now
    if rows:
        elapsed = max(time.monotonic() - start, 1e-9)
        logging.info("Scored %s on %d examples in %.1f s (%.1f/s)", what, len(rows), elapsed,
                     len(rows) / elapsed)
    return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]} if rows else {}
