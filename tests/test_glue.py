"""GLUE processors on tiny files in the real GLUE layouts; features; error messages."""

import os

import numpy as np
import pytest

from albert_tf.data import glue

# (task directory, file, header or None, rows) in the layouts of the GLUE downloads.
FILES = [
    ("CoLA", "train.tsv", None, [["gj04", "1", "", "Our friends won't buy this."],
                                 ["gj04", "0", "*", "They drank the pub."]]),
    ("CoLA", "test.tsv", ["index", "sentence"], [["0", "Bill whistled past the house."]]),
    ("SST-2", "train.tsv", ["sentence", "label"], [["hide new secretions ", "0"],
                                                   ["a lovely film", "1"]]),
    ("SST-2", "test.tsv", ["index", "sentence"], [["0", "uneasy mishmash"]]),
    ("MRPC", "train.tsv", ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
     [["1", "702876", "702977", "Amrozi accused his brother .", "Referring to him ."]]),
    ("MRPC", "test.tsv", ["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
     [["0", "1089874", "1089925", "PCCW 's chief", "Current Chief"]]),
    ("STS-B", "dev.tsv", ["index", "genre", "filename", "year", "old_index", "source1",
                          "source2", "sentence1", "sentence2", "score"],
     [["0", "main-captions", "MSRvid", "2012test", "0000", "none", "none", "A man with a hat.",
       "A man wearing a hat.", "5.000"]]),
    ("STS-B", "test.tsv", ["index", "genre", "filename", "year", "old_index", "source1",
                           "source2", "sentence1", "sentence2"],
     [["0", "main-captions", "MSRvid", "2012test", "0024", "none", "none", "A girl sings.",
       "A woman sings."]]),
    ("QQP", "train.tsv", ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
     [["133273", "213221", "213222", "How is the life?", "How is life?", "0"],
      ["1", "2", "3", "a row the original skipped"]]),
    ("QQP", "test.tsv", ["id", "question1", "question2"], [["0", "Why?", "Why not?"]]),
    ("MNLI", "train.tsv", ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                           "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                           "sentence1", "sentence2", "label1", "gold_label"],
     [["0", "31193", "31193n", "government", "( ( x ) )", "( y )", "(ROOT x)", "(ROOT y)",
       "Conceptually cream skimming has two dimensions.", "Product and geography.",
       "neutral", "neutral"]]),
    ("MNLI", "dev_matched.tsv", ["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p",
                                 "s2p", "sentence1", "sentence2", "label1", "label2", "label3",
                                 "label4", "label5", "gold_label"],
     [["0", "63735", "63735n", "slate", "x", "y", "x", "y", "The new rights are nice.",
       "Everyone really likes them.", "neutral", "entailment", "neutral", "neutral", "neutral",
       "neutral"]]),
    ("MNLI", "test_mismatched.tsv", ["index", "promptID", "pairID", "genre", "s1b", "s2b",
                                     "s1p", "s2p", "sentence1", "sentence2"],
     [["0", "1", "1n", "letters", "x", "y", "x", "y", "Hello.", "Hi."]]),
    ("QNLI", "dev.tsv", ["index", "question", "sentence", "label"],
     [["0", "What came into force?", "The law did.", "entailment"]]),
    ("RTE", "train.tsv", ["index", "sentence1", "sentence2", "label"],
     [["0", "No weapons were found.", "Weapons were found.", "not_entailment"]]),
    ("WNLI", "train.tsv", ["index", "sentence1", "sentence2", "label"],
     [["0", "I stuck a pin.", "The pin stuck.", "1"]]),
    ("diagnostic", "diagnostic.tsv", ["index", "sentence1", "sentence2"],
     [["0", "The cat sat.", "The cat did not sit."]]),
]


def _write(root, directory, name, header, rows):
    path = os.path.join(root, directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in ([header] if header else []) + rows:
            f.write("\t".join(row) + "\n")
    return path


@pytest.fixture
def data_dir(tmp_path):
    for spec in FILES:
        _write(str(tmp_path), *spec)
    return str(tmp_path)


@pytest.mark.parametrize("task, split, expected", [
    ("cola", "train", [("0", "Our friends won't buy this.", None, "1"),
                       ("1", "They drank the pub.", None, "0")]),
    ("cola", "test", [("0", "Bill whistled past the house.", None, None)]),
    ("sst-2", "train", [("0", "hide new secretions ", None, "0"), ("1", "a lovely film", None,
                                                                   "1")]),
    ("sst-2", "test", [("0", "uneasy mishmash", None, None)]),
    ("mrpc", "train", [("0", "Amrozi accused his brother .", "Referring to him .", "1")]),
    ("mrpc", "test", [("0", "PCCW 's chief", "Current Chief", None)]),
    ("sts-b", "dev", [("0", "A man with a hat.", "A man wearing a hat.", 5.0)]),
    ("sts-b", "test", [("0", "A girl sings.", "A woman sings.", None)]),
    ("qqp", "train", [("0", "How is the life?", "How is life?", "0")]),
    ("qqp", "test", [("0", "Why?", "Why not?", None)]),
    ("mnli", "train", [("0", "Conceptually cream skimming has two dimensions.",
                        "Product and geography.", "neutral")]),
    ("mnli", "dev", [("0", "The new rights are nice.", "Everyone really likes them.",
                      "neutral")]),
    ("mismnli", "test", [("0", "Hello.", "Hi.", None)]),
    ("qnli", "dev", [("0", "What came into force?", "The law did.", "entailment")]),
    ("rte", "train", [("0", "No weapons were found.", "Weapons were found.",
                       "not_entailment")]),
    ("wnli", "train", [("0", "I stuck a pin.", "The pin stuck.", "1")]),
    ("ax", "test", [("0", "The cat sat.", "The cat did not sit.", None)]),
])
def test_processors_read_the_glue_layouts(data_dir, task, split, expected):
    examples = glue.read_examples(data_dir, glue.get_task(task), split)
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == expected


def test_label_lists_and_metrics():
    assert glue.get_task("MNLI").labels == ("contradiction", "entailment", "neutral")
    assert glue.get_task("qnli").labels == glue.get_task("rte").labels == (
        "entailment", "not_entailment")
    for name in ("cola", "sst-2", "mrpc", "qqp", "wnli"):
        assert glue.get_task(name).labels == ("0", "1")
    stsb = glue.get_task("STS-B")
    assert stsb.is_regression and stsb.num_labels == 1 and stsb.metric == "pearson"
    assert glue.get_task("cola").metric == "matthew_corr"
    assert glue.get_task("mnli-mm").name == "mismnli"
    assert glue.get_task("ax").labels == glue.get_task("mnli").labels


def test_unknown_task_lists_valid_names():
    with pytest.raises(ValueError, match="unknown --task_name='glue'; valid names: cola, sst-2, "
                                         "mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli, ax"):
        glue.get_task("glue")


def test_malformed_rows_name_file_line_and_columns(tmp_path):
    path = _write(str(tmp_path), "RTE", "train.tsv", ["index", "sentence1", "sentence2", "label"],
                  [["0", "a", "b", "entailment"], ["1", "only two"]])
    with pytest.raises(ValueError, match=f"{path}:3: expected at least 4 tab-separated columns "
                                         r"\(text_a in column 1, text_b in column 2, label in "
                                         r"column -1\), found 2"):
        glue.read_examples(str(tmp_path), glue.get_task("rte"), "train")
    _write(str(tmp_path), "RTE", "train.tsv", ["index", "sentence1", "sentence2", "label"],
           [["0", "a", "b", "maybe"]])
    with pytest.raises(ValueError, match=r"train.tsv:2: label 'maybe' in column -1 is not one of "
                                         "entailment, not_entailment"):
        glue.read_examples(str(tmp_path), glue.get_task("rte"), "train")
    _write(str(tmp_path), "STS-B", "train.tsv", ["h"] * 10, [["0"] * 9 + ["high"]])
    with pytest.raises(ValueError, match=r"train.tsv:2: the score in column -1 is 'high', "
                                         "not a number"):
        glue.read_examples(str(tmp_path), glue.get_task("sts-b"), "train")


def test_missing_file_and_split(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"qnli train file not found: .*QNLI/train\.tsv"):
        glue.read_examples(str(tmp_path), glue.get_task("qnli"), "train")
    with pytest.raises(ValueError, match="task ax has no train split"):
        glue.read_examples(str(tmp_path), glue.get_task("ax"), "train")


def test_truncate_pair_longest_first_from_the_end():
    a, b = list("abcdefg"), list("xyz")
    glue.truncate_pair(a, b, 6)
    assert (a, b) == (list("abc"), list("xyz"))
    a, b = list("abcd"), list("wxyz")
    glue.truncate_pair(a, b, 5)
    assert (a, b) == (list("abc"), list("wx"))  # ties pop from b, as the original


class _Tokenizer:
    """Ids = word lengths + 10; [CLS]=2, [SEP]=3."""
    do_lower_case = True

    def special_ids(self):
        return {"[CLS]": 2, "[SEP]": 3}

    def encode(self, text):
        return [len(w) + 10 for w in text.split()]


def test_features_layout():
    task = glue.get_task("rte")
    examples = [glue.Example("0", "aa bbb", "c", "not_entailment"),
                glue.Example("1", "a b c d e f", "gg hh ii", "entailment")]
    f = glue.convert_examples(examples, task, _Tokenizer(), 8)
    assert f["lengths"].tolist() == [6, 8]
    assert f["input_word_ids"].tolist() == [2, 12, 13, 3, 11, 3,
                                            2, 11, 11, 11, 3, 12, 12, 3]
    assert f["input_type_ids"].tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1]
    assert f["label_ids"].tolist() == [1, 0] and f["guids"].tolist() == ["0", "1"]
    single = glue.convert_examples([glue.Example("7", "a b c d e f g h i", None, None)],
                                   glue.get_task("cola"), _Tokenizer(), 5)
    assert single["input_word_ids"].tolist() == [2, 11, 11, 11, 3]
    stsb = glue.convert_examples([glue.Example("0", "a", "b", 3.2)], glue.get_task("sts-b"),
                                 _Tokenizer(), 8)
    assert stsb["label_ids"].dtype == np.float32 and stsb["label_ids"][0] == pytest.approx(3.2)
