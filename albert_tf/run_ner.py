r"""Fine-tune ALBERT for token classification (NER, POS, chunking) on CoNLL files.

  python -m albert_tf.run_ner --data_dir=conll2003 --output_dir=out/conll \
      --init_checkpoint=albert_base --spm_model_file=albert_base/30k-clean.model \
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=5e-5 --num_train_epochs=3 --warmup_proportion=0.1 \
      --export_dir=out/conll_serving

data_dir holds train.txt, dev.txt (or valid.txt) and test.txt: one token per line with its tag
in the last column, blank lines between sentences, -DOCSTART- lines ignored. The tags come
from train.txt (kept in output_dir/labels.txt). Every checkpoint is evaluated on dev with
conlleval's entity F1 (token accuracy for tags without B-/I- prefixes); the best becomes
model.ckpt-best, which --do_predict uses to write dev_predictions.txt (where there is a dev
file) and test_predictions.txt (the input lines plus the predicted tag) and their scores; a
test.txt of tokens alone (no tag column) is predicted, not scored.
The library behind it: `albert_tf.tasks.NerTask` and `albert_tf.tasks.run_finetuning`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

from absl import app, flags

from albert_tf import cli
from albert_tf.tasks import driver
from albert_tf.tasks.flags import (define_export_flags, define_if_missing,
                                   keep_how_the_run_read, require_action, script_settings)
from albert_tf.tasks.flags import define_flags as define_finetuning_flags
from albert_tf.tasks.options import FinetuningOptions
from albert_tf.tasks.ner import NerTask, run_labels

FLAGS = flags.FLAGS
# Numbers for sentence-level tagging data (CoNLL-2003 sentences are short). Batches are not
# grouped by length: with a loss over tokens, batches of only long or only short sentences
# learnt less per step (docs/finetuning.md, the update).
NER_DEFAULTS = dict(max_seq_length=128, train_batch_size=32, eval_batch_size=32,
                    predict_batch_size=32, learning_rate=5e-5, train_step=1000,
                    save_checkpoints_steps=500, padding="batch")


def define_flags():
    """run_ner's flags (run_classifier's plus --window_stride), where missing."""
    define_finetuning_flags(**NER_DEFAULTS)
    define_if_missing(flags.DEFINE_integer, "window_stride", None,
                      "Pieces between the starts of the overlapping windows that cover a "
                      "sentence longer than --max_seq_length - 2 pieces; default half of that.")
    define_export_flags("a serving SavedModel that takes raw sentences and returns a tag per "
                        "word")


def main(_):
    require_action(FLAGS)
    keep_how_the_run_read(FLAGS, data_flags=("data_dir",))
    if not FLAGS.data_dir and (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise app.UsageError("--data_dir is required (the CoNLL files; --export_dir alone "
                             "exports the run in --output_dir without them)")
    if FLAGS.export_dir and FLAGS.tflite_quantization == "int8":
        raise app.UsageError("--tflite_quantization=int8: run_ner's .tflite takes none, float16 "
                             "or dynamic_int8")
    options = FinetuningOptions.from_flags(FLAGS)
    tokenizer = driver.prepare(options, NerTask.head_names)
    labels = run_labels(FLAGS.output_dir, FLAGS.data_dir, needed=FLAGS.do_train)
    task = NerTask(FLAGS.data_dir, tokenizer, FLAGS.max_seq_length,
                   FLAGS.cached_dir or FLAGS.output_dir, labels, FLAGS.classifier_dropout,
                   FLAGS.window_stride)
    return driver.run_finetuning(task, options, script_settings(FLAGS))


def run(argv=None):
    define_flags()
    for name, value in NER_DEFAULTS.items():
        FLAGS.set_default(name, value)
    cli.run(main, ["output_dir"], argv)


if __name__ == "__main__":
    run()
