"""Serving: SavedModel / TF-Hub exports (export, finetuned, saved_model) and the predictors
that run any checkpoint or export on text (fill_mask, classify, embed, tag, answer, choose).

    from albert_tf.serving import FillMask
    FillMask("albert_base")(["The capital of France is [MASK]."])

The predictors load lazily: they import tensorflow-text, which a fine-tuning run that exports
nothing never needs (it imports serving.lite_files for its flags' choices).
"""

import importlib

_EXPORTS = {"Answerer": "albert_tf.serving.answer", "Chooser": "albert_tf.serving.choose",
            "Classifier": "albert_tf.serving.classify", "Embedder": "albert_tf.serving.embed",
            "FillMask": "albert_tf.serving.fill_mask", "Tagger": "albert_tf.serving.tag",
            "PredictError": "albert_tf.serving.predictor"}
_PREDICTOR_NAMES = {"fill_mask": "FillMask", "classify": "Classifier", "embed": "Embedder",
                    "ner": "Tagger", "qa": "Answerer", "choose": "Chooser"}
TASKS = tuple(_PREDICTOR_NAMES)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name == "PREDICTORS":
        return {task: __getattr__(cls) for task, cls in _PREDICTOR_NAMES.items()}
    raise AttributeError(f"module 'albert_tf.serving' has no attribute {name!r}")


def predict(task, model, texts, texts_b=None, **options):
    """One-shot: builds the task's predictor for `model` and runs it on `texts`."""
    if task not in TASKS:
        raise __getattr__("PredictError")(f"--task={task!r}: one of {', '.join(TASKS)}")
    return __getattr__(_PREDICTOR_NAMES[task])(model, **options)(texts, texts_b)
