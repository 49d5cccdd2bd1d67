"""What every SavedModel export shares: the encoder input names and specs, in-graph packing of
segments, the vocabulary and config assets, tokenization_info, and atomic saving."""

import os

import tensorflow as tf
from absl import logging

from albert_tf.dtype_policy import float32_policy
from albert_tf.files import writing
from albert_tf.outputs import SAVED_MODEL_ENTRIES, check_output_dir
from albert_tf.tokenization import SENTENCEPIECE, FullTokenizer, load_sp_model, vocabulary_kind
from albert_tf.tracing import graph_function

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
Trackable = tf.__internal__.tracking.AutoTrackable  # tf.Module's `variables` is read-only


def encoder_input_specs(names=ENCODER_INPUTS, seq_length=None, batch_size=None):
    return {k: tf.TensorSpec([batch_size, seq_length], tf.int32, name=k) for k in names}



def pack_inputs(segments, seq_length, cls_id, sep_id, pad_id=0, first_segment_length=None):
    """`[CLS] A [SEP] (B [SEP])` + zero padding from 1 or 2 ragged [batch, (tokens)] id tensors.

    Segments are trimmed round-robin to fit `seq_length` (one token at a time from each
    segment that still has tokens), which keeps the same tokens as the original
    `_truncate_seq_pair` (pop from the longer, ties from B) and plain cut for one segment.
    With `first_segment_length` (SQuAD's max_query_length), A is cut to that many tokens and
    B gets all the places left (the original SQuAD layout's first window) instead.
    Returns int32 [batch, seq_length] `input_word_ids`, `input_mask`, `input_type_ids`.
    """
    import tensorflow_text as tf_text

    segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    segments = [tf.cast(s, tf.int32) for s in segments]
    seq_length = tf.cast(seq_length, tf.int32)
    budget = tf.maximum(seq_length - (len(segments) + 1), 0)
    if first_segment_length is None:
        trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
    else:
        segments[0] = segments[0][:, :first_segment_length]
        trimmed = tf_text.WaterfallTrimmer(max_seq_length=budget).trim(segments)
    ids, type_ids = tf_text.combine_segments(trimmed, start_of_sequence_id=cls_id,
                                             end_of_segment_id=sep_id)
    word_ids, mask = tf_text.pad_model_inputs(ids, max_seq_length=seq_length, pad_value=pad_id)
    type_ids, _ = tf_text.pad_model_inputs(type_ids, max_seq_length=seq_length, pad_value=0)
    return {"input_word_ids": tf.cast(word_ids, tf.int32), "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32)}


def pack_texts(tokenizer, texts, seq_length, pad_to_longest=False, first_segment_length=None,
               offsets=False):
    """1 or 2 string tensors [batch] → the encoder inputs: the in-graph `tokenizer`'s ids packed
    by `pack_inputs`, padded to `seq_length` or, with `pad_to_longest`, to the batch's longest
    packed text (at most `seq_length`): the same outputs at real positions for less work.
    `offsets`: returns (the encoder inputs, the last text's token-to-character map, int32
    [batch, length, 2]: `place_offsets` of `word_pieces`)."""
    segments = [tokenizer.tokenize(t) for t in texts[:-1]]
    if offsets:
        last, ranges = word_pieces(tokenizer, texts[-1])
    else:
        last = tokenizer.tokenize(texts[-1])
    segments.append(last)
    length = seq_length
    if pad_to_longest:
        longest = tf.reduce_max(tf.add_n([s.row_lengths() for s in segments]))
        length = tf.clip_by_value(tf.cast(longest, tf.int32) + len(texts) + 1, 1, seq_length)
    inputs = pack_inputs(segments, length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id,
                         first_segment_length)
    if not offsets:
        return inputs
    return inputs, place_offsets(ranges.to_tensor(-1), inputs, len(texts) - 1)


def window_spans(lengths, budget, stride):
    """The windows of `budget` tokens over texts of `lengths` tokens (int32 [texts]), every
    `stride` tokens until one reaches the end (`data.glue.window_starts`), in builtin ops: for
    each window, int32 [windows], its text, its first token and its end. `budget` and `stride`
    are one for all texts or one per text."""
    budget, stride = (tf.broadcast_to(x, tf.shape(lengths)) for x in (budget, stride))
    count = tf.maximum((lengths - budget + stride - 1) // stride, 0) + 1
    example = tf.repeat(tf.range(tf.size(lengths)), count)
    start = (tf.range(tf.size(example))
             - tf.gather(tf.cumsum(count, exclusive=True), example)) * tf.gather(stride, example)
    return example, start, tf.minimum(start + tf.gather(budget, example),
                                      tf.gather(lengths, example))


def pack_windows(tokenizer, texts, seq_length, stride):
    """One string tensor [batch] → (the encoder inputs of every text's windows, each window's
    text [windows]): a text longer than `seq_length` is read in windows of `seq_length` - 2
    tokens starting every `stride` tokens (`data.glue.window_starts`), padded to the longest
    window."""
    ids = tokenizer.tokenize(texts)
    ids = ids.merge_dims(1, -1) if ids.ragged_rank > 1 else ids
    example, start, end = window_spans(tf.cast(ids.row_lengths(), tf.int32), seq_length - 2,
                                       stride)
    first = tf.cast(tf.gather(ids.row_starts(), example), tf.int32)
    pieces = tf.gather(ids.flat_values, tf.ragged.range(first + start, first + end).flat_values)
    windows = tf.RaggedTensor.from_row_lengths(pieces, end - start)
    length = tf.clip_by_value(tf.reduce_max(end - start) + 2, 1, seq_length)
    return pack_inputs([windows], length, tokenizer.cls_id, tokenizer.sep_id,
                       tokenizer.pad_id), example


def word_pieces(tokenizer, texts, own_bytes=False):
    """Ids of string tensor [batch] split on whitespace, each word tokenized alone (the same ids
    as the whole text: both tokenizers split on whitespace first), ragged [batch, (pieces)], and
    each piece's word as a UTF-8 byte range [start, end), ragged [batch, (pieces), 2]; with
    `own_bytes`, the piece's own bytes in its word where the tokenizer can tell
    (`tokenize_words_with_offsets`)."""
    # tensorflow-text: only what serves text imports it (tests/test_layout.py).
    from albert_tf.tokenization.in_graph import split_words

    words, starts, ends = split_words(texts)
    word_start = tf.cast(starts.flat_values, tf.int32)
    word_end = tf.cast(ends.flat_values, tf.int32)
    if own_bytes:
        pieces, (first, last) = tokenizer.tokenize_words_with_offsets(words.flat_values)
        owner = pieces.value_rowids()
        at = tf.gather(word_start, owner)
        ranges = tf.stack([at + first.flat_values, at + last.flat_values], -1)
    else:
        pieces = tokenizer.tokenize(words.flat_values)  # [words, (pieces)]
        owner = pieces.value_rowids()
        ranges = tf.stack([tf.gather(word_start, owner), tf.gather(word_end, owner)], -1)
    per_text = tf.math.unsorted_segment_sum(pieces.row_lengths(), words.value_rowids(),
                                            tf.shape(texts, out_type=tf.int64)[0])
    return (tf.RaggedTensor.from_row_lengths(tf.cast(pieces.flat_values, tf.int32), per_text),
            tf.RaggedTensor.from_row_lengths(ranges, per_text))


def place_offsets(ranges, inputs, segment):
    """`ranges` ([batch, pieces, k]: one row per piece of packed segment `segment`, in order,
    any padding after) at the positions where `inputs` (the packed encoder inputs) hold that
    segment's pieces, -1 elsewhere: [batch, length, k]."""
    types, mask = inputs["input_type_ids"], inputs["input_mask"]
    positions = tf.range(tf.shape(types)[1])[None]
    # A segment's pieces: its type, before its closing [SEP] (the last of its type).
    closing = tf.reduce_max(tf.where(types == segment, positions, -1), axis=1, keepdims=True)
    inside = (types == segment) & (positions < closing) & (mask == 1)
    if segment == 0:
        inside &= positions > 0  # [CLS]
    rank = tf.cumsum(tf.cast(inside, tf.int32), axis=1) - 1
    # A row to gather from when the text has no pieces.
    ranges = tf.concat([ranges, tf.fill([tf.shape(ranges)[0], 1, tf.shape(ranges)[2]], -1)], 1)
    return tf.where(inside[..., None], tf.gather(ranges, tf.maximum(rank, 0), batch_dims=1), -1)


def float32_model(model, build=None):
    """`model`, or where it computes in bfloat16/float16 (a mixed policy), the same model rebuilt
    in float32 with its weights (`build()` builds it; by default its Keras config does): exports
    serve in full precision whatever the training policy was, and LiteRT has no bfloat16 or
    float16 MatMul kernel (a mixed-policy model converts, then fails on the device). What is
    not a Keras model (a wrapper of one, such as tasks.squad.SquadServing) is left as it is."""
    policy = getattr(model, "dtype_policy", None)
    if policy is None or policy.compute_dtype == "float32":
        return model
    with float32_policy():
        copy = build() if build else type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    return copy


def check_export_dir(export_dir, flag=None, overwrite=True, inputs=None,
                     overwrite_flag="overwrite"):
    """Refuses an export path that is an input, a file, or a directory holding anything but an
    earlier SavedModel export (which is replaced only with `overwrite`, the flag
    `overwrite_flag`)."""
    check_output_dir(export_dir, flag, what="a SavedModel export", patterns=SAVED_MODEL_ENTRIES,
                     marker="saved_model.pb", overwrite=overwrite, inputs=inputs,
                     overwrite_flag=overwrite_flag)


def save_atomically(root, export_dir, signatures):
    """Saves to a temporary sibling directory, then renames it over `export_dir` (local paths;
    a gs:// path is written in place). Only an earlier SavedModel export is ever replaced."""
    export_dir = os.fspath(export_dir).rstrip("/")
    check_export_dir(export_dir)
    parent = os.path.dirname(os.path.abspath(export_dir))
    tf.io.gfile.makedirs(parent)
    if "://" in export_dir:  # object stores cannot rename directories
        tf.saved_model.save(root, export_dir, signatures=signatures)
        return export_dir
    tmp = f"{export_dir}.tmp-{os.getpid()}"
    if tf.io.gfile.exists(tmp):
        tf.io.gfile.rmtree(tmp)
    with writing("the SavedModel export", export_dir, [tmp],
                 intact="an earlier export there is unchanged" if tf.io.gfile.exists(export_dir)
                 else ""):
        tf.saved_model.save(root, tmp, signatures=signatures)
    old = None
    if tf.io.gfile.exists(export_dir):
        old = f"{export_dir}.old-{os.getpid()}"
        tf.io.gfile.rename(export_dir, old)
    tf.io.gfile.rename(tmp, export_dir)
    if old:
        tf.io.gfile.rmtree(old)
    return export_dir


def stage_assets(stage_dir, vocabulary, config=None):
    """Copies the vocabulary (a SentencePiece *.model, or a WordPiece vocabulary named
    vocab*.txt) and albert_config.json into `stage_dir`; returns both copies' paths."""
    vocabulary = os.fspath(vocabulary)
    if not tf.io.gfile.exists(vocabulary):
        raise FileNotFoundError(f"Vocabulary not found: {vocabulary}")
    name = os.path.basename(vocabulary)
    if vocabulary_kind(vocabulary) == SENTENCEPIECE:
        with tf.io.gfile.GFile(vocabulary, "rb") as f:
            entries = load_sp_model(f.read()).get_piece_size()  # fails early on a bad file
    else:
        entries = len(FullTokenizer(vocab_file=vocabulary))
        if not (name.startswith("vocab") and name.endswith(".txt")):
            name = "vocab.txt"  # the name loaders look for among the assets
    if config is not None and entries != config.vocab_size:
        logging.warning("%s has %d entries but the model's vocab_size is %d: is it the model's "
                        "vocabulary?", vocabulary, entries, config.vocab_size)
    vocab_copy = os.path.join(stage_dir, name)
    tf.io.gfile.copy(vocabulary, vocab_copy, overwrite=True)
    config_copy = None
    if config is not None:
        config_copy = os.path.join(stage_dir, "albert_config.json")
        config.to_json_file(config_copy)
    return vocab_copy, config_copy


def attach_tokenizer_info(root, vocab_copy, do_lower_case, vocab_size, config_copy=None):
    """Assets, variables and the `tokenization_info` signature: {vocab_file (the SentencePiece
    model or WordPiece vocabulary), do_lower_case}, as TF-Hub's ALBERT and BERT modules."""
    asset = tf.saved_model.Asset(vocab_copy)
    if vocabulary_kind(vocab_copy) == SENTENCEPIECE:  # the attribute names TF-Hub modules use
        root.sp_model_file = asset
    else:
        root.vocab_file = asset
    if config_copy:
        root.albert_config_file = tf.saved_model.Asset(config_copy)
    root.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")
    root.vocab_size = tf.Variable(int(vocab_size), dtype=tf.int32, trainable=False,
                                  name="vocab_size")

    @graph_function(input_signature=[])
    def tokenization_info():
        return {"vocab_file": asset.asset_path,
                "do_lower_case": tf.identity(root.do_lower_case)}
    root.tokenization_info = tokenization_info
    return tokenization_info


def tf_variables(variables):
    """The tf.Variables behind Keras 3 variables: listing the Keras wrappers instead saves
    variables that TF1-style loaders (`saved_model_cli run`, sessions) cannot find."""
    return [getattr(v, "value", v) for v in variables]
