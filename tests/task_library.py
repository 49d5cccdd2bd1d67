"""The TFLite Task Library (tflite-support 0.4.4's BertNLClassifier, BertQuestionAnswerer and
metadata reader), run in its own environment (tests/side_envs.py)."""

import json
import os

import side_envs

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
    the .tflite at `model_path` and `inputs`; returns SCRIPT's JSON."""
    return side_envs.run("task_library", SCRIPT, kind, model_path, json.dumps(inputs),
                         env={"LD_LIBRARY_PATH": os.path.join(side_envs.path("task_library"),
                                                              "libusb")})
