"""RACE reading (released per-article files and all.txt), option handling, truncation, errors,
and the multiple-choice model. `write_race` is also used by test_run_race."""

import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import race

WORDS = ("the cat sat on a mat while dog ran far away and bird sang in tree near house by river "
         "old man saw young girl walk home slowly today").split()
COLORS = ("red", "blue", "green", "yellow", "purple", "orange")
ANIMALS = ("cow", "pig", "hen", "fox", "owl", "rat")  # distractors, never in an article
QUESTIONS = ("which color is in the story?", "the story talks about the color _ .")


def make_article(rng, index, level, questions=2):
    """An article naming one color; the right option of each question is that color, the
    others are animals: learnable from the options in a few hundred tiny-model steps."""
    color = rng.choice(COLORS)
    words = rng.choices(WORDS, k=rng.randint(4, 10))
    words.insert(rng.randint(0, len(words)), color)
    options, answers = [], []
    for _ in range(questions):
        choices = rng.sample(ANIMALS, 3)
        answer = rng.randrange(4)
        choices.insert(answer, color)
        options.append(choices)
        answers.append("ABCD"[answer])
    return {"answers": answers, "options": options,
            "questions": [rng.choice(QUESTIONS) for _ in range(questions)],
            "article": " ".join(words) + " .", "id": f"{level}{index}.txt"}


def write_race(root, seed=0, sizes=None):
    """root/RACE/{split}/{middle,high}/<n>.txt as released; returns {split: {level: articles}}."""
    sizes = sizes or {"train": 60, "dev": 12, "test": 12}
    rng = random.Random(seed)
    out = {}
    for split, n in sizes.items():
        out[split] = {}
        for level in ("middle", "high"):
            directory = os.path.join(root, "RACE", split, level)
            os.makedirs(directory, exist_ok=True)
            out[split][level] = [make_article(rng, i, level) for i in range(n)]
            for i, a in enumerate(out[split][level]):
                with open(os.path.join(directory, f"{i}.txt"), "w") as f:
                    json.dump(a, f)
    return out


def corpus_lines(rng, n=1500):
    return [" ".join(rng.choices(WORDS + list(COLORS + ANIMALS), k=rng.randint(4, 14))) + " "
            + rng.choice(QUESTIONS) for _ in range(n)]


ARTICLE = {"article": "Tom has a red ball.", "questions": ["What color is the ball?",
                                                          "Tom has a _ ball."],
           "options": [["red", "blue", "green", "pink"], ["big", "red", "old", "new"]],
           "answers": ["A", "B"], "id": "middle7.txt"}


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_reads_released_layout_and_levels(tmp_path):
    data = write_race(str(tmp_path), sizes={"dev": 3})
    examples = race.read_examples(str(tmp_path), "dev")
    assert len(examples) == 12 and [e.level for e in examples] == ["middle"] * 6 + ["high"] * 6
    first = data["dev"]["middle"][0]
    assert examples[0].guid == "middle0.txt-0" and examples[1].guid == "middle0.txt-1"
    assert examples[0].article == first["article"]
    assert examples[1].options == first["options"][1]
    assert examples[1].label == "ABCD".index(first["answers"][1])
    high = race.read_examples(str(tmp_path), "dev", high_only=True)
    assert [e.guid for e in high] == [e.guid for e in examples[6:]]
    assert {e.level for e in race.read_examples(str(tmp_path / "RACE"), "dev",
                                                middle_only=True)} == {"middle"}
    with pytest.raises(ValueError, match="exclude each other"):
        race.read_examples(str(tmp_path), "dev", high_only=True, middle_only=True)


def test_reads_all_txt_json_lines(tmp_path):
    other = dict(ARTICLE, id="middle8.txt", answers=["D", "C"])
    _write(str(tmp_path / "RACE/test/middle/all.txt"),
           json.dumps(ARTICLE) + "\n\n" + json.dumps(other) + "\n")
    # A per-article file beside all.txt is not read twice.
    _write(str(tmp_path / "RACE/test/middle/1.txt"), json.dumps(ARTICLE))
    examples = race.read_examples(str(tmp_path), "test", middle_only=True)
    assert [(e.guid, e.label) for e in examples] == [
        ("middle7.txt-0", 0), ("middle7.txt-1", 1), ("middle8.txt-0", 3), ("middle8.txt-1", 2)]


def test_a_byte_order_mark_and_windows_line_ends_are_read_through(tmp_path):
    """Article files saved by Windows editors (a UTF-8 BOM, CRLF): the same questions."""
    _write(str(tmp_path / "RACE/dev/high/1.txt"), "\ufeff" + json.dumps(ARTICLE))
    other = dict(ARTICLE, id="middle8.txt")
    _write(str(tmp_path / "RACE/dev/middle/all.txt"),
           "\ufeff" + json.dumps(ARTICLE) + "\r\n" + json.dumps(other) + "\r\n")
    examples = race.read_examples(str(tmp_path), "dev")
    assert [e.guid for e in examples] == ["middle7.txt-0", "middle7.txt-1", "middle8.txt-0",
                                          "middle8.txt-1", "middle7.txt-0", "middle7.txt-1"]
    assert examples[-1].options == ARTICLE["options"][1] and examples[0].article == (
        ARTICLE["article"])


def test_option_combination():
    assert race.combine("Tom has a _ ball.", "red") == "Tom has a red ball."
    assert race.combine("What color is the ball?", "red") == "What color is the ball? red"


def test_truncation_keeps_last_qa_and_first_article_tokens():
    article, qa = list(range(100, 140)), list(range(200, 220))
    ids, types = race.choice_ids(article, qa, 2, 3, max_seq_length=32, max_qa_length=8)
    # qa: its last 8 tokens; article: its first 32 - 3 - 8 = 21.
    assert ids == [2] + article[:21] + [3] + qa[-8:] + [3]
    assert types == [0] * 23 + [1] * 9 and len(ids) == 32
    ids, types = race.choice_ids(article[:5], qa[:4], 2, 3, 32, 8)
    assert ids == [2] + article[:5] + [3] + qa[:4] + [3] and len(types) == 12
    with pytest.raises(ValueError, match="max_qa_length=29 leaves no room"):
        race.check_lengths(32, 29)


class _Tokenizer:
    """Whitespace ids: enough to check the feature layout."""

    def __init__(self):
        self.vocab = {"[CLS]": 2, "[SEP]": 3}
        self.do_lower_case = True

    def special_ids(self):
        return self.vocab

    def encode(self, text):
        return [self.vocab.setdefault(w, len(self.vocab) + 10) for w in text.lower().split()]


def test_convert_examples_layout(tmp_path):
    _write(str(tmp_path / "RACE/dev/high/a.json"), json.dumps(ARTICLE))
    examples = race.read_examples(str(tmp_path), "dev", high_only=True)
    tok = _Tokenizer()
    f = race.convert_examples(examples, tok, max_seq_length=12, max_qa_length=4)
    assert f["lengths"].shape == (2, 4) and list(f["label_ids"]) == [0, 1]
    assert list(f["guids"]) == ["middle7.txt-0", "middle7.txt-1"]
    assert list(f["levels"]) == ["high", "high"]
    assert f["lengths"].sum() == len(f["input_word_ids"]) == len(f["input_type_ids"])
    # Question 1, option 2 ("Tom has a _ ball." + "old"): qa "tom has a old ball." keeps its
    # last 4 tokens; the article its first 12 - 3 - 4 = 5.
    start = f["lengths"][0].sum() + f["lengths"][1, :2].sum()
    seq = f["input_word_ids"][start:start + f["lengths"][1, 2]]
    words = {v: k for k, v in tok.vocab.items()}
    assert [words[i] for i in seq] == ["[CLS]", "tom", "has", "a", "red", "ball.", "[SEP]",
                                       "has", "a", "old", "ball.", "[SEP]"]
    types = f["input_type_ids"][start:start + 12]
    assert list(types) == [0] * 7 + [1] * 5


@pytest.mark.parametrize("content, message", [
    ("{not json", r"a\.txt: not a JSON object"),
    ("[1, 2]", r"a\.txt: expected a JSON object, found list"),
    (json.dumps({k: v for k, v in ARTICLE.items() if k != "answers"}),
     r"a\.txt \(article middle7\.txt\): missing key\(s\) answers"),
    (json.dumps(dict(ARTICLE, options=[["a", "b", "c"], ["a", "b", "c", "d"]])),
     r"article middle7\.txt, question 0\): options must be a list of 4 strings"),
    (json.dumps(dict(ARTICLE, answers=["A", "E"])),
     r"article middle7\.txt, question 1\): answer 'E' is not one of A, B, C, D"),
    (json.dumps(dict(ARTICLE, answers=["A"])), r"2 questions, 2 option lists and 1 answers"),
])
def test_malformed_articles(tmp_path, content, message):
    _write(str(tmp_path / "RACE/train/middle/a.txt"), content)
    with pytest.raises(ValueError, match=message):
        race.read_examples(str(tmp_path), "train", middle_only=True)


def test_malformed_all_txt_names_line_and_missing_dirs(tmp_path):
    _write(str(tmp_path / "RACE/train/high/all.txt"), json.dumps(ARTICLE) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"all\.txt:2: not a JSON object"):
        race.read_examples(str(tmp_path), "train", high_only=True)
    with pytest.raises(FileNotFoundError, match=r"RACE train/middle directory not found: .*"
                                                r"--high_only or --middle_only"):
        race.read_examples(str(tmp_path), "train")
    with pytest.raises(FileNotFoundError, match=r"RACE dev split not found"):
        race.read_examples(str(tmp_path), "dev")
    _write(str(tmp_path / "RACE/train/high/all.txt"), "\n")
    with pytest.raises(ValueError, match="holds no questions"):
        race.read_examples(str(tmp_path), "train", high_only=True)


def test_multiple_choice_model_shapes_names_and_loss():
    from albert_tf import AlbertConfig
    from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
    tf.keras.utils.set_random_seed(0)
    config = AlbertConfig(vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=16,
                          max_position_embeddings=16)
    model = AlbertMultipleChoice(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 30, size=(3, 4, 7)).astype(np.int32)
    features = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids), "label_ids": np.array([0, 3, 1]),
                "is_real_example": np.array([1.0, 1.0, 0.0])}
    out = model(features, training=False)
    assert out["logits"].shape == (3, 4)
    np.testing.assert_allclose(out["probabilities"].numpy().sum(-1), 1.0, rtol=1e-5)
    # Each choice is scored on its own: the same sequence gets the same logit anywhere.
    swapped = dict(features, input_word_ids=ids[:, ::-1].copy())
    np.testing.assert_allclose(model(swapped)["logits"].numpy(),
                               out["logits"].numpy()[:, ::-1], rtol=1e-5, atol=1e-6)
    weights = model.tf1_weights()
    assert tuple(weights["output_weights"].shape) == (1, 16)
    assert tuple(weights["output_bias"].shape) == (1,)
    sums = {k: float(v) for k, v in model.loss_sums(features, out).items()}
    expected = -np.log(out["probabilities"].numpy()[[0, 1], [0, 3]]).sum()
    assert sums["example_count"] == 2.0
    assert sums["loss_sum"] == pytest.approx(expected, rel=1e-5)


def test_choices_stay_together_in_batches():
    """finetuning.make_dataset with lengths [examples, 4]: [batch, 4, length] batches padded to
    the batch's longest choice, masks exact, eval filler examples weighted 0."""
    from albert_tf.data import features as finetuning
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 20, size=(5, 4)).astype(np.int32)
    total = int(lengths.sum())
    features = {"input_word_ids": np.arange(1, total + 1, dtype=np.int32),
                "input_type_ids": np.ones(total, np.int8), "lengths": lengths,
                "label_ids": np.arange(5, dtype=np.int32), "guids": np.array(list("abcde"))}
    starts = np.concatenate([[0], np.cumsum(lengths.reshape(-1))]).reshape(-1)[:-1].reshape(5, 4)
    batches = list(finetuning.make_dataset(features, 2, 32, is_training=False,
                                           pad_to_multiple_of=8))
    assert len(batches) == 3
    seen = []
    for b in batches:
        width = b["input_word_ids"].shape[-1]
        longest = max(lengths[max(i, 0)].max() for i in b["example_index"].numpy())  # -1: copy of 0
        assert b["input_word_ids"].shape[:2] == (2, 4) and width == min(32, -(-longest // 8) * 8)
        for row, index in enumerate(b["example_index"].numpy()):
            if index < 0:
                assert b["is_real_example"][row] == 0
                continue
            seen.append(int(index))
            for c in range(4):
                n = lengths[index, c]
                ids = b["input_word_ids"][row, c].numpy()
                np.testing.assert_array_equal(ids[:n], np.arange(starts[index, c] + 1,
                                                                 starts[index, c] + n + 1))
                assert not ids[n:].any()
                assert b["input_mask"][row, c].numpy().sum() == n
    assert seen == [0, 1, 2, 3, 4]
    train = next(iter(finetuning.make_dataset(features, 2, 32, is_training=True)))
    assert train["input_word_ids"].shape[:2] == (2, 4)
