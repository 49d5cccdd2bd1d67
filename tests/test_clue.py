"""CLUE's classification tasks by name, from files in their download layout (train/dev/test.json,
JSON Lines with each task's fields), with the `<task>_predict.json` submission."""

import json
import random

import pytest

from albert_tf import predict, run_classifier
from albert_tf.data import clue
from conftest import run_main
from tool_runner import run_tool_logged
from zh_release import sentences, write_release


def _write(directory, rows_by_split):
    directory.mkdir(parents=True, exist_ok=True)
    for split, rows in rows_by_split.items():
        (directory / f"{split}.json").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return directory


def _rows(task, n, seed, test=False):
    """Rows with the task's fields; the label is learnable: ★ in the text means labels[1]."""
    rng = random.Random(seed)
    texts = sentences(2 * n, seed)
    rows = []
    for i in range(n):
        good = rng.random() < 0.5
        a, b = ("★" if good else "") + texts[2 * i], texts[2 * i + 1]
        row = {"afqmc": {"sentence1": a, "sentence2": b},
               "tnews": {"sentence": a, "keywords": ""},
               "iflytek": {"sentence": a},
               "cmnli": {"sentence1": a, "sentence2": b},
               "ocnli": {"sentence1": a, "sentence2": b, "genre": "news"},
               "csl": {"abst": b, "keyword": [a[:4], a[4:8]]},
               "cluewsc2020": {"text": a, "target": {"span1_text": a[1:3], "span1_index": 1,
                                                      "span2_text": a[5:6], "span2_index": 5}},
               }[task.name]
        if test:
            row["id"] = i
        else:
            row["label"] = task.labels[1 if good else 0]
            if task.name == "tnews":
                row["label_desc"] = f"news_{row['label']}"
        rows.append(row)
    return rows


@pytest.mark.parametrize("name", sorted(clue.TASKS))
def test_each_task_reads_its_layout(tmp_path, name):
    task = clue.get_task(name.upper())
    train = _rows(task, 6, 0)
    dev = _rows(task, 4, 1)
    if name in ("cmnli", "ocnli"):
        dev.append({"sentence1": "没有", "sentence2": "标签", "label": "-"})  # unlabelled: dropped
    directory = _write(tmp_path / name, {"train": train, "dev": dev,
                                         "test": _rows(task, 3, 2, test=True)})
    label_set, splits = clue.read_splits(str(directory), task, ["train", "dev", "test"])
    assert label_set.labels == task.labels and label_set.name == name
    assert len(splits["dev"].examples) == 4
    first = splits["train"].examples[0]
    if name == "csl":
        assert first.text_a == " ".join(train[0]["keyword"]) and first.text_b == train[0]["abst"]
    if name == "cluewsc2020":
        text = train[0]["text"]
        assert first.text_a == text[0] + "_" + text[1:3] + "_" + text[3:5] + "[" + text[5] + \
            "]" + text[6:]
        moved = dict(train[0], target=dict(train[0]["target"], span2_index=4))
        _write(tmp_path / "wsc", {"train": [moved] + train})
        with pytest.raises(ValueError, match=r"wsc/train.json:1: target.span2_text '.' is not "
                                             r"at target.span2_index 4 of the text"):
            clue.read_splits(str(tmp_path / "wsc"), task, ["train"])
    assert [e.guid for e in splits["test"].examples] == ["0", "1", "2"]
    assert all(e.label is None for e in splits["test"].examples)
    bad = dict(train[0], label="999")
    _write(tmp_path / "bad", {"train": [bad] + train})
    with pytest.raises(ValueError, match=rf"bad/train.json:1: label '999' is not among CLUE's "
                                         rf"{task.name.upper()} list's labels \("):
        clue.read_splits(str(tmp_path / "bad"), task, ["train"])


def test_the_tnews_labels_and_submission_are_clue_s():
    task = clue.TASKS["tnews"]
    assert task.labels == ("100", "101", "102", "103", "104", "106", "107", "108", "109",
                           "110", "112", "113", "114", "115", "116")
    assert len(clue.TASKS["iflytek"].labels) == 119
    assert clue.submission(task, ["0", "7"], ["102", "116"]) == (
        '{"id": 0, "label": "102", "label_desc": ""}\n{"id": 7, "label": "116", '
        '"label_desc": ""}\n')


@pytest.mark.slow
def test_afqmc_fine_tunes_by_name_and_writes_its_submission(tmp_path):
    release, _ = write_release(str(tmp_path / "albert_base_zh"))
    task = clue.TASKS["afqmc"]
    data = _write(tmp_path / "afqmc_public", {"train": _rows(task, 400, 0),
                                              "dev": _rows(task, 64, 1),
                                              "test": _rows(task, 20, 2, test=True)})
    out = tmp_path / "out"
    best = run_main(run_classifier, dict(strategy="one_device", mixed_precision="bfloat16"), dict(
        task_name="afqmc", data_dir=data, init_checkpoint=release, output_dir=out,
        do_train=True, do_eval=True, do_predict=True, train_step=200, warmup_step=20,
        save_checkpoints_steps=100, learning_rate=6e-3, train_batch_size=16, max_seq_length=64))
    assert best["eval_accuracy"] > 0.8, best
    rows = [json.loads(line) for line in open(out / "afqmc_predict.json")]
    assert [r["id"] for r in rows] == list(range(20))
    assert {r["label"] for r in rows} <= {"0", "1"}
    marked = [r["label"] for r, t in zip(rows, _rows(task, 20, 2, test=True))
              if t["sentence1"].startswith("★")]
    assert marked and sum(m == "1" for m in marked) / len(marked) > 0.8
    assert json.loads((out / "labels.json").read_text())["labels"] == ["0", "1"]


def _c3_items(n, seed, answered=True):
    """C3 items ([context lines, questions, id]) with 2 to 4 choices; the answer is learnable:
    the right choice holds ★."""
    rng = random.Random(seed)
    texts = sentences(6 * n, seed)
    items = []
    for i in range(n):
        questions = []
        for j in range(rng.randint(1, 2)):
            choices = [t[:6] for t in rng.sample(texts, rng.randint(2, 4))]
            right = rng.randrange(len(choices))
            choices[right] = "★" + choices[right]
            question = {"question": texts[(i + j) % len(texts)][:8], "choice": choices}
            if answered:
                question["answer"] = choices[right]
            questions.append(question)
        items.append([[texts[i][:12], texts[i + 1][:12]], questions, f"{i}-{seed}"])
    return items


def _write_c3(directory, n_train=120, n_dev=24, n_test=10):
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, seed in (("d", 0), ("m", 1)):
        for split, n in (("train", n_train), ("dev", n_dev)):
            (directory / f"{prefix}-{split}.json").write_text(json.dumps(
                _c3_items(n, seed + (10 if split == "dev" else 0)), ensure_ascii=False),
                encoding="utf-8")
    (directory / "test1.1.json").write_text(
        json.dumps(_c3_items(n_test, 7, answered=False), ensure_ascii=False), encoding="utf-8")
    return directory


def test_c3_reads_its_layout(tmp_path):
    from albert_tf.data import c3
    data = _write_c3(tmp_path / "c3_public", 5, 3, 4)
    train = c3.read_examples(str(data), "train")
    items = _c3_items(5, 0) + _c3_items(5, 1)
    questions = [(item, q) for item in items for q in item[1]]
    assert len(train) == len(questions)
    assert [e.level for e in train] == ["dialogue"] * sum(len(i[1]) for i in items[:5]) + [
        "mixed"] * sum(len(i[1]) for i in items[5:])
    for example, (item, q) in zip(train, questions):
        assert example.article == "\n".join(item[0])
        assert example.options == q["choice"] + ["无效答案"] * (4 - len(q["choice"]))
        assert example.options[example.label] == q["answer"]
    test = c3.read_examples(str(data), "test")
    assert {e.label for e in test} == {-1} and {e.level for e in test} == {"test"}
    assert c3.submission_name(str(data)) == "c311_predict.json"
    bad = _c3_items(1, 3)
    bad[0][1][0]["answer"] = "not a choice"
    (data / "d-dev.json").write_text(json.dumps(bad, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match=r"d-dev.json: item 0 \(0-3\), question 0: the answer "
                                         r"'not a choice' is not one of its choices"):
        c3.read_examples(str(data), "dev")
    with pytest.raises(FileNotFoundError, match="C3 train files not found in .*: expected "
                                                r"d-train.json and m-train.json \(--data_dir"):
        c3.read_examples(str(tmp_path), "train")


@pytest.mark.slow
@pytest.mark.parametrize("precision, jit", [("bfloat16", "true"), ("float16", "false")])
def test_c3_fine_tunes_on_the_multiple_choice_path_and_writes_its_submission(tmp_path, precision,
                                                                             jit):
    from albert_tf import run_race
    run_race.define_flags()  # where missing: run_classifier's are defined at import
    release, _ = write_release(str(tmp_path / "albert_base_zh"))
    data = _write_c3(tmp_path / "c3_public")
    out = tmp_path / "out"
    best = run_main(run_race, dict(strategy="one_device", mixed_precision=precision,
                                   jit_compile=jit), dict(
        task_name="c3", data_dir=data, init_checkpoint=release, output_dir=out, do_train=True,
        do_eval=True, do_predict=True, train_step=120, warmup_step=12, save_checkpoints_steps=60,
        learning_rate=6e-3, train_batch_size=8, eval_batch_size=16, predict_batch_size=16,
        max_seq_length=48, max_qa_length=16, log_steps=60))
    assert best["eval_accuracy"] > 0.8, best
    assert {"eval_accuracy_dialogue", "eval_accuracy_mixed"} <= set(best)
    rows = [json.loads(line) for line in open(out / "c311_predict.json")]
    test = [q for item in _c3_items(10, 7, answered=False) for q in item[1]]
    assert [r["id"] for r in rows] == list(range(len(test)))
    right = [r["label"] < len(q["choice"]) and q["choice"][r["label"]].startswith("★")
             for r, q in zip(rows, test)]
    assert sum(right) / len(right) > 0.8, rows
    assert not (out / "predict_results.txt").exists()  # the test questions have no answers
    if precision != "float16":
        return
    # predict --task=choose reads C3's own file (once: "expected a JSON object, found list"),
    # each question over its own choices, unpadded.
    answers = tmp_path / "answers.jsonl"
    code, log = run_tool_logged(predict, task="choose", model=out,
                                input_file=data / "test1.1.json", output_file=answers)
    assert code == 0, log[-3000:]
    chosen = [json.loads(line) for line in answers.read_text(encoding="utf-8").splitlines()]
    assert [c["id"] for c in chosen] == [f"{item[2]}-{j}" for item in _c3_items(10, 7, False)
                                         for j in range(len(item[1]))]
    assert [len(c["probabilities"]) for c in chosen] == [len(q["choice"]) for q in test]
    picked = [q["choice"]["ABCD".index(c["prediction"])].startswith("★")
              for c, q in zip(chosen, test)]
    assert sum(picked) / len(picked) > 0.8, chosen
