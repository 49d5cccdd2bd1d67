"""Fine-tune ALBERT on RACE (4-way multiple-choice reading comprehension), original flags.

  python -m albert_tf.run_race --data_dir=data --output_dir=out/race \
      --init_checkpoint=albert_base --spm_model_file=albert_base/30k-clean.model \
      --do_train --do_eval --do_predict --max_seq_length=512 --max_qa_length=128 \
      --train_batch_size=32 --learning_rate=1e-5 --train_step=12000 --warmup_step=1000

data_dir holds RACE/{train,dev,test}/{middle,high}/ as released (one JSON file per article) or
with the original's all.txt. Every checkpoint is evaluated on dev (accuracy on middle, high and
all); the best becomes model.ckpt-best, which --do_predict scores on test (no TPU needed).
"""

import json
import os

import numpy as np
from absl import app, flags, logging

from albert_tf import finetuning
from albert_tf.config import atomic_write_text

FLAGS = flags.FLAGS
# The original run_race's numbers and do_train/do_eval=True. Flags are defined by define_flags()
# (called by run()), not at import, and only where missing: run_classifier and run_squad define
# some of the same names (task_name, train_file, predict_file, dropout_prob) at import.
RACE_DEFAULTS = dict(max_seq_length=512, train_batch_size=32, eval_batch_size=8,
                     predict_batch_size=8, learning_rate=1e-5, train_step=12000,
                     warmup_step=1000, save_checkpoints_steps=100, do_train=True, do_eval=True)


def define_flags():
    """run_race's flags (the original's plus the shared fine-tuning ones), where missing."""
    def define(kind, name, *args):
        if name not in FLAGS:
            kind(name, *args)
    define(flags.DEFINE_string, "task_name", "race", "Accepted for compatibility; only race.")
    for name in ("train_file", "eval_file", "predict_file"):
        define(flags.DEFINE_string, name, None, "Accepted for compatibility and ignored by "
               "run_race: features are cached in --cached_dir under names keyed by their "
               "settings.")
    define(flags.DEFINE_integer, "max_qa_length", 128,
           "Longest question+option in tokens; longer ones keep their last tokens.")
    define(flags.DEFINE_bool, "high_only", False, "Use only RACE-H.")
    define(flags.DEFINE_bool, "middle_only", False, "Use only RACE-M.")
    define(flags.DEFINE_float, "dropout_prob", 0.1, "Dropout on each choice's pooled output.")
    define(flags.DEFINE_integer, "num_keep_checkpoint", 5,
           "Accepted for compatibility; see --keep_checkpoint_max.")
    finetuning.define_flags(**{k: v for k, v in RACE_DEFAULTS.items()
                               if k not in ("warmup_step", "do_train", "do_eval")})


def accuracies(levels, labels, outputs, prefix="eval_"):
    """Accuracy and loss over all questions plus accuracy per level (middle, high) present."""
    hits = np.argmax(outputs["logits"], -1) == labels
    result = {f"{prefix}accuracy": float(np.mean(hits)),
              f"{prefix}loss": float(np.mean(outputs["per_example_loss"]))}
    for level in ("middle", "high"):
        if np.any(levels == level):
            result[f"{prefix}accuracy_{level}"] = float(np.mean(hits[levels == level]))
    return result


class RaceTask:
    """RACE for finetuning.run_finetuning."""

    name = "race"
    best_metric = "eval_accuracy"
    head_names = ("output_weights", "output_bias")

    def __init__(self, data_dir, tokenizer, max_seq_length, max_qa_length, cache_dir,
                 high_only=False, middle_only=False, dropout_prob=0.1):
        from albert_tf.data import race
        self.levels = race.levels(high_only, middle_only)
        race.check_lengths(max_seq_length, max_qa_length)
        self.data_dir = data_dir
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self.cache_dir = cache_dir
        self.high_only, self.middle_only = high_only, middle_only
        self.dropout_prob = dropout_prob

    def build_model(self, encoder):
        from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
        return AlbertMultipleChoice(encoder, self.dropout_prob)

    def features(self, split):
        from albert_tf.data import race
        root = race.split_dir(self.data_dir, split)
        settings = dict(task="race", split=split, data=_tree_digest(root, self.levels),
                        levels=self.levels, max_seq_length=self.max_seq_length,
                        max_qa_length=self.max_qa_length,
                        tokenizer=finetuning.tokenizer_digest(self.tokenizer),
                        do_lower_case=self.tokenizer.do_lower_case)
        stem = "race_" + split + ("" if len(self.levels) == 2 else "_" + self.levels[0])
        return finetuning.cached_features(
            self.cache_dir, stem, settings,
            lambda: race.convert_examples(
                race.read_examples(self.data_dir, split, self.high_only, self.middle_only),
                self.tokenizer, self.max_seq_length, self.max_qa_length))

    def train_features(self):
        return self.features("train")

    def eval_sets(self):
        return [("dev", self.features("dev"))]

    def eval_metrics(self, name, features, outputs):
        return accuracies(features["levels"], features["label_ids"], outputs)

    def predict_sets(self):
        return [("test", self.features("test"))]

    def write_predictions(self, name, features, outputs, output_dir):
        """predict_results.txt (test accuracies, the original's file) and <name>_predictions.jsonl
        (one line per question: id, level, prediction, answer, probabilities)."""
        from albert_tf.data.race import LETTERS
        from albert_tf.training import write_eval_results
        result = accuracies(features["levels"], features["label_ids"], outputs)
        write_eval_results(os.path.join(output_dir, "predict_results.txt"), result)
        lines = []
        for guid, level, label, probs in zip(features["guids"], features["levels"],
                                             features["label_ids"], outputs["probabilities"]):
            lines.append(json.dumps({"id": str(guid), "level": str(level),
                                     "prediction": LETTERS[int(np.argmax(probs))],
                                     "answer": LETTERS[int(label)],
                                     "probabilities": [round(float(p), 6) for p in probs]}))
        path = os.path.join(output_dir, f"{name}_predictions.jsonl")
        atomic_write_text(path, "".join(line + "\n" for line in lines))
        logging.info("RACE %s: %s; %d predictions in %s", name, "  ".join(
            f"{k} {v:.4f}" for k, v in sorted(result.items())), len(lines), path)
        return result


def _tree_digest(root, levels):
    """A digest of the file names, sizes and contents a split's features are built from."""
    import hashlib
    digest = hashlib.sha256()
    for level in levels:
        directory = os.path.join(root, level)
        if not os.path.isdir(directory):
            continue  # read_examples reports it
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not name.startswith("."):
                with open(path, "rb") as f:
                    digest.update(f"{level}/{name}\0".encode() + f.read() + b"\0")
    return digest.hexdigest()


def main(_):
    if (FLAGS.task_name or "race").lower() != "race":
        raise app.UsageError(f"--task_name={FLAGS.task_name!r}: run_race only runs race")
    if FLAGS.high_only and FLAGS.middle_only:
        raise app.UsageError("--high_only and --middle_only exclude each other")
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise app.UsageError("at least one of --do_train, --do_eval, --do_predict must be true")
    tokenizer = finetuning.prepare(FLAGS, ("train_file", "eval_file", "predict_file"),
                                   "run_race reads --data_dir and caches features in --cached_dir")
    task = RaceTask(FLAGS.data_dir, tokenizer, FLAGS.max_seq_length, FLAGS.max_qa_length,
                    FLAGS.cached_dir or FLAGS.output_dir, FLAGS.high_only, FLAGS.middle_only,
                    FLAGS.dropout_prob)
    return finetuning.run_finetuning(task, FLAGS)


def run():
    define_flags()
    for name, value in RACE_DEFAULTS.items():
        FLAGS.set_default(name, value)
    flags.mark_flags_as_required(["data_dir", "output_dir"])
    app.run(finetuning.command(main))


if __name__ == "__main__":
    run()
