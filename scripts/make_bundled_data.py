#!/usr/bin/env python3
"""Regenerate the small bundled data set under ``data/`` (stdlib only, deterministic).

Source: the Debian package ``r-cran-janeaustenr`` 1.0.0-1 (Debian 12 "bookworm"),
which ships the full texts of Jane Austen's six completed novels (public domain;
package MIT-licensed) as an R lazy-load database (``janeaustenr/data/Rdata.rd[bx]``).
This script reads that database with a small R-serialization reader, so no R is needed.

Get and unpack the source (nothing is downloaded by this script itself)::

    apt-get update && apt-get download r-cran-janeaustenr
    dpkg-deb -x r-cran-janeaustenr_1.0.0-1_all.deb /tmp/janeaustenr
    python scripts/make_bundled_data.py /tmp/janeaustenr

Outputs (see data/README.md):

* ``data/corpus/<novel>.txt`` -- pretraining corpus: Emma, Pride and Prejudice,
  Sense and Sensibility, Persuasion.  One sentence per line, one document per
  chapter, a blank line between documents, natural sentence order.
* ``data/glue/CoLA/{train,dev,test}.tsv`` (+ ``test_labels.tsv``) -- an
  acceptability task in the GLUE CoLA layout built from the two *held-out*
  novels (Northanger Abbey, Mansfield Park): label 1 = the original sentence,
  label 0 = the same sentence with about a third of its words permuted.
* ``data/glue/SST-2/{train,dev,test}.tsv`` (+ ``test_labels.tsv``) -- a
  source-identification task in the GLUE SST-2 layout, from the same two
  held-out novels: label 0 = the sentence is from Northanger Abbey, label 1 = from
  Mansfield Park.  Balanced, raw (original-case) sentences; learnable from names
  and vocabulary, so a tiny model can beat the majority baseline quickly.
"""

import argparse
import bz2
import gzip
import hashlib
import lzma
import math
import os
import random
import re
import struct
import sys
import zlib

SEED = 12345
# sha256 of janeaustenr/data/Rdata.rdb in r-cran-janeaustenr 1.0.0-1.
EXPECTED_RDB_SHA256 = "8fb5198960d0da724b1562f96e4221e5c1b41ff455000280b02c55980c3d8f21"

# R object name -> (output file stem, title)
CORPUS_NOVELS = [
    ("prideprejudice", "pride_and_prejudice", "Pride and Prejudice (1813)"),
    ("sensesensibility", "sense_and_sensibility", "Sense and Sensibility (1811)"),
    ("emma", "emma", "Emma (1815)"),
    ("persuasion", "persuasion", "Persuasion (1817)"),
]
HELDOUT_NOVELS = [
    ("northangerabbey", "na", "Northanger Abbey (1817)"),
    ("mansfieldpark", "mp", "Mansfield Park (1814)"),
]

TASK_SIZES = (("train", 3000), ("dev", 500), ("test", 500))
TASK_MIN_WORDS, TASK_MAX_WORDS = 6, 40
# Source-identification task (SST-2 layout): label per held-out novel code.
SOURCE_TASK_LABELS = (("na", 0), ("mp", 1))
SOURCE_TASK_SIZES = TASK_SIZES  # rows per split, half per label


# --------------------------------------------------------------------------
# Minimal reader for R's XDR serialization format (versions 2 and 3).
# --------------------------------------------------------------------------
class _RReader:
    _SPECIAL = {254, 242, 241, 253, 252, 251, 247}  # NULL, envs, unbound, missing
    _PAIRLIKE = {2, 3, 5, 6, 17}  # LISTSXP, CLOSXP, PROMSXP, LANGSXP, DOTSXP

    def __init__(self, data):
        self.d = data
        self.p = 0
        self.refs = []

    def _int(self):
        v = struct.unpack_from(">i", self.d, self.p)[0]
        self.p += 4
        return v

    def _len(self):
        n = self._int()
        if n == -1:
            hi, lo = self._int(), self._int()
            n = (hi << 32) + lo
        return n

    def read(self):
        if self.d[:2] != b"X\n":
            raise ValueError("not an XDR R serialization stream")
        self.p = 2
        version = self._int()
        self._int()
        self._int()
        if version == 3:
            n = self._int()
            self.p += n  # native encoding name
        return self._item()

    def _item(self):
        flags = self._int()
        t = flags & 0xFF
        has_attr = flags & (1 << 9)
        has_tag = flags & (1 << 10)
        if t in self._SPECIAL:
            return None
        if t == 255:  # REFSXP
            idx = flags >> 8
            if idx == 0:
                idx = self._int()
            return self.refs[idx - 1]
        if t == 1:  # SYMSXP
            sym = ("sym", self._item())
            self.refs.append(sym)
            return sym
        if t in self._PAIRLIKE:
            out = {}
            while True:
                if has_attr:
                    self._item()
                tag = self._item() if has_tag else None
                out[tag[1] if tag else len(out)] = self._item()
                flags = self._int()
                t2 = flags & 0xFF
                has_attr = flags & (1 << 9)
                has_tag = flags & (1 << 10)
                if t2 == 254:
                    return out
                if t2 != t:
                    raise ValueError("unsupported pairlist tail type %d" % t2)
        if t == 9:  # CHARSXP
            n = self._int()
            if n == -1:
                return None
            s = self.d[self.p:self.p + n]
            self.p += n
            # LATIN1_MASK is gp bit 2, i.e. flags bit 14; otherwise UTF-8/ASCII.
            return s.decode("latin-1") if flags & (1 << 14) else s.decode("utf-8")
        if t in (10, 13):  # LGLSXP, INTSXP
            n = self._len()
            val = list(struct.unpack_from(">%di" % n, self.d, self.p))
            self.p += 4 * n
        elif t == 14:  # REALSXP
            n = self._len()
            val = list(struct.unpack_from(">%dd" % n, self.d, self.p))
            self.p += 8 * n
        elif t in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            n = self._len()
            val = [self._item() for _ in range(n)]
        else:
            raise ValueError("unsupported R object type %d" % t)
        attrs = self._item() if has_attr else {}
        names = attrs.get("names") if attrs else None
        if names is not None and t == 19:
            return dict(zip(names, val))
        return val


def load_r_lazydata(data_dir):
    """Return {name: value} for every object in <data_dir>/Rdata.rd[xb]."""
    with open(os.path.join(data_dir, "Rdata.rdx"), "rb") as f:
        index = _RReader(gzip.decompress(f.read())).read()
    with open(os.path.join(data_dir, "Rdata.rdb"), "rb") as f:
        rdb = f.read()
    digest = hashlib.sha256(rdb).hexdigest()
    if digest != EXPECTED_RDB_SHA256:
        print("warning: Rdata.rdb sha256 %s differs from the expected %s; "
              "outputs may differ from the committed ones" % (digest, EXPECTED_RDB_SHA256),
              file=sys.stderr)
    compressed = index["compressed"][0]
    out = {}
    for name, (offset, length) in index["variables"].items():
        chunk = rdb[offset:offset + length]
        size = struct.unpack(">I", chunk[:4])[0]
        if compressed in (2, 3):  # a type byte follows: Z(lib), 2 (bzip2), X (xz), 0 (none)
            kind, body = chunk[4:5], chunk[5:]
            raw = {b"Z": zlib.decompress, b"2": bz2.decompress, b"X": lzma.decompress,
                   b"0": bytes}[kind](body)
        else:  # compressed = TRUE: zlib
            raw = zlib.decompress(chunk[4:])
        if len(raw) != size:
            raise ValueError("bad chunk length for %s" % name)
        out[name] = _RReader(raw).read()
    return out


def find_data_dir(root):
    for dirpath, _dirs, files in os.walk(root):
        if (os.path.basename(os.path.dirname(dirpath)) == "janeaustenr"
                and os.path.basename(dirpath) == "data" and "Rdata.rdx" in files):
            return dirpath
    if os.path.exists(os.path.join(root, "Rdata.rdx")):
        return root
    raise SystemExit("could not find janeaustenr/data/Rdata.rdx under %s" % root)


# --------------------------------------------------------------------------
# Text cleaning and sentence splitting.
# --------------------------------------------------------------------------
CHAPTER_RE = re.compile(r"^\s*chapter\s+([0-9]+|[ivxlc]+)\.?\s*$", re.I)
VOLUME_RE = re.compile(r"^\s*volume\s+([0-9]+|[ivxlc]+)\.?\s*$", re.I)
END_RE = re.compile(r"^\s*(the end|finis|a note on the text)\s*$", re.I)

ABBREVIATIONS = {
    "mr", "mrs", "messrs", "ms", "dr", "st", "col", "capt", "gen", "lt", "rev",
    "esq", "bart", "jr", "sr", "co", "no", "vol", "viz", "etc", "i.e", "e.g",
    "sept", "oct", "nov", "dec", "jan", "feb", "aug",
}
# End punctuation, optional closing quotes/brackets, whitespace, then an
# optional opening quote/bracket and an upper-case letter or digit.
BOUNDARY_RE = re.compile(r"([.!?]+)([\"')\]]*)\s+(?=[\"'(\[]*[A-Z0-9])")


def chapters(lines):
    """Split a novel's lines into chapters, each a list of paragraphs (strings)."""
    docs, cur, para, started = [], None, [], False

    def flush_para():
        if para and cur is not None:
            cur.append(" ".join(para))
        para.clear()

    for line in lines:
        line = (line or "").rstrip()
        if END_RE.match(line):
            break
        if CHAPTER_RE.match(line):
            flush_para()
            if cur:
                docs.append(cur)
            cur, started = [], True
            continue
        if not started or VOLUME_RE.match(line):
            continue
        if not line.strip():
            flush_para()
        elif line.lstrip().startswith("*"):  # editorial footnote
            flush_para()
        else:
            para.append(line.strip())
    flush_para()
    if cur:
        docs.append(cur)
    return docs


def clean_paragraph(p):
    p = p.replace("_", "")  # _italics_
    p = re.sub(r"\s+", " ", p)
    return p.strip()


def split_sentences(paragraph):
    out, start = [], 0
    for m in BOUNDARY_RE.finditer(paragraph):
        end = m.end(2)
        last = re.search(r"([A-Za-z]+(?:\.[A-Za-z]+)*)$", paragraph[start:m.start(1)])
        word = last.group(1).lower() if last else ""
        if m.group(1) == "." and (word in ABBREVIATIONS or re.fullmatch(r"[a-z]", word)):
            continue
        out.append(paragraph[start:end].strip())
        start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


def merge_fragments(sents, min_words=3):
    """Join fragments shorter than min_words (e.g. '"Oh!') to the next sentence."""
    out, carry = [], ""
    for s in sents:
        s = (carry + " " + s).strip() if carry else s
        if len(s.split()) < min_words:
            carry = s
        else:
            out.append(s)
            carry = ""
    if carry:
        if out:
            out[-1] = out[-1] + " " + carry
        else:
            out.append(carry)
    return out


def keep_sentence(s):
    # Drop headings / all-caps lines and leftovers without real words.
    return bool(re.search(r"[a-z]", s)) and len(s.split()) >= 2


def novel_documents(lines):
    docs = []
    for chap in chapters(lines):
        sents = []
        for para in chap:
            for s in merge_fragments(split_sentences(clean_paragraph(para))):
                if keep_sentence(s):
                    sents.append(s)
        if sents:
            docs.append(sents)
    return docs


# --------------------------------------------------------------------------
# Acceptability task: original vs. word-permuted sentences.
# --------------------------------------------------------------------------
TOKEN_RE = re.compile(r"^(\W*)(.*?\w)(\W*)$", re.S)


def proper_words(all_docs):
    """Words that are usually capitalised even in mid-sentence (names, 'I')."""
    cap, low = {}, {}
    for docs in all_docs:
        for doc in docs:
            for s in doc:
                toks = s.split()
                for i, tok in enumerate(toks[1:], 1):
                    if toks[i - 1][-1:] in ".!?\"'":
                        continue  # could be a sentence start inside quotes
                    m = TOKEN_RE.match(tok)
                    if not m:
                        continue
                    core = m.group(2)
                    key = core.lower()
                    if core[:1].isupper():
                        cap[key] = cap.get(key, 0) + 1
                    else:
                        low[key] = low.get(key, 0) + 1
    return {w for w, c in cap.items() if c > low.get(w, 0)}


def corrupt(sentence, rng, proper):
    """Permute the word cores of about a third of the tokens (punctuation stays)."""
    toks = sentence.split()
    parts = [TOKEN_RE.match(t) for t in toks]
    cand = [i for i, m in enumerate(parts) if m]
    k = min(len(cand), max(2, math.ceil(len(cand) / 3)))
    cores = [m.group(2) if m else None for m in parts]
    for _ in range(100):
        pos = sorted(rng.sample(cand, k))
        perm = pos[:]
        rng.shuffle(perm)
        new = cores[:]
        for dst, src in zip(pos, perm):
            new[dst] = cores[src]
        if [c.lower() if c else c for c in new] != [c.lower() if c else c for c in cores]:
            break
    else:
        return None
    first = cand[0] if cand else None
    if first is not None and cores[first][:1].isupper() and new[first] != cores[first]:
        # The sentence-initial capital goes with the position, not the word.
        for i in pos:
            c = new[i]
            if i == first:
                new[i] = c[:1].upper() + c[1:]
            elif c == cores[first] and c.lower() not in proper and c != "I":
                new[i] = c[:1].lower() + c[1:]
    out = []
    for i, t in enumerate(toks):
        m = parts[i]
        out.append(m.group(1) + new[i] + m.group(3) if m else t)
    return " ".join(out)


def tsv_safe(s):
    return s.replace("\t", " ")


def build_source_task(held_docs, corpus_sentences, out_root):
    """Write glue/SST-2: which held-out novel a sentence comes from.

    Uses its own ``random.Random(SEED)`` so the other outputs are unaffected.
    Candidates per novel: distinct sentences of TASK_MIN_WORDS..TASK_MAX_WORDS
    words, in document order, excluding any sentence that occurs in the corpus
    or in the other held-out novel.  Each novel's candidates are shuffled and
    taken in order, half of every split per label, so each sentence is used once.
    """
    by_code = {}
    for code, docs in held_docs:
        sents, seen = [], set()
        for doc in docs:
            for s in doc:
                if TASK_MIN_WORDS <= len(s.split()) <= TASK_MAX_WORDS and s not in seen:
                    seen.add(s)
                    sents.append(s)
        by_code[code] = sents
    rng = random.Random(SEED)
    pools = {}
    for code, label in SOURCE_TASK_LABELS:
        others = set()
        for other, _ in SOURCE_TASK_LABELS:
            if other != code:
                others.update(by_code[other])
        pool = [s for s in by_code[code] if s not in corpus_sentences and s not in others]
        rng.shuffle(pool)
        need = sum(n // 2 for _, n in SOURCE_TASK_SIZES)
        if len(pool) < need:
            raise SystemExit("only %d candidate sentences from %s, need %d"
                             % (len(pool), code, need))
        pools[label] = pool

    task_dir = os.path.join(out_root, "glue", "SST-2")
    os.makedirs(task_dir, exist_ok=True)
    pos = {label: 0 for label in pools}
    for split, n in SOURCE_TASK_SIZES:
        assert n % 2 == 0
        rows = []
        for label in sorted(pools):
            rows.extend((label, s) for s in pools[label][pos[label]:pos[label] + n // 2])
            pos[label] += n // 2
        rng.shuffle(rows)

        def write(name, header, lines):
            with open(os.path.join(task_dir, name), "w", encoding="utf-8", newline="\n") as f:
                f.write(header + "\n")
                for line in lines:
                    f.write(line + "\n")

        if split == "test":
            write("test.tsv", "index\tsentence",
                  ("%d\t%s" % (k, tsv_safe(s)) for k, (_label, s) in enumerate(rows)))
            write("test_labels.tsv", "index\tlabel",
                  ("%d\t%d" % (k, label) for k, (label, _s) in enumerate(rows)))
        else:
            write(split + ".tsv", "sentence\tlabel",
                  ("%s\t%d" % (tsv_safe(s), label) for label, s in rows))
        ones = sum(r[0] for r in rows)
        print("glue/SST-2/%s.tsv: %d rows, %d label-1 (mp), %d label-0 (na)"
              % (split, n, ones, n - ones))
    print("SST-2 candidate pools: %s" % ", ".join(
        "%s %d" % (code, len(pools[label])) for code, label in SOURCE_TASK_LABELS))


def build(source_root, out_root):
    data = load_r_lazydata(find_data_dir(source_root))

    corpus_dir = os.path.join(out_root, "corpus")
    os.makedirs(corpus_dir, exist_ok=True)
    corpus_docs, stats = [], []
    for rname, stem, _title in CORPUS_NOVELS:
        docs = novel_documents(data[rname])
        corpus_docs.append(docs)
        text = "\n\n".join("\n".join(d) for d in docs) + "\n"
        path = os.path.join(corpus_dir, stem + ".txt")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        stats.append((path, len(text.encode("utf-8")), len(docs), sum(len(d) for d in docs)))

    held_docs = [(code, novel_documents(data[rname])) for rname, code, _ in HELDOUT_NOVELS]
    proper = proper_words(corpus_docs + [d for _, d in held_docs])

    # Candidate sentences from the held-out novels, in document order, de-duplicated.
    pool, seen = [], set()
    for code, docs in held_docs:
        for doc in docs:
            for s in doc:
                n = len(s.split())
                if TASK_MIN_WORDS <= n <= TASK_MAX_WORDS and s not in seen:
                    seen.add(s)
                    pool.append(("ja_" + code, s))
    rng = random.Random(SEED)
    rng.shuffle(pool)
    total = sum(n for _, n in TASK_SIZES)
    if len(pool) < total:
        raise SystemExit("only %d candidate sentences, need %d" % (len(pool), total))

    task_dir = os.path.join(out_root, "glue", "CoLA")
    os.makedirs(task_dir, exist_ok=True)
    i = 0
    for split, n in TASK_SIZES:
        rows = []
        for j in range(n):
            src, s = pool[i]
            i += 1
            label = 1 if j % 2 == 0 else 0
            if label == 0:
                c = corrupt(s, rng, proper)
                assert c is not None and c != s
                s = c
            rows.append((src, label, s))
        rng.shuffle(rows)
        if split == "test":
            with open(os.path.join(task_dir, "test.tsv"), "w", encoding="utf-8", newline="\n") as f:
                f.write("index\tsentence\n")
                for k, (_src, _label, s) in enumerate(rows):
                    f.write("%d\t%s\n" % (k, tsv_safe(s)))
            with open(os.path.join(task_dir, "test_labels.tsv"), "w", encoding="utf-8",
                      newline="\n") as f:
                f.write("index\tlabel\n")
                for k, (_src, label, _s) in enumerate(rows):
                    f.write("%d\t%d\n" % (k, label))
        else:
            with open(os.path.join(task_dir, split + ".tsv"), "w", encoding="utf-8",
                      newline="\n") as f:
                for src, label, s in rows:
                    f.write("%s\t%d\t%s\t%s\n" % (src, label, "" if label else "*", tsv_safe(s)))
        ones = sum(r[1] for r in rows)
        print("glue/CoLA/%s.tsv: %d rows, %d label-1, %d label-0" % (split, n, ones, n - ones))

    corpus_sentences = {s for docs in corpus_docs for doc in docs for s in doc}
    build_source_task(held_docs, corpus_sentences, out_root)

    for path, nbytes, ndocs, nsents in stats:
        print("%s: %d bytes, %d documents, %d sentences" % (path, nbytes, ndocs, nsents))
    print("corpus total: %d bytes, %d documents, %d sentences" % (
        sum(s[1] for s in stats), sum(s[2] for s in stats), sum(s[3] for s in stats)))
    print("task candidate pool: %d sentences from held-out novels" % len(pool))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="directory holding the extracted r-cran-janeaustenr "
                                   "package (searched for janeaustenr/data/Rdata.rdx)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  os.pardir, "data"),
                    help="output data directory (default: <repo>/data)")
    args = ap.parse_args()
    build(args.source, os.path.normpath(args.out))


if __name__ == "__main__":
    main()
