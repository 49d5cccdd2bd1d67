"""Serving: SavedModel / TF-Hub exports (export, finetuned, saved_model) and the predictors
that run any checkpoint or export on text (fill_mask, classify, embed, tag).

    from albert_tf.serving import FillMask
    FillMask("albert_base")(["The capital of France is [MASK]."])
"""

from albert_tf.serving.classify import Classifier
from albert_tf.serving.embed import Embedder
from albert_tf.serving.fill_mask import FillMask
from albert_tf.serving.predictor import PredictError
from albert_tf.serving.tag import Tagger

PREDICTORS = {"fill_mask": FillMask, "classify": Classifier, "embed": Embedder, "ner": Tagger}
TASKS = tuple(PREDICTORS)


def predict(task, model, texts, texts_b=None, **options):
    """One-shot: builds the task's predictor for `model` and runs it on `texts`."""
    if task not in PREDICTORS:
        raise PredictError(f"--task={task!r}: one of {', '.join(TASKS)}")
    return PREDICTORS[task](model, **options)(texts, texts_b)
