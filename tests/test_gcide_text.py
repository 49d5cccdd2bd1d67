"""bench/gcide_text.py: dictionary entries as documents, and a new output file only."""

import gzip
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import gcide_text  # noqa: E402

ENTRY = """Abash \\A*bash"\\, v. t. [imp. & p. p. {Abashed}.] [OE. abaissen.]
   [1913 Webster]

   1. To destroy the self-possession of; to confuse or confound,
      as by exciting suddenly a consciousness of guilt.
      [1913 Webster]

            He was a man whom no check could abash. --Macaulay.
      [1913 Webster]
"""
SHORT = """Ab \\Ab\\, n. The eleventh month.
   [1913 Webster]

   The month of the Jewish year.
"""


def test_an_entry_is_a_document_of_its_definitions_and_quotations():
    assert list(gcide_text.documents(ENTRY + SHORT)) == [[
        "To destroy the self-possession of; to confuse or confound, as by exciting suddenly a "
        "consciousness of guilt.",
        "He was a man whom no check could abash."]]  # SHORT: one line, no sentence order


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gcide_text.py"), *map(str, args)],
                          capture_output=True, text=True)


def test_writes_a_new_file_and_refuses_to_replace_one(tmp_path):
    source = tmp_path / "gcide.dict.dz"
    with gzip.open(source, "wt") as f:
        f.write(ENTRY)
    out = tmp_path / "gcide.txt"
    done = run(source, out)
    assert done.returncode == 0, done.stderr
    assert out.read_text().startswith("To destroy the self-possession of;")
    out.write_text("mine")
    refused = run(source, out)
    assert refused.returncode == 2 and out.read_text() == "mine"
    assert refused.stderr.splitlines()[-1] == (
        f"gcide_text.py: error: {out} exists: this script writes a new file, name another")
    missing = run(tmp_path / "nope.dz", tmp_path / "other.txt")
    assert missing.returncode == 2 and missing.stderr.splitlines()[-1] == (
        f"gcide_text.py: error: no file {tmp_path / 'nope.dz'}: see this script's docstring "
        f"for the download")
