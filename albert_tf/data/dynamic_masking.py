"""Dynamic masking in tf.data: new n-gram masks for every batch, drawn with the original rule.

Pure TensorFlow graph ops (stateless random), so it runs wherever an input pipeline runs: a
host for TPU, every worker of a multi-worker job, a tf.data service. The span rule is the one
of `pretraining.select_ngram_spans`: whole-word candidates from `token_boundary`, word starts
visited in random order, n drawn with p(n) ∝ 1/n, shorter n while the span's pieces exceed
the budget, spans touching a covered word skipped; it runs as a `tf.while_loop` over the visit
order, vectorised over the batch, and stops as soon as every row has filled its budget.
"""

import tensorflow as tf

from albert_tf.data.pretraining import ngram_probabilities


def restore_original_tokens(batch):
    """Puts `masked_lm_ids` back at `masked_lm_positions` (where the weight is > 0)."""
    ids = batch["input_word_ids"]
    positions, labels = batch["masked_lm_positions"], batch["masked_lm_ids"]
    hit = (tf.one_hot(positions, tf.shape(ids)[1], dtype=tf.int32)
           * tf.cast(batch["masked_lm_weights"] > 0, tf.int32)[:, :, None])  # [B, P, L]
    restored = tf.reduce_sum(hit * labels[:, :, None], axis=1)
    was_masked = tf.reduce_max(hit, axis=1) > 0
    return dict(batch, input_word_ids=tf.where(was_masked, restored, ids))


def batch_seed(seed, *counters):
    """A stateless seed ([2] int64) from an integer seed and counters (worker, batch index)."""
    key = tf.constant([seed, 0], tf.int64)
    for counter in counters:
        key = tf.random.experimental.stateless_fold_in(key, tf.cast(counter, tf.int64))
    return key


def dynamic_mask(batch, seed, options):
    """New masks for a batch with the original tokens in `input_word_ids`.

    `seed`: a [2] integer tensor (see `batch_seed`); `options`: a `pretraining.MaskingOptions`
    (`do_permutation` is not supported). Returns the batch with new `input_word_ids`,
    `masked_lm_positions`, `masked_lm_ids` (int32) and `masked_lm_weights` (float32), the
    targets sorted by position and padded with 0 to `max_predictions_per_seq`.
    """
    if options.do_permutation:
        raise ValueError("dynamic masking does not support do_permutation")
    ids = tf.cast(batch["input_word_ids"], tf.int32)
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 5)
    words = _words(ids, batch, options)
    covered = _cover_spans(words, seeds[:2], options)
    masked = words["text"] & tf.gather(covered, tf.maximum(words["word_of"], 0), batch_dims=1)
    return dict(batch, **_replace_masked(ids, masked, seeds[2:], options))


def _words(ids, batch, o):
    """Whole words of each row and the mask budget: a text token starts a word if its boundary
    is set (or it is the first text token); a continuation piece right after [SEP] joins the
    word before, as in the original. `cum[:, w]` = text tokens before word w (w = 0 .. L +
    ngram), so that a span's size in pieces is a difference of two entries. [CLS] and [SEP]
    are read off each record (its first and last token), so any vocabulary's ids work: 2 and 3
    in the English releases, 101 and 102 in the Chinese ones."""
    real = tf.cast(batch["input_mask"], tf.bool)
    boundary = tf.cast(batch["token_boundary"], tf.bool)
    seq = tf.shape(ids)[1]
    last = tf.maximum(tf.reduce_sum(tf.cast(real, tf.int32), axis=1) - 1, 0)
    cls_id = ids[:, :1]
    sep_id = tf.gather(ids, last[:, None], batch_dims=1)
    text = real & (ids != cls_id) & (ids != sep_id)
    text_i = tf.cast(text, tf.int32)
    first = text & (tf.cumsum(text_i, axis=1) == 1)
    new_word = text & (first | boundary | (not o.do_whole_word_mask))
    word_of = tf.cumsum(tf.cast(new_word, tf.int32), axis=1) - 1        # [B, L]
    num_words = tf.reduce_sum(tf.cast(new_word, tf.int32), axis=1)      # [B]
    num_tokens = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
    if o.masked_lm_prob == 0:
        budget = tf.zeros_like(num_tokens)
    else:
        budget = tf.minimum(o.max_predictions_per_seq, tf.maximum(1, tf.cast(
            tf.round(tf.cast(num_tokens, tf.float64) * o.masked_lm_prob), tf.int32)))
    word_index = tf.range(seq + o.ngram + 1)
    word_start = tf.searchsorted(word_of, tf.tile(word_index[None, :], [tf.shape(ids)[0], 1]))
    text_before = tf.concat([tf.cumsum(text_i, axis=1, exclusive=True),
                             tf.reduce_sum(text_i, axis=1, keepdims=True)], axis=1)
    cum = tf.gather(text_before, tf.minimum(word_start, seq), batch_dims=1)
    return dict(text=text, word_of=word_of, num_words=num_words, budget=budget, cum=cum)


def _cover_spans(words, seeds, o):
    """[B, L + ngram] words covered by the n-gram spans chosen with the original rule."""
    num_words, budget, cum = words["num_words"], words["budget"], words["cum"]
    shape = tf.shape(words["word_of"])
    seq, ngram = shape[1], o.ngram
    word_pos = tf.range(seq)[None, :]
    keys = tf.random.stateless_uniform(shape, seeds[0])
    keys = tf.where(word_pos < num_words[:, None], keys, 2.0)
    visit = tf.argsort(keys, axis=1, stable=True)                       # [B, L] word indices
    cdf = tf.constant(ngram_probabilities(ngram, o.favor_shorter_ngram).cumsum()[:-1],
                      tf.float32)
    draws = tf.random.stateless_uniform(shape, seeds[1])
    ns = 1 + tf.reduce_sum(tf.cast(draws[:, :, None] >= cdf, tf.int32), axis=2)
    m = tf.range(1, ngram + 1)[None, :]
    span_pos = tf.range(seq + ngram)[None, :]
    steps = tf.reduce_max(num_words)

    def cond(k, covered, count):
        return (k < steps) & tf.reduce_any((k < num_words) & (count < budget))

    def body(k, covered, count):
        active = (k < num_words) & (count < budget)
        w = visit[:, k]
        n_eff = tf.minimum(ns[:, k], num_words - w)
        ends = tf.gather(cum, w[:, None] + tf.range(ngram + 1)[None, :], batch_dims=1)
        sizes = ends[:, 1:] - ends[:, :1]                                # pieces of 1..ngram words
        ok = (m <= n_eff[:, None]) & (sizes <= (budget - count)[:, None])
        chosen = tf.reduce_sum(tf.cast(ok, tf.int32), axis=1)          # ok is a prefix of 1..n
        size = tf.reduce_max(tf.where(ok, sizes, 0), axis=1)
        span = (span_pos >= w[:, None]) & (span_pos < (w + chosen)[:, None])
        take = active & (chosen > 0) & ~tf.reduce_any(covered & span, axis=1)
        covered = covered | (span & take[:, None])
        return k + 1, covered, count + tf.where(take, size, 0)

    covered = tf.zeros([shape[0], seq + ngram], tf.bool)
    _, covered, _ = tf.while_loop(cond, body, (tf.constant(0), covered, tf.zeros_like(budget)))
    return covered


def _replace_masked(ids, masked, seeds, o):
    """80% [MASK], 10% a random id of the whole vocabulary, 10% kept, per token; and the
    targets at the masked positions, ascending."""
    seq = tf.shape(ids)[1]
    u = tf.random.stateless_uniform(tf.shape(ids), seeds[0])
    v = tf.random.stateless_uniform(tf.shape(ids), seeds[1])
    random_ids = tf.random.stateless_uniform(tf.shape(ids), seeds[2], 0, o.vocab_size, tf.int32)
    replaced = tf.where(u < 0.8, o.mask_id, tf.where(v < 0.5, ids, random_ids))
    new_ids = tf.where(masked, replaced, ids)
    # Masked positions ascending: the top-k of (L - position) over masked tokens.
    score = tf.where(masked, seq - tf.range(seq)[None, :], 0)
    top = tf.math.top_k(score, k=o.max_predictions_per_seq, sorted=True).values
    valid = top > 0
    positions = tf.where(valid, seq - top, 0)
    labels = tf.where(valid, tf.gather(ids, positions, batch_dims=1), 0)
    return dict(input_word_ids=new_ids, masked_lm_positions=positions, masked_lm_ids=labels,
                masked_lm_weights=tf.cast(valid, tf.float32))
