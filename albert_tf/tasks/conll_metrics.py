"""Entity-level precision, recall and F1 as CoNLL's `conlleval` computes them (and seqeval's
default mode), overall and per entity type, plus token accuracy, over the chunks
`data.conll.chunks` finds: a predicted chunk is correct when a gold chunk has the same type,
start and end.
"""

import collections

from albert_tf.data.conll import chunks


def evaluate(gold, predicted):
    """Metrics over sentences: `gold` and `predicted` are lists of tag lists of equal lengths.

    Returns precision, recall, f1 (fractions; 0 where undefined, as conlleval prints 0.00),
    accuracy (tokens whose whole tag is right), the chunk counts, and per type
    `precision_<type>`, `recall_<type>`, `f1_<type>`.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    counts = collections.defaultdict(lambda: [0, 0, 0])  # type → correct, found, gold
    tokens = right = 0
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted")
        tokens += len(g)
        right += sum(a == b for a, b in zip(g, p))
        gold_chunks, found = set(chunks(g)), set(chunks(p))
        for kind, *_ in found:
            counts[kind][1] += 1
        for kind, *_ in gold_chunks:
            counts[kind][2] += 1
        for kind, *_ in found & gold_chunks:
            counts[kind][0] += 1
    total = [sum(c[k] for c in counts.values()) for k in range(3)]
    result = dict(_scores(*total), accuracy=right / tokens if tokens else 0.0,
                  correct_chunks=total[0], found_chunks=total[1], gold_chunks=total[2])
    for kind in sorted(counts):
        for name, value in _scores(*counts[kind]).items():
            result[f"{name}_{kind}"] = value
    return result


def _scores(correct, found, gold):
    precision = correct / found if found else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
