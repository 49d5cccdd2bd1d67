"""C3 (CLUE's Chinese multiple-choice reading comprehension) as its c3_public download holds it:
d-{train,dev}.json (dialogues), m-{train,dev}.json (mixed genres), test1.1.json (test1.0.json)
without answers; each file a JSON list of [context lines, [{question, choice, answer}], id].
Read as RACE examples: the context is the article, and a question with fewer than 4 choices is
padded with the placeholder CLUE's baseline uses."""

import hashlib
import json
import os

from albert_tf.data import race
from albert_tf.data.text_files import read_text

LEVELS = ("dialogue", "mixed")
_PREFIXES = (("d", "dialogue"), ("m", "mixed"))
PLACEHOLDER = "无效答案"  # "invalid answer": the baseline's padding choice
TEST_FILES = ("test1.1.json", "test1.0.json")
SUBMISSION = {"test1.1.json": "c311_predict.json", "test1.0.json": "c310_predict.json"}


def split_files(data_dir, split):
    """[(path, level)] of a split: the d- and m- files (c3-d-… as the PyTorch baseline renames
    them), or for test the first of test1.1.json, test1.0.json."""
    if split not in race.SPLITS:
        raise ValueError(f"unknown C3 split {split!r}; use one of {', '.join(race.SPLITS)}")
    if split == "test":
        for name in TEST_FILES:
            if os.path.isfile(os.path.join(data_dir, name)):
                return [(os.path.join(data_dir, name), "test")]
    found = []
    for prefix, level in _PREFIXES:
        for name in (f"{prefix}-{split}.json", f"c3-{prefix}-{split}.json"):
            if os.path.isfile(os.path.join(data_dir, name)):
                found.append((os.path.join(data_dir, name), level))
                break
    if not found:
        expected = "d-{0}.json and m-{0}.json".format(split) + (
            f", or {' or '.join(TEST_FILES)}" if split == "test" else "")
        raise FileNotFoundError(f"C3 {split} files not found in {data_dir}: expected {expected} "
                                f"(--data_dir is the unpacked c3_public.zip)")
    return found


def submission_name(data_dir):
    """The file CLUE expects the test predictions in: c311_predict.json for test1.1.json."""
    path = split_files(data_dir, "test")[0][0]
    return SUBMISSION.get(os.path.basename(path), "c3_predict.json")


def digest(data_dir, split):
    hasher = hashlib.sha256()
    for path, level in split_files(data_dir, split):
        with open(path, "rb") as f:
            hasher.update(f"{level}/{os.path.basename(path)}\0".encode() + f.read() + b"\0")
    return hasher.hexdigest()


def read_examples(data_dir, split):
    """Every question of a split, in file order; an unanswered (test) question has label -1."""
    examples = []
    for path, level in split_files(data_dir, split):
        text = read_text(path)
        try:
            items = json.loads(text)
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a JSON list of [context lines, questions, id]")
        for n, item in enumerate(items):
            examples.extend(_questions(item, f"{path}: item {n}", level))
    if not examples:
        raise ValueError(f"no C3 questions in the {split} files of {data_dir}")
    return examples


def read_questions(path):
    """predict --task=choose's questions: those of a C3 file (a JSON list of [context lines,
    questions, id]) with each question's own choices, unpadded; else what
    `race.read_questions` reads. Returns ([Example], each question's carried fields)."""
    try:
        items = json.loads(read_text(path))
    except ValueError:
        items = None
    if not isinstance(items, list):
        return race.read_questions(path)
    examples = []
    for n, item in enumerate(items):
        for e in _questions(item, f"{path}: item {n}", ""):
            e.options = [o for o in e.options if o != PLACEHOLDER]
            examples.append(e)
    if not examples:
        raise ValueError(f"{path} holds no questions")
    return examples, [{"id": e.guid, **({"answer": race.letter(e.label)} if e.label >= 0
                                        else {})} for e in examples]


def _questions(item, where, level):
    if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], list)
            and isinstance(item[1], list)):
        raise ValueError(f"{where}: expected [context lines, questions, id], got "
                         f"{json.dumps(item, ensure_ascii=False)[:80]}")
    lines, questions, item_id = item
    context = "\n".join(str(line) for line in lines)
    out = []
    for j, q in enumerate(questions):
        here = f"{where} ({item_id}), question {j}"
        choices = q.get("choice") if isinstance(q, dict) else None
        if not (isinstance(choices, list) and 1 <= len(choices) <= race.NUM_CHOICES
                and all(isinstance(c, str) for c in choices)):
            raise ValueError(f"{here}: 'choice' must be a list of 1 to {race.NUM_CHOICES} "
                             f"strings, got {choices!r}")
        answer = q.get("answer")
        if answer is not None and answer not in choices:
            raise ValueError(f"{here}: the answer {answer!r} is not one of its choices "
                             f"{choices!r}")
        out.append(race.Example(
            f"{item_id}-{j}", level, context, str(q.get("question", "")),
            choices + [PLACEHOLDER] * (race.NUM_CHOICES - len(choices)),
            -1 if answer is None else choices.index(answer)))
    return out
