"""Fine-tuning tasks, usable from Python without the scripts:

    from albert_tf.tasks import FinetuningOptions, LabeledTextTask, run_finetuning

GlueTask (classification and regression on GLUE-format TSVs), LabeledTextTask (your own CSV,
TSV or JSON Lines files, or rows: single-label, multi-label or regression), SquadTask
(v1.1/v2.0 with the official metric), RaceTask (multiple choice; C3Task for CLUE's C3), NerTask (token
classification on CoNLL files), and the shared driver `run_finetuning(task, options)` that
trains, evaluates every checkpoint, predicts and exports; `FinetuningOptions` holds the
scripts' flags as typed fields. A new task subclasses `FinetuningTask`, the driver's contract.
"""

from albert_tf.tasks.base import FinetuningTask
from albert_tf.tasks.c3 import C3Task
from albert_tf.tasks.driver import prepare, run_finetuning
from albert_tf.tasks.glue import GlueTask
from albert_tf.tasks.labeled_text import LabeledTextTask
from albert_tf.tasks.ner import NerTask
from albert_tf.tasks.options import FinetuningOptions, finetuning_options
from albert_tf.tasks.race import RaceTask
from albert_tf.tasks.squad import SquadTask

__all__ = ["C3Task", "FinetuningOptions", "FinetuningTask", "GlueTask", "LabeledTextTask",
           "NerTask", "RaceTask", "SquadTask", "finetuning_options", "prepare", "run_finetuning"]
