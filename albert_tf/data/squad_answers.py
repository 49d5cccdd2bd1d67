"""SQuAD answers from the model's logits: valid spans per window, the n-best list per question
and, for v2, the no-answer score (the original's post-processing)."""

import dataclasses

import numpy as np


@dataclasses.dataclass
class _Candidate:
    score: float
    start_logit: float
    end_logit: float
    start_char: int
    end_char: int


def _feature_offsets(features):
    return np.concatenate([[0], np.cumsum(features["lengths"])[:-1]]).astype(np.int64)


def _candidates(features, f, offset, pairs, max_answer_length):
    """Valid spans of feature f: both ends on document tokens, start at its max context,
    start <= end and at most max_answer_length tokens."""
    length = int(features["lengths"][f])
    start_char, end_char = features["host_start_char"], features["host_end_char"]
    found = []
    for s, e, s_score, e_score in pairs:
        if not (0 <= s < length and 0 <= e < length) or e < s or e - s + 1 > max_answer_length:
            continue
        if start_char[offset + s] < 0 or end_char[offset + e] < 0:
            continue
        if not features["host_max_context"][offset + s]:
            continue
        found.append(_Candidate(s_score + e_score, s_score, e_score,
                                int(start_char[offset + s]), int(end_char[offset + e])))
    return found


def _nbest(question, candidates, n_best_size, char_spans=False):
    """De-duplicated n-best (text, probability, logits; with `char_spans` the text's character
    span in the context, `start` and `end`, None for ""), best first; [""] when none."""
    seen, best = set(), []
    for c in sorted(candidates, key=lambda c: -c.score):
        raw = question.context[c.start_char:c.end_char + 1]
        text = raw.strip()
        if text in seen:
            continue
        seen.add(text)
        start = c.start_char + len(raw) - len(raw.lstrip())
        best.append((text, c, (start, start + len(text)) if text else (None, None)))
        if len(best) >= n_best_size:
            break
    if not best:
        best = [("", _Candidate(0.0, 0.0, 0.0, -1, -1), (None, None))]
    scores = np.array([c.score for _, c, _ in best], np.float64)
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    return [{"text": t, "probability": float(p), "start_logit": float(c.start_logit),
             "end_logit": float(c.end_logit),
             **({"start": span[0], "end": span[1]} if char_spans else {})}
            for (t, c, span), p in zip(best, probs)]


def postprocess(questions, features, outputs, n_best_size, max_answer_length,
                version_2_with_negative, char_spans=False):
    """(predictions {qid: best non-null text}, nbest {qid: [...]}, null_odds {qid: score} or
    None) from per-feature top-k outputs of AlbertSquad (outputs sorted by feature); with
    `char_spans` each n-best entry has its character span in the context. v2's null_odds: the
    answer_class head's lowest `cls_logits` over the question's windows, or the span head's
    lowest [CLS] span score (`null_logits`) less its best span's (BERT's score difference)."""
    offsets = _feature_offsets(features)
    by_question = {}
    for f, qi in enumerate(features["host_question"]):
        by_question.setdefault(int(qi), []).append(f)
    predictions, nbest, null_odds = {}, {}, {} if version_2_with_negative else None
    for qi, q in enumerate(questions):
        candidates, null = [], []
        for f in by_question.get(qi, []):
            if "cls_logits" in outputs:
                k2 = outputs["end_top_index"].shape[1] // outputs["start_top_index"].shape[1]
                pairs = [(int(s), int(outputs["end_top_index"][f, i * k2 + j]),
                          float(outputs["start_top_log_probs"][f, i]),
                          float(outputs["end_top_log_probs"][f, i * k2 + j]))
                         for i, s in enumerate(outputs["start_top_index"][f]) for j in range(k2)]
                null.append(float(outputs["cls_logits"][f]))
            else:
                pairs = [(int(s), int(e), float(ss), float(es))
                         for s, ss in zip(outputs["start_top_index"][f],
                                          outputs["start_top_logits"][f])
                         for e, es in zip(outputs["end_top_index"][f],
                                          outputs["end_top_logits"][f])]
                if version_2_with_negative:
                    null.append(float(outputs["null_logits"][f]))
            candidates += _candidates(features, f, offsets[f], pairs, max_answer_length)
        nbest[q.qas_id] = _nbest(q, candidates, n_best_size, char_spans)
        predictions[q.qas_id] = nbest[q.qas_id][0]["text"]
        if version_2_with_negative:
            best = max((c.score for c in candidates), default=0.0)
            null_odds[q.qas_id] = (min(null) if null else 0.0) - (
                best if "null_logits" in outputs else 0.0)
    return predictions, nbest, null_odds
