r"""Fine-tune ALBERT on a GLUE task with the original flags, or on your own CSV, TSV or JSON Lines
files with transformers' flag names.

  python -m albert_tf.run_classifier --task_name=cola --data_dir=glue --output_dir=out/cola \
      --init_checkpoint=albert_base --spm_model_file=albert_base/30k-clean.model \
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=16 \
      --learning_rate=1e-5 --train_step=5336 --warmup_step=320 --save_checkpoints_steps=100

Every checkpoint is evaluated on dev; the best by the task's metric becomes model.ckpt-best,
which --do_predict uses to write test_results.tsv and submit_results.tsv.

  python -m albert_tf.run_classifier --train_file=train.csv --validation_file=dev.csv \
      --test_file=test.csv --text_column_names=review --label_column_name=sentiment \
      --init_checkpoint=albert_base --output_dir=out/reviews --do_train --do_eval --do_predict

Labels come from the training file (a numeric column with fractions: regression; lists:
multi-label), are saved as labels.json and named in every output (docs/finetuning.md).
The library behind it: `albert_tf.tasks.GlueTask` and `albert_tf.tasks.run_finetuning`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import tensorflow as tf
from absl import app, flags, logging

from albert_tf import cli
from albert_tf.data import clue, labeled_text
from albert_tf.outputs import OutputRefused
from albert_tf.tasks import driver
from albert_tf.tasks.flags import (define_export_flags, define_if_missing,
                                   keep_how_the_run_read, require_action, script_settings)
from albert_tf.tasks.flags import define_flags as define_finetuning_flags
from albert_tf.tasks.options import FinetuningOptions
from albert_tf.tasks.classification import checkpoint_labels
from albert_tf.tasks.clue import ClueTask
from albert_tf.tasks.glue import GlueTask
from albert_tf.tasks.labeled_text import (ACTIONS, MAX_WINDOWS_PER_TEXT, SPLIT_FLAGS,
                                          LabeledTextTask, parse_class_weights)

FLAGS = flags.FLAGS
# Where the examples are: a rerun that gives none of these takes the run's (run.json).
DATA_FLAGS = ("task_name", "data_dir", "train_file", "validation_file", "test_file")


def define_flags():
    """run_classifier's flags (the shared fine-tuning ones plus its own), where missing."""
    define_if_missing(flags.DEFINE_string, "task_name", None,
                      "cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, "
                      "rte, wnli (ax is predicted with an mnli model); CLUE's afqmc, tnews, "
                      "iflytek, cmnli, ocnli, csl, cluewsc2020.")
    define_finetuning_flags()
    define_export_flags("a raw-string serving SavedModel and <export_dir>/classifier.tflite")
    define_if_missing(flags.DEFINE_float, "threshold_to_export", None,
                      "If set, the serving SavedModel also returns this constant as "
                      "`threshold` (one value per example).")
    for split, what in (("train", "training"), ("validation", "dev"), ("test", "test")):
        define_if_missing(flags.DEFINE_string, f"{split}_file", None,
                          f"Your own {what} data: a .csv, .tsv or .jsonl file with a header "
                          f"(instead of --task_name and --data_dir).")
    labeled_text.define_column_flags(define_if_missing)
    define_if_missing(flags.DEFINE_string, "label_column_name", "label", "The label column.")
    define_if_missing(flags.DEFINE_string, "id_column_name", None,
                      "The column that names each example in the reports; default: id, idx "
                      "or guid when present, else the row number.")
    define_if_missing(flags.DEFINE_enum, "problem_type", "auto",
                      ["auto", *labeled_text.PROBLEM_TYPES],
                      "auto: lists of labels mean multi_label, numbers with fractions "
                      "regression, anything else single_label (whole numbers written as floats, "
                      "1.0, 2.0, included).")
    define_if_missing(flags.DEFINE_string, "label_delimiter", None,
                      "Multi-label: the labels of one example are joined by this (else a JSON "
                      "list).")
    define_if_missing(flags.DEFINE_boolean, "fold_label_case", False,
                      "Read labels in lower case, so that Positive and positive are one label "
                      "(labels that differ only in case are warned of).")
    define_if_missing(flags.DEFINE_enum, "long_text", None, ["truncate", "windows"],
                      "Texts longer than --max_seq_length: truncate, or read them in "
                      "overlapping windows (one text column) whose logits are averaged, in "
                      "training, evaluation, predictions and the serving export. Default: as "
                      "the run in --output_dir did, else truncate.")
    define_if_missing(flags.DEFINE_integer, "window_stride", None,
                      "--long_text=windows: tokens between window starts; default half a "
                      "window ((--max_seq_length - 2) / 2).", lower_bound=1)
    define_if_missing(flags.DEFINE_integer, "max_windows_per_text", MAX_WINDOWS_PER_TEXT,
                      "--long_text=windows: training reads at most this many windows of one "
                      "text, spread evenly from its start to its end, so that a very long text "
                      "does not outweigh the others; 0: every window. Evaluation, predictions "
                      "and the exports read every window of every text.", lower_bound=0)
    define_if_missing(flags.DEFINE_string, "class_weights", None,
                      "Weigh the training loss per class: 'balanced' (n / (classes x count)) "
                      "or label=weight pairs, comma-separated.")


define_flags()


def main(_):
    from albert_tf.data import glue
    keep_how_the_run_read(FLAGS, DATA_FLAGS,
                          unread=[f for split, f in SPLIT_FLAGS.items() if not _reads(split)])
    if FLAGS.train_file or FLAGS.validation_file or FLAGS.test_file or not (
            FLAGS.task_name or FLAGS.data_dir) and labeled_text.saved_labels(FLAGS.output_dir):
        return _own_data()
    if not (FLAGS.task_name and FLAGS.data_dir):
        raise app.UsageError("give --task_name and --data_dir (a GLUE or CLUE task), or "
                             "--train_file, --validation_file and --test_file (your own data)"
                             + _no_run(FLAGS.output_dir))
    if clue.get_task(FLAGS.task_name):
        return _clue(clue.get_task(FLAGS.task_name))
    task = glue.find_task(FLAGS.task_name)
    if task is None:
        names = [n for n in glue.TASKS if n != "ax"] + list(clue.TASKS)
        raise app.UsageError(f"unknown --task_name={FLAGS.task_name!r}: run_classifier runs "
                             f"{', '.join(names)}; or your own files (--train_file, "
                             f"--validation_file, --test_file)")
    if task.name == "ax":
        raise app.UsageError("--task_name=ax: AX is predicted with an MNLI model; run "
                             "--task_name=mnli --do_predict with data_dir/diagnostic/"
                             "diagnostic.tsv present")
    require_action(FLAGS)
    options = FinetuningOptions.from_flags(FLAGS)
    tokenizer = driver.prepare(options, GlueTask.head_names)
    glue_task = GlueTask(task, FLAGS.data_dir, tokenizer, FLAGS.max_seq_length,
                         FLAGS.cached_dir or FLAGS.output_dir, FLAGS.classifier_dropout,
                         FLAGS.threshold_to_export)
    return driver.run_finetuning(glue_task, options, script_settings(FLAGS))


def _no_run(output_dir):
    """What a rerun that names no data is missing: a run in --output_dir to take it from."""
    if FLAGS.task_name or FLAGS.data_dir or not output_dir:
        return ""
    if not tf.io.gfile.isdir(output_dir):
        return f"; --output_dir={output_dir} does not exist, so there is no run to take them from"
    return f"; --output_dir={output_dir} holds no run (run.json, labels.json) to take them from"


def _own_data():
    """Fine-tuning on --train_file / --validation_file / --test_file: every input checked before
    anything is written."""
    if FLAGS.task_name or FLAGS.data_dir:
        raise app.UsageError("give --task_name and --data_dir (GLUE), or --train_file, "
                             "--validation_file and --test_file (your data), not both")
    require_action(FLAGS)
    columns = labeled_text.Columns(tuple(FLAGS.text_column_names or ()), FLAGS.label_column_name,
                                   FLAGS.id_column_name, FLAGS.label_delimiter, FLAGS.delimiter,
                                   FLAGS.fold_label_case)
    files = {split: _file_to_read(split, flag) for split, flag in SPLIT_FLAGS.items()}
    _warn_of_unused_files()
    options = FinetuningOptions.from_flags(FLAGS)
    driver.check_flags(options)  # before the files are read
    try:
        LabeledTextTask.check_files(files, FLAGS.do_train, FLAGS.do_eval, FLAGS.do_predict)
        label_set, splits = labeled_text.read_splits(
            files, columns, FLAGS.problem_type, FLAGS.output_dir,
            model_labels=FLAGS.init_checkpoint and (
                lambda: checkpoint_labels(FLAGS.init_checkpoint)))
        task = LabeledTextTask(label_set, splits, None, FLAGS.max_seq_length,
                               FLAGS.cached_dir or FLAGS.output_dir, FLAGS.classifier_dropout,
                               FLAGS.threshold_to_export, parse_class_weights(FLAGS.class_weights),
                               FLAGS.long_text, FLAGS.window_stride,
                               FLAGS.max_windows_per_text)
        task.check_outputs(FLAGS.output_dir)
    except (labeled_text.DataError, OutputRefused) as e:
        raise cli.usage_error(e) from None
    task.tokenizer = driver.prepare(options, LabeledTextTask.head_names)
    return driver.run_finetuning(task, options, script_settings(FLAGS))


def _warn_of_unused_files():
    """A --validation_file or --test_file given without its action is only checked."""
    for split, does in (("dev", "evaluated"), ("test", "predicted")):
        flag, action = SPLIT_FLAGS[split], ACTIONS[split]
        if FLAGS[flag].present and FLAGS[flag].value and not _reads(split):
            logging.warning("--%s without --do_%s: its rows are checked, nothing is %s",
                            flag, action, does)


def _reads(split):
    """Whether this run reads the file of `split`: its action is asked, or an export scores
    its LiteRT files on the dev file and calibrates int8 ones on the training file."""
    return FLAGS[f"do_{ACTIONS[split]}"].value or bool(FLAGS.export_dir) and (
        split == "dev" or split == "train" and FLAGS.tflite_quantization == "int8")


def _file_to_read(split, flag):
    """The file of `split` when its action is asked; for an export alone, the dev file (the
    LiteRT report scores on it) and with int8 the training file (calibration), given or the
    run's where it still is."""
    path = FLAGS[flag].value
    if FLAGS[f"do_{ACTIONS[split]}"].value or not (path and FLAGS.export_dir):
        return path
    if not _reads(split):
        return None
    if not FLAGS[flag].present and not tf.io.gfile.exists(path):
        logging.info("--%s=%s (the run's) is not there: exporting without it", flag, path)
        return None
    return path


def _clue(task):
    """A CLUE classification task from --data_dir's train/dev/test.json."""
    require_action(FLAGS)
    splits = [split for split, wanted in (("train", FLAGS.do_train), ("dev", FLAGS.do_eval),
                                          ("test", FLAGS.do_predict)) if wanted]
    options = FinetuningOptions.from_flags(FLAGS)
    driver.check_flags(options)  # before the files are read
    try:
        label_set, examples = clue.read_splits(FLAGS.data_dir, task, splits, FLAGS.output_dir)
        clue_task = ClueTask(task, label_set, examples, None, FLAGS.max_seq_length,
                             FLAGS.cached_dir or FLAGS.output_dir,
                             classifier_dropout=FLAGS.classifier_dropout,
                             threshold_to_export=FLAGS.threshold_to_export,
                             weights=parse_class_weights(FLAGS.class_weights),
                             long_text=FLAGS.long_text, window_stride=FLAGS.window_stride,
                             max_windows_per_text=FLAGS.max_windows_per_text)
        clue_task.check_outputs(FLAGS.output_dir)
    except (labeled_text.DataError, OutputRefused) as e:
        raise cli.usage_error(e) from None
    clue_task.tokenizer = driver.prepare(options, ClueTask.head_names)
    return driver.run_finetuning(clue_task, options, script_settings(FLAGS))


def run(argv=None):
    define_flags()
    cli.run(main, ["output_dir"], argv)


if __name__ == "__main__":
    run()
