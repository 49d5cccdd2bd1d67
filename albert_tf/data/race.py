"""RACE: reading the release (one JSON file per article, or the original's all.txt JSON lines)
and the 4 × [CLS] article [SEP] question+option [SEP] features of each question."""

import dataclasses
import json
import os
import re

import numpy as np

from albert_tf.data.text_files import read_text

LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
LETTERS = "ABCD"
NUM_CHOICES = 4
ALL_FILE = "all.txt"
REQUIRED_KEYS = ("article", "questions", "options", "answers")


@dataclasses.dataclass
class Example:
    """One question of an article: its 4 options and the index of the right one (-1: not
    given, a question to predict)."""
    guid: str           # "<article id>-<question index>"
    level: str          # middle or high
    article: str
    question: str
    options: list
    label: int


def levels(high_only=False, middle_only=False):
    if high_only and middle_only:
        raise ValueError("--high_only and --middle_only exclude each other")
    return ("high",) if high_only else ("middle",) if middle_only else LEVELS


def split_dir(data_dir, split):
    """data_dir/RACE/<split>, or data_dir/<split> when data_dir is the RACE directory."""
    if split not in SPLITS:
        raise ValueError(f"unknown RACE split {split!r}; use one of {', '.join(SPLITS)}")
    for root in (os.path.join(data_dir, "RACE"), data_dir):
        if os.path.isdir(os.path.join(root, split)):
            return os.path.join(root, split)
    raise FileNotFoundError(f"RACE {split} split not found: neither {data_dir}/RACE/{split} nor "
                            f"{data_dir}/{split} is a directory (--data_dir should hold "
                            f"RACE/{{train,dev,test}}/{{middle,high}}/)")


def read_examples(data_dir, split, high_only=False, middle_only=False):
    """Every question of a split, middle before high, articles in natural file-name order.

    A level directory with all.txt is read as JSON lines (the original layout); otherwise every
    file in it is one article as released. A test article may leave out `answers` (questions
    to predict: label -1).
    """
    root = split_dir(data_dir, split)
    examples = []
    for level in levels(high_only, middle_only):
        directory = os.path.join(root, level)
        if not os.path.isdir(directory):
            hint = " (--high_only or --middle_only reads one level)" if not (
                high_only or middle_only) else ""
            raise FileNotFoundError(f"RACE {split}/{level} directory not found: "
                                    f"{directory}{hint}")
        for article, where in _articles(directory):
            examples.extend(_questions(article, where, level, split == "test"))
        if not any(e.level == level for e in examples):
            raise ValueError(f"{directory} holds no questions")
    return examples


def _articles(directory):
    """(article dict, 'file' or 'file:line') for every article of a level directory."""
    all_txt = os.path.join(directory, ALL_FILE)
    if os.path.isfile(all_txt):
        for number, line in enumerate(read_text(all_txt).splitlines(), 1):
            if line.strip():
                yield _parse(line, f"{all_txt}:{number}"), f"{all_txt}:{number}"
        return
    names = sorted((n for n in os.listdir(directory)
                    if not n.startswith(".") and os.path.isfile(os.path.join(directory, n))),
                   key=_natural)
    for name in names:
        path = os.path.join(directory, name)
        yield _parse(read_text(path), path), path


def read_questions(path):
    """The questions of `path` for predict --task=choose: RACE article files (one JSON object,
    or one a line as all.txt; answers optional) or JSON Lines of single questions (article,
    question, options: two or more; id optional). Returns ([Example], each question's carried
    fields: its id, and its answer where the file gives one)."""
    text = read_text(path)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    objects = [(whole, path)] if isinstance(whole, dict) else [
        (_parse(line, f"{path}:{number}"), f"{path}:{number}")
        for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    examples = []
    for item, where in objects:
        if "questions" in item:
            examples.extend(_questions(item, where, "", answers_optional=True))
        else:
            examples.append(_one_question(item, where, len(examples)))
    if not examples:
        raise ValueError(f"{path} holds no questions")
    return examples, [{"id": e.guid, **({"answer": LETTERS[e.label]} if e.label >= 0 else {})}
                      for e in examples]


def _one_question(item, where, index):
    """A JSON Lines question: article, question, options (2 or more strings); id optional."""
    missing = [k for k in ("article", "question", "options") if k not in item]
    if missing:
        raise ValueError(f"{where}: missing key(s) {', '.join(missing)}; a line holds a RACE "
                         f"article (article, questions, options) or one question (article, "
                         f"question, options)")
    options = item["options"]
    if not (isinstance(options, list) and len(options) >= 2 and all(
            isinstance(o, str) for o in options)):
        raise ValueError(f"{where}: options must be a list of two or more strings, got "
                         f"{options!r}")
    if not (isinstance(item["article"], str) and isinstance(item["question"], str)):
        raise ValueError(f"{where}: article and question must be strings")
    return Example(str(item.get("id", index)), "", item["article"], item["question"],
                   list(options), -1)


def _natural(name):
    """Sort key putting 2.txt before 10.txt, as the release numbers its articles."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", name)]


def _parse(text, where):
    try:
        article = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not a JSON object ({e}); a RACE article file holds one "
                         f"object, all.txt one object per line") from None
    if not isinstance(article, dict):
        raise ValueError(f"{where}: expected a JSON object, found {type(article).__name__}")
    return article


def _questions(article, where, level, answers_optional=False):
    if answers_optional and "answers" not in article and isinstance(article.get("questions"),
                                                                    list):
        article = dict(article, answers=[None] * len(article["questions"]))
    missing = [k for k in REQUIRED_KEYS if k not in article]
    name = article.get("id", os.path.basename(where))
    if missing:
        raise ValueError(f"{where} (article {name}): missing key(s) {', '.join(missing)}; a RACE "
                         f"article has {', '.join(REQUIRED_KEYS)} and id" + (
                             " (a test article may leave out answers)" if not answers_optional
                             else ""))
    questions, options, answers = (article[k] for k in ("questions", "options", "answers"))
    if not isinstance(article["article"], str):
        raise ValueError(f"{where} (article {name}): 'article' must be a string")
    for key in ("questions", "options", "answers"):
        if not isinstance(article[key], list):
            raise ValueError(f"{where} (article {name}): '{key}' must be a list")
    if not len(questions) == len(options) == len(answers):
        raise ValueError(f"{where} (article {name}): {len(questions)} questions, {len(options)} "
                         f"option lists and {len(answers)} answers; they must match")
    out = []
    for i, (question, choices, answer) in enumerate(zip(questions, options, answers)):
        if not isinstance(choices, list) or len(choices) != NUM_CHOICES or not all(
                isinstance(c, str) for c in choices):
            raise ValueError(f"{where} (article {name}, question {i}): options must be a list "
                             f"of {NUM_CHOICES} strings, got {choices!r}")
        if not isinstance(question, str):
            raise ValueError(f"{where} (article {name}, question {i}): the question must be a "
                             f"string, got {question!r}")
        if answer is None:
            out.append(Example(f"{name}-{i}", level, article["article"], question,
                               list(choices), -1))
            continue
        if not (isinstance(answer, str) and len(answer.strip()) == 1
                and answer.strip() in LETTERS):
            raise ValueError(f"{where} (article {name}, question {i}): answer {answer!r} is not "
                             f"one of {', '.join(LETTERS)}")
        out.append(Example(f"{name}-{i}", level, article["article"], question, list(choices),
                           LETTERS.index(answer.strip())))
    return out


def letter(index):
    """An option's letter: A, B, C, D, and on past D for a question with more options."""
    return chr(ord("A") + index)


def combine(question, option):
    """The original: a cloze question ("_") gets the option in its blank(s), others get it
    appended after a space."""
    if "_" in question:
        return question.replace("_", option)
    return f"{question} {option}"


def choice_ids(article_ids, qa_ids, cls_id, sep_id, max_seq_length, max_qa_length):
    """([CLS] article [SEP] qa [SEP], segment ids): qa keeps its last max_qa_length tokens, the
    article its first max_seq_length - 3 - len(qa)."""
    qa = qa_ids[-max_qa_length:] if len(qa_ids) > max_qa_length else qa_ids
    article = article_ids[:max_seq_length - 3 - len(qa)]
    ids = [cls_id] + article + [sep_id] + qa + [sep_id]
    return ids, [0] * (len(article) + 2) + [1] * (len(qa) + 1)


def check_lengths(max_seq_length, max_qa_length):
    if max_qa_length < 1 or max_seq_length - 3 - max_qa_length < 1:
        raise ValueError(f"--max_qa_length={max_qa_length} leaves no room for the article in "
                         f"--max_seq_length={max_seq_length}: it must be between 1 and "
                         f"max_seq_length - 4")


def convert_examples(examples, tokenizer, max_seq_length, max_qa_length):
    """Unpadded features in the finetuning cache layout, `lengths` [questions, 4]; an
    unanswered question's label is 0, and `answered` ("yes"/"no", a host string array) says
    which have theirs."""
    check_lengths(max_seq_length, max_qa_length)
    if not examples:
        raise ValueError("no RACE examples to convert")
    special = tokenizer.special_ids()
    cls_id, sep_id = special["[CLS]"], special["[SEP]"]
    word_ids, type_ids, lengths = [], [], []
    article_cache = {}
    for ex in examples:
        if ex.article not in article_cache:  # an article's questions come together
            article_cache = {ex.article: tokenizer.encode(ex.article)}
        article = article_cache[ex.article]
        row = []
        for option in ex.options:
            ids, types = choice_ids(article, tokenizer.encode(combine(ex.question, option)),
                                    cls_id, sep_id, max_seq_length, max_qa_length)
            word_ids.extend(ids)
            type_ids.extend(types)
            row.append(len(ids))
        lengths.append(row)
    return {"input_word_ids": np.asarray(word_ids, np.int32),
            "input_type_ids": np.asarray(type_ids, np.int8),
            "lengths": np.asarray(lengths, np.int32).reshape(-1, NUM_CHOICES),
            "label_ids": np.asarray([max(ex.label, 0) for ex in examples], np.int32),
            "answered": np.asarray(["yes" if ex.label >= 0 else "no" for ex in examples]),
            "guids": np.asarray([ex.guid for ex in examples], dtype=str),
            "levels": np.asarray([ex.level for ex in examples], dtype=str)}
