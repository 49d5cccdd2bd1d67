"""The CoNLL layout that NER and POS data sets ship in: one token per line with its tag in the
last column, blank lines between sentences, `-DOCSTART-` lines ignored; `train.txt`, `dev.txt`
(or `valid.txt`) and `test.txt` in one directory; and the chunks (entities) a sentence's tags
mark.

Tags are `O` or `<prefix>-<type>` with prefix B, I, E or S (IOB1, IOB2/BIO and IOBES read by
the same rules). A chunk starts and ends where CoNLL's `conlleval` (`startOfChunk` /
`endOfChunk`) says (an I- after O or after another type starts one, as an I- without its B-; a
type change ends one), with seqeval's completion of them for S- and E- (conlleval itself never
reads S-, and lets a B- right after an E- of the same type continue the chunk).
"""

import collections
import io
import os
import re

import tensorflow as tf

from albert_tf.data.text_files import read_text
from albert_tf.files import atomic_write_text

SPLIT_FILES = {"train": ("train.txt",), "dev": ("dev.txt", "valid.txt"), "test": ("test.txt",)}
# A run's tag list, one per line in id order, beside its checkpoints.
LABELS_FILE = "labels.txt"

Sentence = collections.namedtuple("Sentence", ["tokens", "tags", "lines"])


def has_split(data_dir, split):
    return bool(data_dir) and any(tf.io.gfile.exists(os.path.join(data_dir, name))
                                  for name in SPLIT_FILES[split])


def split_file(data_dir, split):
    """The file of `split` (train, dev, test) in `data_dir`; a missing one is a clear error."""
    names = SPLIT_FILES[split]
    if not data_dir:
        raise FileNotFoundError(f"no --data_dir (the directory of {' or '.join(names)})")
    if not tf.io.gfile.isdir(data_dir):
        raise FileNotFoundError(f"--data_dir={data_dir} is not a directory (it should hold "
                                f"{' or '.join(names)})")
    for name in names:
        path = os.path.join(data_dir, name)
        if tf.io.gfile.exists(path):
            return path
    raise FileNotFoundError(f"no {' or '.join(names)} in --data_dir={data_dir}")


def read_conll(path, untagged=False):
    """[Sentence(tokens, tags, lines)] of a CoNLL file; `lines` keeps each token's whole line
    (every column) for writing predictions beside it. With `untagged`, a file of one token per
    line (sentences to predict) has the tag None throughout."""
    sentences, tokens, tags, lines = [], [], [], []
    widths = set()

    def close():
        if tokens:
            sentences.append(Sentence(list(tokens), list(tags), list(lines)))
        tokens.clear(), tags.clear(), lines.clear()

    with io.StringIO(read_text(path)) as f:  # lines end at "\n" only, as the file's own do
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\r\n")
            columns = line.split()
            if not columns:
                close()
                continue
            if columns[0] == "-DOCSTART-":
                close()
                continue
            if len(columns) < 2 and not untagged:
                raise ValueError(f"{path}:{number}: a token line needs a tag in its last column: "
                                 f"{line!r}")
            widths.add(min(len(columns), 2))
            if len(widths) > 1:
                raise ValueError(f"{path}:{number}: {line!r}: some token lines have a tag in "
                                 f"their last column and some do not")
            tokens.append(columns[0])
            tags.append(columns[-1] if len(columns) > 1 else None)
            lines.append(line)
    close()
    if not sentences:
        raise ValueError(f"{path} holds no sentence")
    _check_tag_column(path, sentences)
    return sentences


TAG = re.compile(r"^(O|[BIESU]-\S+)$")


def looks_like_tags(values):
    """Whether nine in ten of `values` are tags of a chunk scheme (O, B-PER, ...)."""
    values = list(values)
    return bool(values) and sum(bool(TAG.match(v)) for v in values) >= 0.9 * len(values)


def _check_tag_column(path, sentences):
    """A file whose first column holds the tags and last the words (columns swapped) would
    train a tagger on words as tags."""
    first = [token for s in sentences for token in s.tokens]
    last = [t for s in sentences for t in s.tags if t is not None]
    if last and looks_like_tags(first) and not looks_like_tags(last):
        raise ValueError(f"{path}: the first column holds tags ({', '.join(sorted(set(first))[:4])}"
                         f", ...) and the last does not: the CoNLL layout is the token first "
                         f"and its tag last")


def label_list(sentences):
    """The tags of the training sentences: `O` first (when present), then the others sorted by
    type and prefix, so that a rerun on the same file gives the same ids."""
    seen = {tag for s in sentences for tag in s.tags}
    rest = sorted(seen - {"O"}, key=lambda t: (t.partition("-")[2], t))
    return (["O"] if "O" in seen else []) + rest



def write_labels(directory, labels):
    """`directory`/labels.txt: one label per line (a run's tag list, an export's class names)."""
    atomic_write_text(os.path.join(os.fspath(directory), LABELS_FILE),
                      "".join(f"{label}\n" for label in labels))


def read_labels(directory):
    """The tag list a run kept in `directory`/labels.txt, or None when there is none."""
    path = os.path.join(directory, LABELS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "r") as f:
        return [line.rstrip("\r\n") for line in f if line.strip()]


def _split(tag):
    if tag in ("O", "", None):
        return "O", ""
    prefix, _, kind = tag.partition("-")
    if not kind:  # a bare "B"/"I" tag: conlleval reads it as a chunk of no type
        return prefix, ""
    return prefix, kind


def _ends(prev, prev_kind, tag, kind):
    return (prev in ("E", "S")
            or (prev in ("B", "I") and tag in ("B", "S", "O"))
            or (prev != "O" and prev_kind != kind))


def _starts(prev, prev_kind, tag, kind):
    return (tag in ("B", "S")
            or (prev in ("E", "S", "O") and tag in ("E", "I"))
            or (tag != "O" and prev_kind != kind))


def chunks(tags):
    """[(type, first, last)] of the chunks in one sentence's tags (token indices, inclusive)."""
    out, start, prev, prev_kind = [], None, "O", ""
    for i, raw in enumerate(list(tags) + ["O"]):
        tag, kind = _split(raw)
        if start is not None and _ends(prev, prev_kind, tag, kind):
            out.append((prev_kind, start, i - 1))
            start = None
        if _starts(prev, prev_kind, tag, kind):
            start = i
        prev, prev_kind = tag, kind
    return out
