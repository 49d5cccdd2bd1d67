"""Extractive answers inside a serving SavedModel: each question and its context packed in the
doc-stride windows run_squad reads (`data.squad.convert_questions`), and each question's answer
picked as run_squad's predictions are (`data.squad_answers`): among the model's top starts and
ends, the best valid span whose start is at its most-context window, its text cut from the
context at the pieces' own bytes."""

import tensorflow as tf

from albert_tf.serving.saved_model import pack_inputs, place_offsets, window_spans, word_pieces
from albert_tf.tracing import graph_function

NONE = -1


def question_windows(tokenizer, questions, contexts, seq_length, stride, max_query_length):
    """String tensors [batch] → (the encoder inputs of every window, int32 [windows,
    seq_length]; each window's question [windows]; for each position, the context piece's
    UTF-8 byte range in its context [windows, seq_length, 2], -1 elsewhere; and whether this
    window is that piece's most-context one [windows, seq_length]).

    The question is cut to `max_query_length` pieces; the context is read in windows of
    `seq_length` - 3 - (question pieces) pieces starting every `stride` pieces (fewer when the
    window is shorter), until one reaches its end; an empty context is one empty window."""
    query = tokenizer.tokenize(questions)
    query = query.merge_dims(1, -1) if query.ragged_rank > 1 else query
    query = tf.cast(query[:, :max_query_length], tf.int32)
    pieces, ranges = word_pieces(tokenizer, contexts, own_bytes=True)
    budget = seq_length - tf.cast(query.row_lengths(), tf.int32) - 3
    example, start, end = window_spans(tf.cast(pieces.row_lengths(), tf.int32), budget,
                                       tf.minimum(stride, budget))  # data.squad.windows' step
    first = tf.cast(tf.gather(pieces.row_starts(), example), tf.int32) + start
    index = tf.ragged.range(first, first + end - start)  # each window's pieces, [windows, (n)]
    piece = index.flat_values
    window = tf.cast(index.value_rowids(), tf.int32)
    # data.squad.max_context's score, times 100 to stay whole: min(left, right) + 0.01·length.
    k, n = piece - tf.gather(first, window), tf.gather(end - start, window)
    score = 100 * tf.minimum(k, n - 1 - k) + n
    total = tf.size(pieces.flat_values)
    best = tf.math.unsorted_segment_max(score, piece, total)
    earliest = tf.math.unsorted_segment_min(
        tf.where(score == tf.gather(best, piece), window, tf.int32.max), piece, total)
    most_context = tf.cast(tf.gather(earliest, piece) == window, tf.int32)
    sizes = tf.cast(end - start, tf.int64)
    windows = tf.RaggedTensor.from_row_lengths(tf.gather(pieces.flat_values, piece), sizes)
    inputs = pack_inputs([tf.gather(query, example), windows], seq_length, tokenizer.cls_id,
                         tokenizer.sep_id, tokenizer.pad_id, first_segment_length=max_query_length)
    per_piece = tf.concat([tf.gather(ranges.flat_values, piece), most_context[:, None]], -1)
    placed = place_offsets(tf.RaggedTensor.from_row_lengths(per_piece, sizes).to_tensor(NONE),
                           inputs, 1)
    return inputs, example, placed[..., :2], placed[..., 2] == 1


def _pairs(outputs):
    """Every (start, end) of a window's top starts and ends, start-major, and its score:
    int32 starts, ends and float32 scores [windows, pairs]."""
    if "start_top_log_probs" in outputs:  # the v2 answer_class head's beam
        starts, start_scores = outputs["start_top_index"], outputs["start_top_log_probs"]
        k = tf.shape(starts)[1]
        ends = tf.reshape(outputs["end_top_index"], [tf.shape(starts)[0], k, -1])
        scores = start_scores[:, :, None] + tf.reshape(outputs["end_top_log_probs"],
                                                       tf.shape(ends))
        starts = tf.broadcast_to(starts[:, :, None], tf.shape(ends))
    else:
        scores = outputs["start_top_logits"][:, :, None] + outputs["end_top_logits"][:, None]
        starts = tf.broadcast_to(outputs["start_top_index"][:, :, None], tf.shape(scores))
        ends = tf.broadcast_to(outputs["end_top_index"][:, None], tf.shape(scores))
    flat = [tf.shape(scores)[0], -1]
    return (tf.cast(tf.reshape(starts, flat), tf.int32), tf.cast(tf.reshape(ends, flat), tf.int32),
            tf.cast(tf.reshape(scores, flat), tf.float32))


def _byte_to_char(texts, at):
    """Character index in each of `texts` of UTF-8 byte position `at`."""
    return tf.strings.length(tf.strings.substr(texts, tf.zeros_like(at), at), unit="UTF8_CHAR")


def best_answers(outputs, contexts, example, offsets, most_context, max_answer_length,
                 version_2, threshold=None):
    """Each context's answer from the SQuAD model's top-k `outputs` on its windows
    (`question_windows`' `example`, `offsets`, `most_context`): {answer (string), start and end
    (its characters in the context, -1 for none), score (start + end logit; v2 log-probability),
    and for v2 null_odds (the windows' lowest cls_logits, or the span head's lowest [CLS] span
    score less its best span's, as data.squad_answers), best_span (the best span's text, also
    where the answer is "": null_odds > `threshold`)}."""
    starts, ends, scores = _pairs(outputs)
    length = tf.shape(offsets)[1]
    inside = (starts < length) & (ends < length)
    at = tf.minimum(starts, length - 1), tf.minimum(ends, length - 1)
    first = tf.gather(offsets[..., 0], at[0], batch_dims=1)
    last = tf.gather(offsets[..., 1], at[1], batch_dims=1)
    valid = (inside & (first >= 0) & (last >= 0) & (ends >= starts)
             & (ends - starts + 1 <= max_answer_length)
             & tf.gather(most_context, at[0], batch_dims=1))
    scores = tf.where(valid, scores, tf.float32.min)  # unsorted_segment_max's empty value
    pick = tf.argmax(scores, -1, output_type=tf.int32)  # the first of equals, as a stable sort
    window_score = tf.gather(scores, pick, batch_dims=1)
    count = tf.shape(contexts)[0]
    best = tf.math.unsorted_segment_max(window_score, example, count)
    window = tf.range(tf.size(example))
    chosen = tf.math.unsorted_segment_min(
        tf.where(window_score == tf.gather(best, example), window, tf.int32.max), example,
        count)
    found = best > tf.float32.min
    chosen = tf.where(found, chosen, 0)
    pair = tf.gather(pick, chosen)
    begin = tf.where(found, tf.gather_nd(first, tf.stack([chosen, pair], -1)), 0)
    stop = tf.where(found, tf.gather_nd(last, tf.stack([chosen, pair], -1)), 0)
    raw = tf.strings.substr(contexts, begin, stop - begin)
    text = tf.strings.regex_replace(raw, r"^\s+", "")
    begin += tf.strings.length(raw) - tf.strings.length(text)
    text = tf.strings.regex_replace(text, r"\s+$", "")
    start = _byte_to_char(contexts, begin)
    end = start + tf.strings.length(text, unit="UTF8_CHAR")
    has_text = tf.strings.length(text) > 0
    out = {"answer": text, "start": tf.where(has_text, start, NONE),
           "end": tf.where(has_text, end, NONE), "score": tf.where(found, best, 0.0)}
    if version_2:
        null = outputs["cls_logits" if "cls_logits" in outputs else "null_logits"]
        odds = tf.math.unsorted_segment_min(tf.cast(null, tf.float32), example, count)
        if "null_logits" in outputs:
            odds -= out["score"]
        no_answer = odds > threshold
        out.update(answer=tf.where(no_answer, "", text), best_span=text, null_odds=odds,
                   start=tf.where(no_answer, NONE, out["start"]),
                   end=tf.where(no_answer, NONE, out["end"]))
    return out


def answer_signature(model, tokenizer, seq_length, stride, max_query_length, max_answer_length,
                     version_2, threshold=0.0):
    """The `answer` signature of a SQuAD serving export: {question, context} strings [batch] →
    `best_answers`' outputs. `model(encoder inputs)` gives the SQuAD model's top-k outputs
    (tasks.squad.SquadServing)."""
    @graph_function(input_signature=[{k: tf.TensorSpec([None], tf.string, name=k)
                                      for k in ("question", "context")}])
    def answer(texts):
        inputs, example, offsets, most_context = question_windows(
            tokenizer, texts["question"], texts["context"], seq_length, stride,
            max_query_length)
        outputs = model(inputs, training=False)
        return best_answers(outputs, texts["context"], example, offsets, most_context,
                            max_answer_length, version_2, threshold)
    return answer
