"""SQuAD EM/F1 as the official v1.1 and v2.0 evaluation scripts define them, and the v2.0
best no-answer threshold search. A gold answer with Chinese characters is scored as CMRC 2018's
evaluation scores Chinese text, which has no spaces to split words at: by characters."""

import collections
import re
import string
import unicodedata

from albert_tf.tokenization import CJK_RANGES

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_CJK = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in CJK_RANGES) + "]")


def is_chinese(text):
    return _CJK.search(text) is not None


def _is_punctuation(c):
    return c in _PUNCTUATION or unicodedata.category(c).startswith("P")


def mixed_segments(text):
    """CMRC 2018's mixed segmentation: lowercased, each Chinese character a segment, other
    text split at whitespace; punctuation (ASCII and Unicode P*) dropped."""
    segments, word = [], []
    for c in text.lower() + " ":
        chinese = _CJK.match(c) is not None
        if chinese or c.isspace() or _is_punctuation(c):
            if word:
                segments.append("".join(word))
                word = []
            if chinese:
                segments.append(c)
        else:
            word.append(c)
    return segments


def _longest_common_run(a, b):
    """Length of the longest common contiguous run of segments (CMRC's find_lcs)."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def _cmrc_f1(prediction, gold):
    pred, truth = mixed_segments(prediction), mixed_segments(gold)
    same = _longest_common_run(pred, truth)
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def normalize_answer(text):
    """Lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    if is_chinese(gold):  # CMRC 2018: equal once punctuation and spaces are gone
        return int(mixed_segments(prediction) == mixed_segments(gold))
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction, gold):
    """v1.1 token F1: no common token (also both empty) scores 0. A Chinese gold answer:
    CMRC 2018's F1 over mixed segments, from their longest common contiguous run."""
    if is_chinese(gold):
        return _cmrc_f1(prediction, gold)
    pred, truth = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((collections.Counter(pred) & collections.Counter(truth)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def f1_v2(prediction, gold):
    """v2.0 token F1: if either side is empty, 1 when both are, else 0."""
    pred, truth = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not truth:
        return float(pred == truth)
    return f1_v1(prediction, gold)


def squad_v1(golds, predictions):
    """{exact_match, f1} in percent. golds: {qid: [answer texts]}; a missing prediction is 0."""
    em = f1 = 0.0
    for qid, answers in golds.items():
        if qid not in predictions:
            continue
        em += max(exact_match(predictions[qid], a) for a in answers)
        f1 += max(f1_v1(predictions[qid], a) for a in answers)
    total = max(len(golds), 1)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}


def v2_gold(answers):
    """The v2.0 gold list: answers that normalise to something, else [""] (unanswerable)."""
    return [a for a in answers if normalize_answer(a)] or [""]


def raw_scores_v2(golds, predictions):
    """Per-question (exact, f1) dicts; golds {qid: [answer texts]} ([] means no answer)."""
    exact, f1 = {}, {}
    for qid, answers in golds.items():
        if qid not in predictions:
            continue
        gold = v2_gold(answers)
        exact[qid] = max(exact_match(predictions[qid], a) for a in gold)
        f1[qid] = max(f1_v2(predictions[qid], a) for a in gold)
    return exact, f1


def apply_threshold(scores, na_probs, has_answer, threshold):
    """A question whose no-answer score exceeds `threshold` is answered "": 1 iff it has none."""
    return {qid: float(not has_answer[qid]) if na_probs[qid] > threshold else s
            for qid, s in scores.items()}


def best_threshold(predictions, scores, na_probs, has_answer):
    """(best score in percent, threshold): the official find_best_thresh over these questions."""
    current = best = sum(1 for qid in scores if not has_answer[qid])
    threshold = 0.0
    for qid in sorted(scores, key=lambda q: na_probs[q]):
        if has_answer[qid]:
            current += scores[qid]
        else:
            current += -1 if predictions[qid] else 0
        if current > best:
            best, threshold = current, na_probs[qid]
    return 100.0 * best / max(len(scores), 1), threshold


def squad_v2(golds, predictions, na_probs=None, threshold=1.0):
    """The official v2.0 dict: exact, f1, total and HasAns_/NoAns_ splits (when present).

    predictions are non-null answer texts; `na_probs` (default 0) above `threshold` turn them
    into "" as the official --na-prob-thresh does.
    """
    na_probs = na_probs or {qid: 0.0 for qid in golds}
    has_answer = {qid: bool(v2_gold(a)[0]) for qid, a in golds.items()}
    exact, f1 = raw_scores_v2(golds, predictions)
    exact = apply_threshold(exact, na_probs, has_answer, threshold)
    f1 = apply_threshold(f1, na_probs, has_answer, threshold)
    out = _summary(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in exact if has_answer[q] == wanted]
        if qids:
            out.update({f"{prefix}_{k}": v for k, v in _summary(exact, f1, qids).items()})
    return out


def _summary(exact, f1, qids):
    total = len(qids)
    return {"exact": 100.0 * sum(exact[q] for q in qids) / max(total, 1),
            "f1": 100.0 * sum(f1[q] for q in qids) / max(total, 1), "total": total}


def tune_threshold_v2(golds, predictions, na_probs):
    """(threshold that maximises F1, that F1) on these questions, by the official search."""
    has_answer = {qid: bool(v2_gold(a)[0]) for qid, a in golds.items()}
    _, f1 = raw_scores_v2(golds, predictions)
    best_f1, threshold = best_threshold(predictions, f1, na_probs, has_answer)
    return threshold, best_f1
