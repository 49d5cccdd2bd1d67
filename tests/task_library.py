"""The TFLite Task Library (tflite-support 0.4.4's BertNLClassifier, BertQuestionAnswerer and
metadata reader) in its own virtual environment: it needs protobuf < 4 where TensorFlow 2.21
needs >= 6.31, so it cannot share ours. `python tests/task_library.py` sets it up (the test
command does, before the suite); the tests call `run`."""

import fcntl
import json
import os
import subprocess
import sys
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("ALBERT_TF_TASK_LIBRARY_VENV", os.path.join(ROOT, ".venv-task-library"))
PACKAGES = ("tflite-support==0.4.4", "libusb-package==1.0.30.0")
# Its extension modules link libusb-1.0.so.0, which libusb-package ships as libusb-1.0.so.
LIBS = os.path.join(VENV, "libusb")


def python():
    """The environment's interpreter, set up first if it is not there."""
    executable = os.path.join(VENV, "bin", "python")
    os.makedirs(os.path.dirname(VENV), exist_ok=True)
    with open(VENV + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers set it up once
        if not os.path.exists(os.path.join(LIBS, "libusb-1.0.so.0")):
            venv.create(VENV, with_pip=True, clear=True)
            subprocess.run([executable, "-m", "pip", "install", "-q", *PACKAGES], check=True)
            package = subprocess.run(
                [executable, "-c", "import libusb_package, os; "
                 "print(os.path.dirname(libusb_package.__file__))"],
                check=True, capture_output=True, text=True).stdout.strip()
            os.makedirs(LIBS, exist_ok=True)
            os.symlink(os.path.join(package, "libusb-1.0.so"),
                       os.path.join(LIBS, "libusb-1.0.so.0"))
    return executable


# Runs there: argv kind ("classify" or "answer"), the .tflite, the JSON inputs (texts, or
# [question, context] pairs); prints what the library's metadata reader shows and its results.
SCRIPT = """
import json, sys
from tensorflow_lite_support.metadata.python.metadata import MetadataDisplayer
from tensorflow_lite_support.python.task.text.bert_nl_classifier import BertNLClassifier
from tensorflow_lite_support.python.task.text.bert_question_answerer import BertQuestionAnswerer
kind, path, inputs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
shown = MetadataDisplayer.with_model_file(path)
if kind == "classify":
    classifier = BertNLClassifier.create_from_file(path)
    results = [{c.category_name: c.score
                for c in classifier.classify(t).classifications[0].categories} for t in inputs]
else:
    answerer = BertQuestionAnswerer.create_from_file(path)
    results = [[{"text": a.text, "start": a.pos.start, "end": a.pos.end, "logit": a.pos.logit}
                for a in answerer.answer(context, question).answers]
               for question, context in inputs]
print(json.dumps({"metadata": json.loads(shown.get_metadata_json()),
                  "packed_files": shown.get_packed_associated_file_list(), "results": results}))
"""


def run(kind, model_path, inputs):
    """The Task Library's "classify" (BertNLClassifier) or "answer" (BertQuestionAnswerer) on
    the .tflite at `model_path` and `inputs`, in its environment; returns SCRIPT's JSON."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = LIBS
    done = subprocess.run([python(), "-c", SCRIPT, kind, str(model_path), json.dumps(inputs)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(python(), file=sys.stderr)
