"""Plain English text from the GNU Collaborative International Dictionary of English (Debian's
dict-gcide: Webster's 1913 and later additions; GPL, downloaded here, never bundled), to fill
vocabularies of a release's size (20,000-30,000 pieces), which the bundled novels cannot
(docs/finetuning.md, "Adam's ε").

Each dictionary entry becomes one document: its definitions and quotations, one a line, without
the headword line (pronunciation and etymology), the source tags, the cross-reference braces
and the quotations' authors. Documents with fewer than two lines are dropped (the
sentence-order task needs two).

    apt-get download dict-gcide && dpkg-deb -x dict-gcide_*.deb gcide
    python bench/gcide_text.py gcide/usr/share/dictd/gcide.dict.dz gcide.txt --max_bytes=6000000
"""

import argparse
import gzip
import os
import re

SOURCE_TAG = re.compile(r"\[(?:1913 Webster|PJC|WordNet 1\.5|Webster 1913 Suppl\.|[A-Z]{2,4})"
                        r"[^\]]*\]")
AUTHOR = re.compile(r"\s--[A-Z][^.]*(?:\.[^.]*)?\.?\s*$")
NUMBER = re.compile(r"^\(?[0-9a-z]{1,2}[.)]\s+")
MARKUP = re.compile(r"[{}\\\"*`]")


def documents(text):
    """Yields each entry's lines of plain text."""
    for entry in re.split(r"\n(?=\S)", text):
        paragraphs = re.split(r"\n\s*\n", entry)[1:]
        lines = []
        for paragraph in paragraphs:
            line = " ".join(paragraph.split())
            line = SOURCE_TAG.sub("", line).strip()
            line = AUTHOR.sub("", line)
            line = NUMBER.sub("", line)
            line = MARKUP.sub("", line)
            line = " ".join(line.split())
            if len(line.split()) >= 4 and any(c.islower() for c in line):
                lines.append(line)
        if len(lines) >= 2:
            yield lines


def main():
    parser = argparse.ArgumentParser(
        description="Plain English text from GCIDE (Debian's dict-gcide), an entry a document.")
    parser.add_argument("dict_file", help="gcide.dict.dz (dictzip is gzip) or gcide.dict")
    parser.add_argument("output", help="the text file to write (a new one)")
    parser.add_argument("--max_bytes", type=int, default=0,
                        help="about this many, from entries spread over the alphabet (0: all)")
    args = parser.parse_args()
    if not os.path.isfile(args.dict_file):
        parser.error(f"no file {args.dict_file}: see this script's docstring for the download")
    if os.path.exists(args.output):
        parser.error(f"{args.output} exists: this script writes a new file, name another")
    opener = gzip.open if args.dict_file.endswith(".dz") else open
    with opener(args.dict_file, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    blocks = ["\n".join(lines) + "\n\n" for lines in documents(text)]
    total = sum(len(b.encode("utf-8")) for b in blocks)
    # Evenly spaced entries, so that a part of the dictionary covers the whole alphabet.
    share = min(1.0, args.max_bytes / total) if args.max_bytes else 1.0
    kept = [b for i, b in enumerate(blocks) if int((i + 1) * share) > int(i * share)]
    with open(args.output, "x", encoding="utf-8") as out:
        out.writelines(kept)
    written, count = sum(len(b.encode("utf-8")) for b in kept), len(kept)
    print(f"{args.output}: {count} documents, {written} bytes")


if __name__ == "__main__":
    main()
