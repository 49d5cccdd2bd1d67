"""Fine-tune ALBERT on a GLUE task (or your data in a GLUE format) with the original flags.

  python -m albert_tf.run_classifier --task_name=cola --data_dir=glue --output_dir=out/cola \
      --init_checkpoint=albert_base --spm_model_file=albert_base/30k-clean.model \
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=16 \
      --learning_rate=1e-5 --train_step=5336 --warmup_step=320 --save_checkpoints_steps=100

Every checkpoint is evaluated on dev; the best by the task's metric becomes model.ckpt-best,
which --do_predict uses to write test_results.tsv and submit_results.tsv.
The library behind it: `albert_tf.tasks.GlueTask` and `albert_tf.tasks.run_finetuning`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

from absl import app, flags

from albert_tf import cli
from albert_tf.tasks import driver
from albert_tf.tasks.flags import define_export_flags, define_if_missing, require_action
from albert_tf.tasks.flags import define_flags as define_finetuning_flags
from albert_tf.tasks.glue import GlueTask

FLAGS = flags.FLAGS


def define_flags():
    """run_classifier's flags (the shared fine-tuning ones plus its own), where missing."""
    define_if_missing(flags.DEFINE_string, "task_name", None,
                      "cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, "
                      "rte, wnli (ax is predicted with an mnli model).")
    define_finetuning_flags()
    define_export_flags("a raw-string serving SavedModel and <export_dir>/classifier.tflite")
    define_if_missing(flags.DEFINE_float, "threshold_to_export", None,
                      "If set, the serving SavedModel also returns this constant as "
                      "`threshold` (one value per example).")


define_flags()


def main(_):
    from albert_tf.data import glue

    try:
        task = glue.get_task(FLAGS.task_name)
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    if task.name == "ax":
        raise app.UsageError("--task_name=ax: AX is predicted with an MNLI model; run "
                             "--task_name=mnli --do_predict with data_dir/diagnostic/"
                             "diagnostic.tsv present")
    require_action(FLAGS)
    tokenizer = driver.prepare(FLAGS)
    glue_task = GlueTask(task, FLAGS.data_dir, tokenizer, FLAGS.max_seq_length,
                         FLAGS.cached_dir or FLAGS.output_dir, FLAGS.classifier_dropout,
                         FLAGS.threshold_to_export)
    return driver.run_finetuning(glue_task, FLAGS)


def run(argv=None):
    define_flags()
    cli.run(main, ["task_name", "data_dir", "output_dir"], argv)


if __name__ == "__main__":
    run()
