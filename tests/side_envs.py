"""Test tools that must not share the suite's environment, each in a virtual environment of its
own beside .venv:
- task_library: the TFLite Task Library (tflite-support 0.4.4) needs protobuf < 4 where
  TensorFlow 2.21 needs >= 6.31;
- seqeval, the independent CoNLL scorer: it needs scikit-learn, and Keras imports scikit-learn
  (and SciPy) whenever it is installed, 2 s of CPU in each of the suite's TensorFlow processes.
Each is made with the suite's Python, one per Python version (.venv-task-library-py3.12). A
package with no build for that Python (tflite-support 0.4.4 has none for 3.12 and 3.13) leaves
the environment unavailable: its tests skip with the reason, pip's own words. `python
tests/side_envs.py` sets them up and tries an unavailable one again (the test command does,
before the suite); a test's first `run` sets up one that is missing."""

import fcntl
import json
import os
import subprocess
import sys
import venv

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = {"task_library": ("tflite-support==0.4.4", "libusb-package==1.0.30.0"),
            "seqeval": ("seqeval==1.2.2",)}
VERSION = "%d.%d" % sys.version_info[:2]
# pip's words for a requirement that has no release installable on this Python.
NO_BUILD = "No matching distribution found for "


class Unavailable(Exception):
    """The environment's packages have no build for this Python."""


def _default(name):
    return os.path.join(ROOT, f".venv-{name.replace('_', '-')}-py{VERSION}")


def path(name):
    """The environment's folder: $ALBERT_TF_<NAME>_VENV, else .venv-<name>-py<version> in the
    checkout."""
    return os.environ.get(f"ALBERT_TF_{name.upper()}_VENV", _default(name))


def _link_libusb(folder, executable):
    """The Task Library's extension modules link libusb-1.0.so.0, which libusb-package ships
    as libusb-1.0.so: linked under that name in <venv>/libusb, the LD_LIBRARY_PATH of `run`."""
    package = subprocess.run(
        [executable, "-c", "import libusb_package, os; "
         "print(os.path.dirname(libusb_package.__file__))"],
        check=True, capture_output=True, text=True).stdout.strip()
    os.makedirs(os.path.join(folder, "libusb"), exist_ok=True)
    os.symlink(os.path.join(package, "libusb-1.0.so"),
               os.path.join(folder, "libusb", "libusb-1.0.so.0"))


AFTER_INSTALL = {"task_library": _link_libusb}


def _read(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def python(name, retry=False):
    """The environment's interpreter, set up first unless it holds PACKAGES[name] already;
    raises Unavailable where they have no build for this Python (found so once, not tried again
    unless `retry`)."""
    folder = path(name)
    executable = os.path.join(folder, "bin", "python")
    marker = os.path.join(folder, "installed.json")
    wanted = json.dumps(PACKAGES[name])
    record = os.path.join(folder, "unavailable.json")  # [PACKAGES[name], the reason]
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with open(folder + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers set it up once
        installed = _read(marker)
        refused = json.loads(_read(record) or "null")
        if installed != wanted and (retry or not refused or refused[0] != list(PACKAGES[name])):
            # Rebuilt from scratch: only a folder this module made (or the checkout's own).
            if (installed is None and refused is None and os.path.isdir(folder)
                    and os.listdir(folder) and folder != _default(name)):
                variable = f"ALBERT_TF_{name.upper()}_VENV"
                raise RuntimeError(f"{folder} (${variable}) holds files that are not a test "
                                   f"environment made here: name a new or empty folder")
            venv.create(folder, with_pip=True, clear=True)
            done = subprocess.run([executable, "-m", "pip", "install", "-q", *PACKAGES[name]],
                                  capture_output=True, text=True)
            if NO_BUILD in done.stderr:
                pip_says = [line for line in done.stderr.splitlines() if NO_BUILD in line][-1]
                refused = [PACKAGES[name], f"{' '.join(PACKAGES[name])} cannot be installed on "
                                           f"Python {VERSION} ({pip_says.removeprefix('ERROR: ')})"]
                with open(record, "w") as f:
                    json.dump(refused, f)
            elif done.returncode:
                raise RuntimeError(f"pip could not set up {folder}:\n{done.stderr[-3000:]}")
            else:
                if name in AFTER_INSTALL:
                    AFTER_INSTALL[name](folder, executable)
                with open(marker, "w") as f:
                    f.write(wanted)
                installed = wanted
        if installed != wanted:
            raise Unavailable(f"the {name} environment: {refused[1]}")
    return executable


def run(name, script, *args, stdin=None, env=None):
    """Runs `script` (Python source) with `args` and `stdin` in the environment, with `env`
    added to the variables and our PYTHONPATH and LD_LIBRARY_PATH left out; returns the JSON
    its last line of output holds. Skips the calling test where the environment is
    unavailable."""
    try:
        executable = python(name)
    except Unavailable as reason:
        pytest.skip(str(reason))
    variables = {k: v for k, v in os.environ.items()
                 if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    done = subprocess.run([executable, "-c", script, *map(str, args)], input=stdin,
                          env={**variables, **(env or {})}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Runs in seqeval's environment: [[gold tags, predicted tags], ...] on stdin; prints seqeval's
# scores and per-type report (its default mode) for each.
SEQEVAL = """
import json, sys
from seqeval.metrics import accuracy_score, classification_report, f1_score
from seqeval.metrics import precision_score, recall_score
print(json.dumps([{
    "precision": precision_score(g, p), "recall": recall_score(g, p), "f1": f1_score(g, p),
    "accuracy": accuracy_score(g, p),
    "report": classification_report(g, p, output_dict=True, zero_division=0)}
    for g, p in json.load(sys.stdin)], default=lambda number: number.item()))
"""


def seqeval(*cases):
    """seqeval's scores of each (gold, predicted) case: lists of sentences' tag lists."""
    scores = run("seqeval", SEQEVAL, stdin=json.dumps(cases))
    assert len(scores) == len(cases)
    return scores


if __name__ == "__main__":
    for name in PACKAGES:
        try:
            print(python(name, retry=True), file=sys.stderr)
        except Unavailable as reason:
            print(f"{reason}: its tests will be skipped", file=sys.stderr)
