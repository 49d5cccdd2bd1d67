"""bench/gpu/compile_offline.py and dump_hlo.py: a user's mistake is one line, and --dump
never replaces a file. (The compiling itself needs jaxlib's CUDA plugin: bench/gpu/README.md.)"""

import gzip
import os
import subprocess
import sys

import pytest

from albert_tf.modeling import kernels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "bench", "gpu", "compile_offline.py")


def _run(*args):
    done = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                          timeout=120, check=False)
    return done.returncode, done.stderr.strip().splitlines()


def test_mistakes_are_one_line_and_dump_replaces_nothing(tmp_path):
    hlo, dump = tmp_path / "hlo", tmp_path / "dump"
    hlo.mkdir()
    dump.mkdir()
    assert _run("modules", str(tmp_path / "none")) == (
        1, [f"modules: no folder {tmp_path / 'none'} (write one with dump_hlo.py)"])
    assert _run("modules", str(hlo))[1] == [
        f"modules: {hlo} holds no .hlo.pb.gz module (write them with dump_hlo.py)"]
    with gzip.open(hlo / "a.hlo.pb.gz", "wb") as f:
        f.write(b"not compiled here")
    assert _run("modules", str(hlo), "--only", "a,b")[1] == [f"modules: not in {hlo}: b"]
    (dump / "a.opt.hlo.gz").write_bytes(b"the user's")
    assert _run("modules", str(hlo), "--dump", str(dump))[1] == [
        f"--dump: {dump} already holds a.opt.hlo.gz; move them or dump elsewhere"]
    assert (dump / "a.opt.hlo.gz").read_bytes() == b"the user's"
    assert _run("largest", "albert_base_v2", "--tf_python", sys.executable)[1] == [
        "largest: 'albert_base_v2': write config:seq, e.g. albert_base_v2:512"]
    assert _run("largest", "albert_base_v2:512")[1] == [
        "largest: --tf_python is required: the path of a Python with TensorFlow and albert_tf "
        "(got '')"]


def test_unknown_rewrites_are_named():
    with pytest.raises(ValueError, match="unknown rewrites nonsense: use none or some of "
                                         "key_bias,value_bias"):
        kernels.check_rewrites(["gelu", "nonsense"])
    assert kernels.check_rewrites(["gelu"]) == ["gelu"]
