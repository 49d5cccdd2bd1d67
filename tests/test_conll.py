"""CoNLL files in, and the entity-level metrics conlleval (and seqeval's default mode) compute:
compared with seqeval (in its own environment: tests/side_envs.py) on tricky sequences and on
random ones, in IOB2, IOB1 and IOBES."""

import random

import pytest

from albert_tf.data.conll import label_list, read_conll, split_file
from albert_tf.tasks.conll_metrics import chunks, evaluate
import side_envs

TRICKY = [
    # I- without B- starts an entity (conlleval), at the start and after O
    (["I-PER", "I-PER", "O", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
    # a type change inside a run of I- tags splits it
    (["B-PER", "I-PER", "I-LOC", "I-LOC"], ["B-PER", "I-PER", "B-LOC", "I-LOC"]),
    # entities at the sentence end, one token long, and B- right after B-
    (["O", "B-ORG", "B-ORG", "I-ORG"], ["O", "B-ORG", "B-ORG", "I-ORG"]),
    (["B-MISC"], ["O"]),
    (["O", "O", "B-PER"], ["O", "O", "I-PER"]),
    # a prediction longer or shorter than the gold entity is wrong
    (["B-LOC", "I-LOC", "O"], ["B-LOC", "I-LOC", "I-LOC"]),
    (["B-LOC", "I-LOC", "I-LOC"], ["B-LOC", "I-LOC", "O"]),
    # right span, wrong type
    (["B-PER", "I-PER"], ["B-ORG", "I-ORG"]),
    # no entity at all in one sentence
    (["O", "O"], ["O", "O"]),
]
IOBES = [
    (["S-PER", "O", "B-LOC", "E-LOC"], ["S-PER", "O", "B-LOC", "E-LOC"]),
    (["B-ORG", "I-ORG", "E-ORG", "S-ORG"], ["B-ORG", "E-ORG", "S-ORG", "S-ORG"]),
    (["E-PER", "I-PER", "S-LOC"], ["B-PER", "E-PER", "S-LOC"]),
]


def _random_tags(rng, n, prefixes):
    return [rng.choice(["O", "O"] + [f"{p}-{t}" for p in prefixes for t in ("PER", "LOC", "ORG")])
            for _ in range(n)]


def _check_against_seqeval(*cases):
    """Each (gold, predicted) case scored by evaluate and by seqeval: the same scores overall
    and per entity type. Returns ours."""
    results = []
    for (gold, predicted), scores in zip(cases, side_envs.seqeval(*cases)):
        ours = evaluate(gold, predicted)
        for key in ("precision", "recall", "f1", "accuracy"):
            assert ours[key] == pytest.approx(scores[key], abs=1e-12), key
        kinds = [kind for kind in scores["report"] if not kind.endswith(" avg")]
        assert kinds, "seqeval found no entity type"
        for kind in kinds:
            row = scores["report"][kind]
            assert ours[f"precision_{kind}"] == pytest.approx(row["precision"], abs=1e-12), kind
            assert ours[f"recall_{kind}"] == pytest.approx(row["recall"], abs=1e-12), kind
            assert ours[f"f1_{kind}"] == pytest.approx(row["f1-score"], abs=1e-12), kind
        results.append(ours)
    return results


def test_tricky_sequences_score_as_seqeval_and_by_hand():
    gold, predicted = zip(*TRICKY)
    ours, = _check_against_seqeval((list(gold), list(predicted)))
    # By hand: gold PER(0-1) LOC(3) | PER(0-1) LOC(2-3) | ORG(1) ORG(2-3) | MISC(0) | PER(2) |
    # LOC(0-1) | LOC(0-2) | PER(0-1): 11 chunks. Predicted: the first three sentences' six
    # and PER(2) are right; LOC(0-2), LOC(0-1), ORG(0-1) are wrong; MISC is missed: 7 of 10.
    assert (ours["gold_chunks"], ours["found_chunks"], ours["correct_chunks"]) == (11, 10, 7)
    assert ours["f1"] == pytest.approx(2 * 7 / (10 + 11))
    assert ours["recall_MISC"] == 0.0  # PER: 3 found, all right, of 4: P 1, R 3/4
    assert ours["precision_PER"] == 1.0 and ours["f1_PER"] == pytest.approx(6 / 7)
    assert chunks(["I-PER", "I-PER", "O", "I-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    assert chunks(["B-PER", "I-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 1), ("LOC", 2, 3)]


def test_iobes_and_random_sequences_score_as_seqeval():
    gold, predicted = zip(*IOBES)
    cases = [(list(gold), list(predicted))]
    rng = random.Random(0)
    for prefixes in (("B", "I"), ("I",), ("B", "I", "E", "S")):
        gold = [_random_tags(rng, rng.randint(1, 12), prefixes) for _ in range(200)]
        predicted = [[t if rng.random() < 0.7 else rng.choice(["O", t[:2] + "LOC" if t != "O"
                                                              else "B-PER"]) for t in s]
                     for s in gold]
        cases.append((gold, predicted))
    _check_against_seqeval(*cases)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        evaluate([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="1 gold sentences but 2 predicted"):
        evaluate([["O"]], [["O"], ["O"]])


def test_reading_conll_files(tmp_path):
    (tmp_path / "train.txt").write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n"
        "\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n-DOCSTART- -X- O\nBRUSSELS NNP B-NP B-LOC",
        encoding="utf-8")
    (tmp_path / "valid.txt").write_text("Paris B-LOC\n", encoding="utf-8")
    sentences = read_conll(split_file(str(tmp_path), "train"))
    assert [s.tokens for s in sentences] == [["EU", "rejects", "German"],
                                             ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert [s.tags for s in sentences] == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"],
                                           ["B-LOC"]]
    assert sentences[0].lines[0] == "EU NNP B-NP B-ORG"
    assert label_list(sentences) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    assert split_file(str(tmp_path), "dev").endswith("valid.txt")
    with pytest.raises(FileNotFoundError, match=r"no test.txt in --data_dir="):
        split_file(str(tmp_path), "test")
    with pytest.raises(FileNotFoundError, match=rf"^--data_dir={tmp_path}/nerr is not a "
                                                r"directory \(it should hold train.txt\)$"):
        split_file(str(tmp_path / "nerr"), "train")
    (tmp_path / "bad.txt").write_text("token_without_tag\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt:1: a token line needs a tag"):
        read_conll(str(tmp_path / "bad.txt"))
    # A test file of tokens alone: sentences to predict (tag None); not a mix of both.
    (tmp_path / "new.txt").write_text("Anna\nmet\n\nBoris\n", encoding="utf-8")
    untagged = read_conll(str(tmp_path / "new.txt"), untagged=True)
    assert [(s.tokens, s.tags) for s in untagged] == [(["Anna", "met"], [None, None]),
                                                      (["Boris"], [None])]
    (tmp_path / "mixed.txt").write_text("Anna B-PER\nmet\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^.*mixed.txt:2: 'met': some token lines have a tag "
                                         r"in their last column and some do not$"):
        read_conll(str(tmp_path / "mixed.txt"), untagged=True)
    # Columns swapped (the tag first): refused, not a tagger trained on words as tags.
    (tmp_path / "swapped.txt").write_text("B-PER\tAnna\nO\tmet\nB-PER\tBoris\n\nO\tyes\n",
                                          encoding="utf-8")
    with pytest.raises(ValueError) as e:
        read_conll(str(tmp_path / "swapped.txt"))
    assert str(e.value) == (f"{tmp_path}/swapped.txt: the first column holds tags (B-PER, O, "
                            f"...) and the last does not: the CoNLL layout is the token first "
                            f"and its tag last")
