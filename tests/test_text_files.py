"""Task files saved with a byte-order mark (Windows editors, Excel's "CSV UTF-8") read as the
same file without one, by every reader (their first word or column name used to carry it);
UTF-16 text and bytes that are not UTF-8 are refused naming the file, line and byte."""

import codecs
import json

import pytest

from albert_tf.data import conll, glue, squad
from albert_tf.data.text_files import read_text

SQUAD = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
    "context": "Anna lives in Oslo.", "qas": [{"id": "q1", "question": "Where does Anna live?",
                                              "answers": [{"text": "Oslo",
                                                           "answer_start": 14}]}]}]}]}


def _twice(tmp_path, name, text):
    """The same text saved without and with a UTF-8 byte-order mark: (plain, marked) paths."""
    paths = []
    for folder, prefix in (("plain", b""), ("marked", codecs.BOM_UTF8)):
        path = tmp_path / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(prefix + text.encode())
        paths.append(path)
    return paths


def _fields(items):
    return [vars(item) if hasattr(item, "__dict__") else item for item in items]


@pytest.mark.parametrize("task,text", [
    ("cola", "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\r\n"
             "gj04\t0\t*\tThe more we study verbs.\r\n"),  # no header: the first row is data
    ("sst-2", "sentence\tlabel\nit 's a charming journey .\t1\n")])
def test_glue_files(tmp_path, task, text):
    spec = glue.get_task(task)
    plain, marked = _twice(tmp_path, f"{spec.directory}/train.tsv", text)
    examples = glue.read_examples(str(marked.parent.parent), spec, "train")
    assert _fields(examples) == _fields(glue.read_examples(str(plain.parent.parent), spec,
                                                           "train"))
    assert not any("\ufeff" in str(v) for e in examples for v in vars(e).values())


def test_squad_file(tmp_path):
    plain, marked = _twice(tmp_path, "train.json", json.dumps(SQUAD))
    questions = squad.read_squad(str(marked), True, False)[0]
    assert [q.question for q in questions] == ["Where does Anna live?"]
    assert _fields(questions) == _fields(squad.read_squad(str(plain), True, False)[0])


def test_conll_file(tmp_path):
    plain, marked = _twice(tmp_path, "train.txt", "-DOCSTART- -X- -X- O\n\nAnna B-PER\n"
                                                  "lives O\n\nOslo B-LOC\n")
    sentences = conll.read_conll(str(marked))
    assert [s.tokens for s in sentences] == [["Anna", "lives"], ["Oslo"]]
    assert _fields(sentences) == _fields(conll.read_conll(str(plain)))


def test_utf16_and_bytes_that_are_not_utf8_are_refused(tmp_path):
    utf16 = tmp_path / "dev.tsv"
    utf16.write_bytes("sentence\tlabel\n".encode("utf-16"))
    with pytest.raises(ValueError, match=rf"^{utf16} is UTF-16 text; save it as UTF-8$"):
        read_text(utf16)
    latin = tmp_path / "train.txt"
    latin.write_bytes("Anna B-PER\ncaf\u00e9 O\n".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"^{latin}:2: byte 14 \(0xe9, column 4\) is not "
                                         r"UTF-8; save the file as UTF-8$"):
        conll.read_conll(str(latin))
