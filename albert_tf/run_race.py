r"""Fine-tune ALBERT on RACE (4-way multiple-choice reading comprehension), original flags.

  python -m albert_tf.run_race --data_dir=data --output_dir=out/race \
      --init_checkpoint=albert_base --spm_model_file=albert_base/30k-clean.model \
      --do_train --do_eval --do_predict --max_seq_length=512 --max_qa_length=128 \
      --train_batch_size=32 --learning_rate=1e-5 --train_step=12000 --warmup_step=1000

data_dir holds RACE/{train,dev,test}/{middle,high}/ as released (one JSON file per article) or
with the original's all.txt; with --task_name=c3, CLUE's C3 (the unpacked c3_public.zip:
d-/m-{train,dev}.json, test1.1.json), which also writes CLUE's c311_predict.json.
Every checkpoint is evaluated on dev (accuracy on middle, high and
all); the best becomes model.ckpt-best, which --do_predict scores on test (no TPU needed).
The library behind it: `albert_tf.tasks.RaceTask` and `albert_tf.tasks.run_finetuning`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import dataclasses

from absl import app, flags

from albert_tf import cli
from albert_tf.tasks import driver
from albert_tf.tasks.flags import (define_if_missing, keep_how_the_run_read, require_action,
                                   script_settings)
from albert_tf.tasks.flags import define_flags as define_finetuning_flags
from albert_tf.tasks.options import FinetuningOptions
from albert_tf.tasks.c3 import C3Task
from albert_tf.tasks.race import RaceTask

FLAGS = flags.FLAGS
# The original run_race's numbers and do_train/do_eval=True. Flags are defined by define_flags()
# (called by run()), not at import, and only where missing: run_classifier and run_squad define
# some of the same names (task_name, train_file, predict_file, dropout_prob) at import.
RACE_DEFAULTS = dict(max_seq_length=512, train_batch_size=32, eval_batch_size=8,
                     predict_batch_size=8, learning_rate=1e-5, train_step=12000,
                     warmup_step=1000, save_checkpoints_steps=100, do_train=True, do_eval=True)


def define_flags():
    """run_race's flags (the original's plus the shared fine-tuning ones), where missing."""
    define = define_if_missing
    define(flags.DEFINE_string, "task_name", "race",
           "race, or c3 (CLUE's Chinese multiple-choice reading comprehension).")
    for name, split in (("train_file", "train"), ("eval_file", "dev"),
                        ("predict_file", "test")):
        define(flags.DEFINE_string, name, None, f"The {split} features (the original's feature "
               f"file): written here on the first run, read back on later ones, checked against "
               f"every setting that changes them. Default: a keyed cache in --cached_dir.")
    define(flags.DEFINE_integer, "max_qa_length", 128,
           "Longest question+option in tokens; longer ones keep their last tokens.")
    define(flags.DEFINE_bool, "high_only", False, "Use only RACE-H.")
    define(flags.DEFINE_bool, "middle_only", False, "Use only RACE-M.")
    define(flags.DEFINE_float, "dropout_prob", 0.1, "Dropout on each choice's pooled output.")
    define(flags.DEFINE_integer, "num_keep_checkpoint", 5,
           "Accepted for compatibility; see --keep_checkpoint_max.")
    define_finetuning_flags(**{k: v for k, v in RACE_DEFAULTS.items()
                               if k not in ("warmup_step", "do_train", "do_eval")})


def main(_):
    keep_how_the_run_read(FLAGS)
    task_name = (FLAGS.task_name or "race").lower()
    if task_name not in ("race", "c3"):
        raise app.UsageError(f"--task_name={FLAGS.task_name!r}: run_race runs race or c3")
    if FLAGS.high_only and FLAGS.middle_only:
        raise app.UsageError("--high_only and --middle_only exclude each other")
    if task_name == "c3" and (FLAGS.high_only or FLAGS.middle_only):
        raise app.UsageError("--high_only and --middle_only are RACE's levels; C3 has none")
    require_action(FLAGS, export=False)
    options = FinetuningOptions.from_flags(FLAGS)
    # The original's step counts are this script's defaults: left out beside the epochs or
    # warmup share that decide instead, they were not given (the driver says given ones go
    # unused).
    options = dataclasses.replace(options, **{
        count: getattr(FinetuningOptions, count)
        for count, by in (("train_step", "num_train_epochs"), ("warmup_step", "warmup_proportion"))
        if FLAGS[by].value is not None and not FLAGS[count].present})
    tokenizer = driver.prepare(options, RaceTask.head_names)  # (C3Task's too)
    feature_files = {"train": FLAGS.train_file, "dev": FLAGS.eval_file,
                     "test": FLAGS.predict_file}
    cache_dir = FLAGS.cached_dir or FLAGS.output_dir
    if task_name == "c3":
        task = C3Task(FLAGS.data_dir, tokenizer, FLAGS.max_seq_length, FLAGS.max_qa_length,
                      cache_dir, FLAGS.dropout_prob, feature_files=feature_files)
    else:
        task = RaceTask(FLAGS.data_dir, tokenizer, FLAGS.max_seq_length, FLAGS.max_qa_length,
                        cache_dir, FLAGS.high_only, FLAGS.middle_only, FLAGS.dropout_prob,
                        feature_files=feature_files)
    return driver.run_finetuning(task, options, script_settings(FLAGS))


def run(argv=None):
    define_flags()
    for name, value in RACE_DEFAULTS.items():
        FLAGS.set_default(name, value)
    cli.run(main, ["data_dir", "output_dir"], argv)


if __name__ == "__main__":
    run()
