r"""Fine-tune ALBERT on SQuAD v1.1 or (with --version_2_with_negative) v2.0.

  python -m albert_tf.run_squad --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --version_2_with_negative --init_checkpoint=albert_base --output_dir=out/squad2 \
      --spm_model_file=albert_base/30k-clean.model --do_train --do_eval --do_predict \
      --train_batch_size=48 --learning_rate=3e-5 --save_checkpoints_steps=1000

Every checkpoint is evaluated on --predict_file (F1 selects model.ckpt-best); --do_predict
writes predictions.json, nbest_predictions.json and, for v2, null_odds.json. The v2 no-answer
threshold is --null_score_diff_threshold, or chosen on a held-out share of the evaluation
paragraphs (--threshold_dev_fraction) and then reported on the other paragraphs only.
The library behind it: `albert_tf.tasks.SquadTask` and `albert_tf.tasks.run_finetuning`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import functools

from absl import app, flags, logging

from albert_tf import cli
from albert_tf.modeling.squad import V2_HEADS
from albert_tf.tasks import driver
from albert_tf.tasks.flags import (define_export_flags, define_if_missing,
                                   keep_how_the_run_read, require_action, script_settings)
from albert_tf.tasks.flags import define_flags as define_finetuning_flags
from albert_tf.tasks.options import FinetuningOptions
from albert_tf.tasks.squad import SquadTask, head_names, task_name
from albert_tf.training.checkpoint_files import recorded_kind, recorded_settings

FLAGS = flags.FLAGS


# The original run_squad_v1/v2 numbers; run() makes them the defaults even when another script
# in the process (tests) defined the shared flags first.
SQUAD_DEFAULTS = dict(max_seq_length=384, train_batch_size=32, eval_batch_size=8,
                      predict_batch_size=8, learning_rate=5e-5, save_checkpoints_steps=1000)


def define_flags():
    """run_squad's flags where missing (run_race defines train_file, predict_file and
    dropout_prob too)."""
    def missing(define):
        return lambda name, *args: define_if_missing(define, name, *args)
    S, B, I, F = (missing(flags.DEFINE_string), missing(flags.DEFINE_bool),
                  missing(flags.DEFINE_integer), missing(flags.DEFINE_float))
    S("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
    S("predict_file", None, "SQuAD JSON to evaluate (--do_eval) and predict, e.g. dev-v1.1.json.")
    S("train_feature_file", None,
      "Training features: written here on the first run, read back on later ones (checked "
      "against every setting that changes them). Default: a keyed cache in --cached_dir.")
    S("predict_feature_file", None,
      "Evaluation/prediction features, as --train_feature_file.")
    S("predict_feature_left_file", None,
      "Accepted for compatibility: --predict_feature_file holds what the original kept in "
      "this second file.")
    I("doc_stride", 128, "Tokens between the starts of consecutive context windows.")
    I("max_query_length", 64, "Question tokens kept (the rest is cut).")
    I("n_best_size", 20, "Candidate answers kept per question in nbest_predictions.json.")
    I("max_answer_length", 30, "Longest answer, in tokens.")
    B("version_2_with_negative", False, "SQuAD 2.0: questions may be unanswerable.")
    missing(flags.DEFINE_enum)(
        "v2_head", "answer_class", list(V2_HEADS),
        "v2: answer_class (the original's: a beam over starts and ends, and an answerability "
        "classifier) or span (v1's start and end logits, the [CLS] span for no answer: BERT's, "
        "TF Model Garden's and transformers' AlbertForQuestionAnswering, whose SQuAD 2.0 models "
        "it loads).")
    I("start_n_top", 5, "v2: start positions kept in the beam.")
    I("end_n_top", 5, "v2: end positions kept for each start.")
    F("dropout_prob", 0.1, "v2: dropout in the answer_class head.")
    F("null_score_diff_threshold", None,
      "v2: answer \"\" when null_odds exceeds this. Unset: --do_eval chooses it on the "
      "--threshold_dev_fraction share of the evaluation paragraphs; --do_predict reads it "
      "from --null_threshold_file.")
    S("null_threshold_file", None,
      "v2: file holding the threshold for --do_predict (a number or a "
      "'null_score_diff_threshold = x' line); default: output_dir/eval_results.txt.")
    F("threshold_dev_fraction", 0.5,
      "v2: share of the evaluation paragraphs (seeded by --random_seed) on which the threshold "
      "is chosen; EM/F1 are reported on the remaining paragraphs only.")
    B("use_einsum", True, "Accepted for compatibility (the model has no einsum-only path; "
                          "its TFLite export converts to builtin ops either way).")
    define_export_flags("a raw-string serving SavedModel (question + context) and, for v1, "
                        "<export_dir>/albert_model.tflite")
    # --num_train_epochs and --warmup_proportion are the shared flags (default None, so that
    # every script in one process sees the same definitions); main() makes them 3 and 0.1,
    # the original's, unless --train_step / --warmup_step are given.
    define_finetuning_flags(**SQUAD_DEFAULTS)


define_flags()


def main(_, version_2=None):
    require_action(FLAGS)
    if version_2 is None:  # run_squad, not the original's run_squad_v1 / _v2 modules
        _take_the_run_s_version()
    # A rerun naming neither file takes the run's: its training file to resume (and to
    # calibrate an int8 export), its predict file to evaluate, predict and score an export on.
    reads = {"train_file": FLAGS.do_train or bool(FLAGS.export_dir)
             and FLAGS.tflite_quantization == "int8",
             "predict_file": FLAGS.do_eval or FLAGS.do_predict or bool(FLAGS.export_dir)}
    keep_how_the_run_read(FLAGS, tuple(reads), unread=[f for f, read in reads.items() if not read])
    if FLAGS.do_train and not FLAGS.train_file:
        raise app.UsageError("--do_train needs --train_file")
    if (FLAGS.do_eval or FLAGS.do_predict) and not FLAGS.predict_file:
        raise app.UsageError("--do_eval and --do_predict need --predict_file")
    if (FLAGS.version_2_with_negative and FLAGS.do_eval and FLAGS.null_score_diff_threshold is None
            and not 0 < FLAGS.threshold_dev_fraction < 1):
        raise app.UsageError(f"--threshold_dev_fraction must be in (0, 1), got "
                             f"{FLAGS.threshold_dev_fraction}; or give --null_score_diff_threshold")
    check_window_room(FLAGS.max_seq_length, FLAGS.max_query_length, FLAGS.doc_stride)
    # SQuAD's defaults are epochs and a warmup share; explicit step counts take over.
    if not FLAGS["num_train_epochs"].present:
        FLAGS.num_train_epochs = None if FLAGS["train_step"].present else 3.0
    if not FLAGS["warmup_proportion"].present:
        FLAGS.warmup_proportion = None if FLAGS["warmup_step"].present else 0.1
    if FLAGS.predict_feature_left_file:
        logging.warning("--predict_feature_left_file is ignored: --predict_feature_file holds "
                        "all the evaluation features")
    options = FinetuningOptions.from_flags(FLAGS)
    tokenizer = driver.prepare(options, head_names(FLAGS.version_2_with_negative,
                                                   FLAGS.v2_head))
    task = SquadTask(
        tokenizer, FLAGS.train_file, FLAGS.predict_file, FLAGS.cached_dir or FLAGS.output_dir,
        FLAGS.version_2_with_negative, FLAGS.max_seq_length, FLAGS.doc_stride,
        FLAGS.max_query_length, FLAGS.n_best_size, FLAGS.max_answer_length, FLAGS.start_n_top,
        FLAGS.end_n_top, FLAGS.dropout_prob, FLAGS.null_score_diff_threshold,
        FLAGS.threshold_dev_fraction, FLAGS.null_threshold_file, FLAGS.random_seed,
        FLAGS.train_feature_file, FLAGS.predict_feature_file, FLAGS.v2_head)
    return driver.run_finetuning(task, options, script_settings(FLAGS))


def check_window_room(max_seq_length, max_query_length, doc_stride):
    """Refuses a window with no room for the context; warns where it holds fewer context pieces
    than --doc_stride (windows that do not overlap: many short ones per context)."""
    room = max_seq_length - max_query_length - 3
    if room < 1:
        raise app.UsageError(f"--max_seq_length={max_seq_length} leaves no room for the context "
                             f"after a question of up to --max_query_length={max_query_length} "
                             f"pieces ([CLS] question [SEP] context [SEP])")
    if room < doc_stride:
        logging.warning("A window holds as few as %d context pieces (--max_seq_length=%d - "
                        "--max_query_length=%d - 3), fewer than --doc_stride=%d: windows do "
                        "not overlap, each context is read in many short ones and an answer "
                        "across a window's edge is never found. Raise --max_seq_length or lower "
                        "--max_query_length", room, max_seq_length, max_query_length, doc_stride)


def _take_the_run_s_version():
    """A rerun of a SQuAD 2.0 run without --version_2_with_negative (or --v2_head) reads as
    the run did."""
    if not FLAGS.output_dir or recorded_kind(FLAGS.output_dir) != driver.run_kind(
            task_name(True)):
        return
    if not FLAGS["version_2_with_negative"].present:
        FLAGS.version_2_with_negative = True
        logging.info("--version_2_with_negative, as the run in %s trained (run.json)",
                     FLAGS.output_dir)
    head = recorded_settings(FLAGS.output_dir).get("v2_head")
    if head and not FLAGS["v2_head"].present and head != FLAGS.v2_head:
        FLAGS.v2_head = head
        logging.info("--v2_head=%s, as the run in %s trained (run.json)", head, FLAGS.output_dir)


def run(argv=None, version_2=None):
    """The command line; `version_2` fixes --version_2_with_negative's default (the original's
    run_squad_v1 / run_squad_v2 modules, where the module is the version)."""
    define_flags()
    for name, value in SQUAD_DEFAULTS.items():
        FLAGS.set_default(name, value)
    if version_2 is not None:
        FLAGS.set_default("version_2_with_negative", version_2)
    cli.run(functools.partial(main, version_2=version_2), ["output_dir"], argv)


if __name__ == "__main__":
    run()
