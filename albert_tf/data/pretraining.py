"""Pretraining instances: SOP segment pairs from documents, and the original n-gram masking.

The algorithm of the original `create_pretraining_data.py`, written on numpy arrays: pair
layout is a short Python loop per chunk; assembly, masking and the 80/10/10 rule are vectorised
over a batch of instances. Every random choice comes from the generators passed in.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Corpus:
    """Tokenized documents: flat token ids and word-start flags, with sentence/document offsets."""

    tokens: np.ndarray            # int32 [T]
    starts: np.ndarray            # bool [T], the SentencePiece word-start rule per token
    sentence_offsets: np.ndarray  # int64 [S + 1], token offsets of sentences
    document_offsets: np.ndarray  # int64 [D + 1], sentence offsets of documents

    @property
    def num_documents(self):
        return len(self.document_offsets) - 1

    @classmethod
    def from_documents(cls, documents, start_table=None):
        """From a list of documents, each a list of sentences (lists of ids)."""
        sentences = [s for doc in documents for s in doc if len(s)]
        lengths = [len(s) for s in sentences]
        tokens = (np.concatenate([np.asarray(s, np.int32) for s in sentences])
                  if sentences else np.zeros(0, np.int32))
        starts = (start_table[tokens] if start_table is not None
                  else np.ones(len(tokens), dtype=bool))
        doc_sizes = [sum(1 for s in doc if len(s)) for doc in documents]
        doc_sizes = [n for n in doc_sizes if n]
        return cls(tokens, starts, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                   np.concatenate([[0], np.cumsum(doc_sizes)]).astype(np.int64))


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    """The masking flags of the original builder, plus the special and vocabulary ids."""

    vocab_size: int
    mask_id: int
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    do_permutation: bool = False


def segment_pairs(corpus, document_order, max_seq_length, short_seq_prob, rng,
                  random_next_sentence=False, sop_random_negatives=True):
    """SOP pairs for every document, in `document_order`.

    Returns int64 arrays (a_start, a_end, b_start, b_end, label) of token ranges before
    truncation. `rng` is a `random.Random`. With `sop_random_negatives=False` a chunk of one
    sentence is split at a random token instead of borrowing a random document.
    """
    sent = corpus.sentence_offsets.tolist()
    docs = corpus.document_offsets.tolist()
    order = [int(d) for d in document_order]
    num_docs = len(order)
    max_num_tokens = max_seq_length - 3
    out = []
    append = out.append
    random, randint = rng.random, rng.randint
    for doc_index, d in enumerate(order):
        s_first, s_end = docs[d], docs[d + 1]
        target = max_num_tokens
        if random() < short_seq_prob:
            target = randint(2, max_num_tokens)
        chunk_start, length, i = s_first, 0, s_first
        while i < s_end:
            length += sent[i + 1] - sent[i]
            if i == s_end - 1 or length >= target:
                n = i - chunk_start + 1
                a_end = randint(1, n - 1) if n >= 2 else 1
                a_lo, a_hi = sent[chunk_start], sent[chunk_start + a_end]
                if n == 1 or (random_next_sentence and random() < 0.5):
                    if n == 1 and not sop_random_negatives:
                        if a_hi - a_lo >= 2:
                            cut = randint(a_lo + 1, a_hi - 1)
                            if random() < 0.5:
                                append((cut, a_hi, a_lo, cut, 1))
                            else:
                                append((a_lo, cut, cut, a_hi, 0))
                    else:
                        target_b = target - (a_hi - a_lo)
                        for _ in range(10):
                            r = randint(0, num_docs - 1)
                            if r != doc_index:
                                break
                        r_first, r_end = docs[order[r]], docs[order[r] + 1]
                        j = randint(r_first, r_end - 1)
                        b_lo = sent[j]
                        while sent[j + 1] - b_lo < target_b and j + 1 < r_end:
                            j += 1
                        append((a_lo, a_hi, b_lo, sent[j + 1], 1))
                        i -= n - a_end  # put the unused sentences back
                elif not random_next_sentence and random() < 0.5:
                    append((a_hi, sent[i + 1], a_lo, a_hi, 1))
                else:
                    append((a_lo, a_hi, a_hi, sent[i + 1], 0))
                chunk_start, length = i + 1, 0
            i += 1
    pairs = np.array(out, dtype=np.int64).reshape(-1, 5)
    return tuple(pairs.T)


def truncate_pairs(a_start, a_end, b_start, b_end, max_num_tokens, rng):
    """The original truncation, vectorised: trim the longer side one token at a time, each from
    the front or the back with probability 0.5. Returns (a_start, a_len, b_start, b_len)."""
    la, lb = a_end - a_start, b_end - b_start
    excess = np.maximum(la + lb - max_num_tokens, 0)
    first = np.minimum(excess, np.abs(la - lb))  # until both sides are equal
    rest = excess - first                        # then alternately, B first on a tie
    a_cut = np.where(la > lb, first, 0) + rest // 2
    b_cut = np.where(la > lb, 0, first) + rest - rest // 2
    a_front = rng.binomial(a_cut, 0.5)
    b_front = rng.binomial(b_cut, 0.5)
    return a_start + a_front, la - a_cut, b_start + b_front, lb - b_cut


def assemble(corpus, a_start, a_len, b_start, b_len, max_seq_length, cls_id, sep_id):
    """[CLS] A [SEP] B [SEP] batches: (ids, word starts, segment ids, special flags, lengths)."""
    pos = np.arange(max_seq_length)[None, :]
    la, lb = a_len[:, None], b_len[:, None]
    in_a = (pos >= 1) & (pos <= la)
    in_b = (pos >= la + 2) & (pos <= la + lb + 1)
    src = np.where(in_a, a_start[:, None] + pos - 1, b_start[:, None] + pos - la - 2)
    src = np.where(in_a | in_b, src, 0)
    text = in_a | in_b
    ids = np.where(text, corpus.tokens[src], 0).astype(np.int32)
    starts = text & corpus.starts[src]
    special = (pos == 0) | (pos == la + 1) | (pos == la + lb + 2)
    ids[:, 0] = cls_id
    ids[special & (pos > 0)] = sep_id
    segment_ids = ((pos >= la + 2) & (pos <= la + lb + 2)).astype(np.int32)
    return ids, starts, segment_ids, special, (a_len + b_len + 3)


def ngram_probabilities(ngram, favor_shorter_ngram=True):
    """p(n) ∝ 1/n for n = 1..ngram (reversed when not favouring shorter n-grams)."""
    p = 1.0 / np.arange(1, ngram + 1)
    p /= p.sum()
    return p if favor_shorter_ngram else p[::-1].copy()


def select_ngram_spans(word_lengths, num_words, budget, pvals, rng, covered=None):
    """The original n-gram span rule on whole words, for a batch.

    Visits word starts in random order; at each draws n with `pvals`, falls back to shorter
    n-grams while the span's pieces exceed the remaining budget, and skips spans touching an
    already covered word. Returns (covered words bool [B, W + ngram], pieces chosen [B]).
    """
    batch, width = word_lengths.shape
    ngram = len(pvals)
    rows_all = np.arange(batch)
    cum = np.zeros((batch, width + ngram + 1), dtype=np.int64)
    np.cumsum(word_lengths, axis=1, out=cum[:, 1:width + 1])
    cum[:, width + 1:] = cum[:, width:width + 1]
    covered = (np.zeros((batch, width + ngram), dtype=bool) if covered is None
               else covered.copy())
    count = np.zeros(batch, dtype=np.int64)
    if width == 0:
        return covered, count
    keys = rng.random((batch, width))
    keys[np.arange(width)[None, :] >= num_words[:, None]] = 2.0
    visit = np.argsort(keys, axis=1, kind="stable")
    ns = 1 + np.searchsorted(np.cumsum(pvals)[:-1], rng.random((batch, width)), side="right")
    for k in range(width):
        rows = rows_all[(k < num_words) & (count < budget)]
        if not len(rows):
            break
        w = visit[rows, k]
        room = num_words[rows] - w
        n_eff = np.minimum(ns[rows, k], room)
        left = budget[rows] - count[rows]
        base = cum[rows, w]
        chosen = np.zeros(len(rows), dtype=np.int64)
        size = np.zeros(len(rows), dtype=np.int64)
        for m in range(ngram, 0, -1):
            c = cum[rows, w + m] - base
            ok = (chosen == 0) & (m <= n_eff) & (c <= left)
            chosen[ok] = m
            size[ok] = c[ok]
        hit = np.zeros(len(rows), dtype=bool)
        for j in range(ngram):
            hit |= (j < chosen) & covered[rows, w + j]
        take = (chosen > 0) & ~hit
        for j in range(ngram):
            t = take & (j < chosen)
            covered[rows[t], w[t] + j] = True
        count[rows[take]] += size[take]
    return covered, count


def mask_batch(ids, starts, special, lengths, options, rng):
    """The original masked-LM predictions for a batch of assembled instances.

    Returns (input ids with masks applied, token_boundary, masked positions, masked ids,
    masked weights) with the targets padded to max_predictions_per_seq (doubled with
    do_permutation).
    """
    batch, seq = ids.shape
    o = options
    pos = np.arange(seq)[None, :]
    text = (pos < lengths[:, None]) & ~special
    token_boundary = (special | (text & starts)).astype(np.int32)
    first = text & (np.cumsum(text, axis=1) == 1)
    new_word = text & (first | starts | (not o.do_whole_word_mask))
    word_id = np.cumsum(new_word, axis=1) - 1
    num_words = new_word.sum(1)
    width = int(num_words.max(initial=0))
    rows, cols = np.nonzero(text)
    word_lengths = np.bincount(rows * width + word_id[rows, cols],
                               minlength=batch * width).reshape(batch, width)

    targets = o.max_predictions_per_seq * (1 + int(o.do_permutation))
    if o.masked_lm_prob == 0:
        budget = np.zeros(batch, dtype=np.int64)
    else:
        budget = np.minimum(o.max_predictions_per_seq,
                            np.maximum(1, np.rint(lengths * o.masked_lm_prob))).astype(np.int64)
    pvals = ngram_probabilities(o.ngram, o.favor_shorter_ngram)
    covered, _ = select_ngram_spans(word_lengths, num_words, budget, pvals, rng)
    word_of = np.where(text, word_id, 0)
    masked = text & covered[np.arange(batch)[:, None], word_of]

    out = ids.copy()
    r, c = np.nonzero(masked)
    u, v = rng.random(len(r)), rng.random(len(r))
    random_ids = rng.integers(0, o.vocab_size, len(r))
    out[r, c] = np.where(u < 0.8, o.mask_id, np.where(v < 0.5, ids[r, c], random_ids))

    chosen = masked
    if o.do_permutation and o.masked_lm_prob != 0:
        covered2, _ = select_ngram_spans(word_lengths, num_words, budget, pvals, rng, covered)
        permuted = text & covered2[np.arange(batch)[:, None], word_of] & ~masked
        pr, pc = np.nonzero(permuted)
        order = np.argsort(pr + rng.random(len(pr)), kind="stable")
        out[pr, pc] = out[pr[order], pc[order]]
        chosen = masked | permuted

    r, c = np.nonzero(chosen)
    rank = np.arange(len(r)) - np.searchsorted(r, r, side="left")
    positions = np.zeros((batch, targets), dtype=np.int64)
    label_ids = np.zeros((batch, targets), dtype=np.int64)
    weights = np.zeros((batch, targets), dtype=np.float32)
    positions[r, rank] = c
    label_ids[r, rank] = ids[r, c]
    weights[r, rank] = 1.0
    return out, token_boundary, positions, label_ids, weights


def build_features(corpus, pairs, max_seq_length, cls_id, sep_id, options, rng):
    """Record features for a batch of (truncated) pairs: a_start, a_len, b_start, b_len, label."""
    a_start, a_len, b_start, b_len, label = pairs
    ids, starts, segment_ids, special, lengths = assemble(
        corpus, a_start, a_len, b_start, b_len, max_seq_length, cls_id, sep_id)
    input_ids, token_boundary, positions, label_ids, weights = mask_batch(
        ids, starts, special, lengths, options, rng)
    input_mask = (np.arange(max_seq_length)[None, :] < lengths[:, None]).astype(np.int32)
    return {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "token_boundary": token_boundary,
        "masked_lm_positions": positions,
        "masked_lm_ids": label_ids,
        "masked_lm_weights": weights,
        "next_sentence_labels": label.reshape(-1, 1),
    }
