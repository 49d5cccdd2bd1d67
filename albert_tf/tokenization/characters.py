"""Unicode character classes the tokenizers split and normalize by, computed once from this
Python's Unicode database, and their forms as Python and RE2 regular expression classes."""

import functools
import re
import unicodedata

CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


# Planes 4-13 are unassigned and 15-16 private use: no character there is in any class below.
_ASSIGNED_PLANES = (range(0x0, 0x40000), range(0xE0000, 0xF0000))


@functools.lru_cache(maxsize=None)
def unicode_tables():
    """The character classes the tokenizers need, over Unicode (this Python's database), in one
    pass: WordPiece's dropped and whitespace characters, CJK, punctuation and nonspacing marks
    (the original BasicTokenizer's rules); `str.split`'s whitespace; the combining marks that
    `preprocess_text` drops (SentencePiece)."""
    t = {k: [] for k in ("dropped", "spaces", "punct", "marks", "split_spaces", "combining")}
    for block in _ASSIGNED_PLANES:
        for code in block:
            if 0xD800 <= code <= 0xDFFF:
                continue
            c = chr(code)
            category = unicodedata.category(c)
            if category == "Cn":
                continue
            if code == 0 or code == 0xFFFD or (
                    category in ("Cc", "Cf") and c not in "\t\n\r"):
                t["dropped"].append(c)
            if c in " \t\n\r" or category == "Zs":
                t["spaces"].append(c)
            if category[0] == "P" or (c.isascii() and c.isprintable() and not c.isalnum()
                                      and c != " "):
                t["punct"].append(c)
            if category == "Mn":
                t["marks"].append(c)
            if category[0] == "M" and unicodedata.combining(c):
                t["combining"].append(c)
            if c.isspace():
                t["split_spaces"].append(c)
    t["cjk"] = [chr(c) for a, b in CJK_RANGES for c in range(a, b + 1)]
    return t



def _ranges(codepoints):
    """(first, last) runs of consecutive code points, from sorted code points."""
    ranges, start, prev = [], None, None
    for c in codepoints:
        if start is None:
            start = prev = c
        elif c == prev + 1:
            prev = c
        else:
            ranges.append((start, prev))
            start = prev = c
    if start is not None:
        ranges.append((start, prev))
    return ranges


def py_class(chars):
    """A Python regex character class matching exactly `chars` (sorted)."""
    parts = [re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
             for a, b in _ranges(map(ord, chars))]
    return "[" + "".join(parts) + "]"


def re2_class(codepoints):
    """An RE2 character class matching the given sorted code points."""
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
             for a, b in _ranges(codepoints)]
    return "[" + "".join(parts) + "]"


