"""Token classification input: each word split into the model's pieces, sentences cut into
windows of at most `max_seq_length - 2` pieces between [CLS] and [SEP] (overlapping by
`max_seq_length - 2 - stride` pieces when a sentence is longer), and each word scored once, on
its first piece, in the window where that piece has the most context on its shorter side
(SQuAD's max-context rule; ties to the earlier window).

The planning is TensorFlow ops on ragged tensors, so the feature builder (eagerly, over a whole
file) and the serving graph (per call) cut windows the same way.
"""

import numpy as np
import tensorflow as tf

from albert_tf.tokenization import UNK

# Features: tag_ids is the training label + 1 (0: no label there), tag_mask marks each word's
# scored first piece; both ride along input_word_ids (data.features.SEQUENCE_KEYS).
TAG_KEYS = ("tag_ids", "tag_mask")


def default_stride(max_seq_length):
    """Half a window: every piece has at least a quarter window of context on each side when
    a sentence spans several windows."""
    return max(1, (max_seq_length - 2) // 2)


def check_window(max_seq_length, stride):
    if max_seq_length < 3:
        raise ValueError(f"--max_seq_length={max_seq_length} leaves no room for a word")
    if not 1 <= stride <= max_seq_length - 2:
        raise ValueError(f"--window_stride={stride} must be between 1 and --max_seq_length - 2 = "
                         f"{max_seq_length - 2}, so that the windows cover every piece")


def plan_windows(piece_counts, window, stride):
    """Where each window starts and which window scores each word.

    piece_counts: RaggedTensor [sentences, (words)] of pieces per word (each at least 1);
    window: pieces per window; stride: pieces between window starts (1 ≤ stride ≤ window).
    Returns int32 tensors: per window `window_sentence`, `window_start` and `window_length`
    (in pieces of its sentence); per word, flat over sentences, `word_window` (a window index)
    and `word_position` (its first piece's offset in that window, [CLS] not counted).
    """
    counts = tf.cast(piece_counts, tf.int32)
    totals = tf.reduce_sum(counts, axis=1)  # pieces per sentence
    windows = 1 + tf.maximum(0, (totals - window + stride - 1) // stride)
    window_sentence = tf.repeat(tf.range(tf.size(windows)), windows)
    first_window = tf.cumsum(windows, exclusive=True)
    window_start = (tf.range(tf.size(window_sentence))
                    - tf.gather(first_window, window_sentence)) * stride
    window_length = tf.minimum(window, tf.gather(totals, window_sentence) - window_start)

    word_sentence = tf.cast(counts.value_rowids(), tf.int32)
    first_piece = (tf.cumsum(counts.flat_values, exclusive=True)
                   - tf.gather(tf.cumsum(totals, exclusive=True), word_sentence))
    # The context of the first piece p in window k is min(p - kS, min(kS + L, n) - 1 - p): it
    # grows with k (or stays, once the window reaches the end) up to the first k where the right
    # side catches up with the left, then shrinks. The smallest best k is therefore among: the
    # first window holding p, the first reaching the end, and the two around that crossing.
    def ceil_div(a, b):
        return -((-a) // b)
    n = tf.gather(totals, word_sentence)
    last = tf.gather(windows, word_sentence) - 1
    low = tf.maximum(0, ceil_div(first_piece - window + 1, stride))
    high = tf.minimum(last, first_piece // stride)
    cross = tf.maximum(ceil_div(2 * first_piece - window + 1, 2 * stride),
                       ceil_div(2 * first_piece - n + 1, stride))
    candidate = tf.clip_by_value(
        tf.stack([low, ceil_div(n - window, stride), cross - 1, cross], axis=1),
        tf.expand_dims(low, 1), tf.expand_dims(high, 1))
    start = candidate * stride
    end = tf.minimum(start + window, tf.expand_dims(n, 1)) - 1
    piece = tf.expand_dims(first_piece, 1)
    context = tf.minimum(piece - start, end - piece)
    most = tf.reduce_max(tf.concat([windows, [1]], 0))
    key = context * most + (most - 1 - candidate)  # ties: the earlier window
    best = tf.gather(candidate, tf.argmax(key, axis=1, output_type=tf.int32), batch_dims=1)
    return {"window_sentence": window_sentence, "window_start": window_start,
            "window_length": window_length,
            "word_window": tf.gather(first_window, word_sentence) + best,
            "word_position": first_piece - best * stride}


def window_inputs(pieces, begin, length, cls_id, sep_id, pad_id=0):
    """The encoder inputs of windows over `pieces` (int32 [n]): row k is `[CLS]`, the
    `length[k]` pieces from `begin[k]`, `[SEP]`, then `pad_id` up to the longest row; int32
    `input_word_ids`, `input_mask`, `input_type_ids` [windows, longest + 2]. Builtin ops only
    (LiteRT runs them)."""
    length = tf.expand_dims(length, 1)
    position = tf.range(tf.reduce_max(length) + 2)[None]
    # (A padding id at the end: a sentence without words has a window of no pieces.)
    pieces = tf.concat([pieces, [pad_id]], 0)
    index = tf.clip_by_value(tf.expand_dims(begin, 1) + position - 1, 0, tf.size(pieces) - 1)
    ids = tf.where(position == 0, cls_id,
                   tf.where(position <= length, tf.gather(pieces, index),
                            tf.where(position == length + 1, sep_id, pad_id)))
    return {"input_word_ids": ids, "input_mask": tf.cast(position <= length + 1, tf.int32),
            "input_type_ids": tf.zeros_like(ids)}


def window_begins(piece_ids, plan):
    """Where each planned window starts in `piece_ids.flat_values` (piece_ids: a RaggedTensor
    [sentences, (pieces)])."""
    offsets = tf.cast(piece_ids.row_starts(), tf.int32)
    return tf.gather(offsets, plan["window_sentence"]) + plan["window_start"]


def window_ids(piece_ids, plan, cls_id, sep_id):
    """RaggedTensor [windows, (length + 2)]: `[CLS] pieces [SEP]` of each planned window, from
    piece_ids, a RaggedTensor [sentences, (pieces)]."""
    inputs = window_inputs(tf.cast(piece_ids.flat_values, tf.int32),
                           window_begins(piece_ids, plan), plan["window_length"], cls_id,
                           sep_id)
    return tf.RaggedTensor.from_tensor(inputs["input_word_ids"],
                                       lengths=plan["window_length"] + 2)


def word_pieces(tokenizer, words):
    """Piece ids of each word (a list of lists; an empty result becomes [UNK], so that every
    word has a first piece), as `tokenizer` (a FullTokenizer) splits it on its own."""
    unk = tokenizer.special_ids()[UNK]
    ids = tokenizer.encode_lines([tokenizer.prepare_line(w) for w in words])
    return [x or [unk] for x in ids]


def convert_sentences(sentences, tokenizer, max_seq_length, labels, stride=None):
    """Features (data.features layout) of CoNLL sentences: one example per window, with
    `tag_ids`/`tag_mask` on each word's scored first piece and, for reading predictions back,
    `host_word_window`, `host_word_position` (flat over words, [CLS] counted) and
    `host_sentence_words`. Tags not in `labels` are scored but carry no label (tag id 0)."""
    stride = stride or default_stride(max_seq_length)
    check_window(max_seq_length, stride)
    ids = {label: i + 1 for i, label in enumerate(labels)}
    words = [w for s in sentences for w in s.tokens]
    pieces = word_pieces(tokenizer, words)
    word_counts = np.array([len(s.tokens) for s in sentences], np.int64)
    piece_counts = np.array([len(p) for p in pieces], np.int64)
    flat = np.fromiter((i for p in pieces for i in p), np.int32,
                       count=int(piece_counts.sum()))
    by_sentence = tf.RaggedTensor.from_row_lengths(piece_counts, word_counts)
    plan = plan_windows(by_sentence, max_seq_length - 2, stride)
    special = tokenizer.special_ids()
    sentence_pieces = tf.RaggedTensor.from_row_lengths(
        flat, tf.reduce_sum(by_sentence, axis=1))
    inputs = window_ids(sentence_pieces, plan, special["[CLS]"], special["[SEP]"])
    lengths = inputs.row_lengths().numpy()
    window = plan["word_window"].numpy()
    position = plan["word_position"].numpy() + 1
    at = np.concatenate([[0], np.cumsum(lengths)[:-1]])[window] + position
    tag_ids = np.zeros(int(lengths.sum()), np.int16)
    tag_mask = np.zeros_like(tag_ids, np.int8)
    tag_ids[at] = [ids.get(tag, 0) for s in sentences for tag in s.tags]
    tag_mask[at] = 1
    return {"input_word_ids": inputs.flat_values.numpy(),
            "input_type_ids": np.zeros(len(tag_ids), np.int8),
            "tag_ids": tag_ids, "tag_mask": tag_mask, "lengths": lengths.astype(np.int32),
            "host_word_window": window.astype(np.int32),
            "host_word_position": position.astype(np.int32),
            "host_sentence_words": word_counts.astype(np.int32)}


def words_of_windows(features, per_position):
    """Per sentence, the values of `per_position` ([windows, length] arrays from the model,
    one row per window in order) at each word's scored first piece."""
    values = per_position[features["host_word_window"], features["host_word_position"]]
    return np.split(values, np.cumsum(features["host_sentence_words"])[:-1])
