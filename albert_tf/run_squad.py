"""Fine-tune ALBERT on SQuAD v1.1 or (with --version_2_with_negative) v2.0.

  python -m albert_tf.run_squad --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --version_2_with_negative --init_checkpoint=albert_base --output_dir=out/squad2 \
      --spm_model_file=albert_base/30k-clean.model --do_train --do_eval --do_predict \
      --train_batch_size=48 --learning_rate=3e-5 --save_checkpoints_steps=1000

Every checkpoint is evaluated on --predict_file (F1 selects model.ckpt-best); --do_predict
writes predictions.json, nbest_predictions.json and, for v2, null_odds.json. The v2 no-answer
threshold is --null_score_diff_threshold, or chosen on a held-out share of the evaluation
paragraphs (--threshold_dev_fraction) and then reported on the other paragraphs only.
"""

import json
import os
import re

import numpy as np
from absl import app, flags, logging

from albert_tf import finetuning, squad_metrics
from albert_tf.config import atomic_write_text

FLAGS = flags.FLAGS


# The original run_squad_v1/v2 numbers; run() makes them the defaults even when another script
# in the process (tests) defined the shared flags first.
SQUAD_DEFAULTS = dict(max_seq_length=384, train_batch_size=32, eval_batch_size=8,
                      predict_batch_size=8, learning_rate=5e-5, save_checkpoints_steps=1000)


def _define_flags():
    """run_squad's flags where missing (run_race defines train_file, predict_file and
    dropout_prob too)."""
    def missing(define):
        return lambda name, *args: name in FLAGS or define(name, *args)
    S, B, I, F = (missing(flags.DEFINE_string), missing(flags.DEFINE_bool),
                  missing(flags.DEFINE_integer), missing(flags.DEFINE_float))
    S("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
    S("predict_file", None, "SQuAD JSON to evaluate (--do_eval) and predict, e.g. dev-v1.1.json.")
    for name in ("train_feature_file", "predict_feature_file", "predict_feature_left_file"):
        S(name, None, "Accepted for compatibility: features are cached in --cached_dir under "
                      "a key of every setting that changes them.")
    I("doc_stride", 128, "Tokens between the starts of consecutive context windows.")
    I("max_query_length", 64, "Question tokens kept (the rest is cut).")
    I("n_best_size", 20, "Candidate answers kept per question in nbest_predictions.json.")
    I("max_answer_length", 30, "Longest answer, in tokens.")
    B("version_2_with_negative", False, "SQuAD 2.0: questions may be unanswerable.")
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
    S("export_dir", None, "Write the fine-tuned model here (from model.ckpt-best, else the "
                          "latest checkpoint in --output_dir): a raw-string serving SavedModel "
                          "(question + context) and, for v1, <export_dir>/albert_model.tflite "
                          "(see docs/export.md).")
    F("num_train_epochs", 3.0, "Epochs to train (default 3 unless --train_step is given).")
    F("warmup_proportion", 0.1,
      "Warmup share of training (default 0.1 unless --warmup_step is given).")
    finetuning.define_flags(**SQUAD_DEFAULTS)


_define_flags()


class SquadTask:
    """SQuAD v1.1/v2.0 for finetuning.run_finetuning."""

    best_metric = "f1"

    def __init__(self, tokenizer, train_file, predict_file, cache_dir, version_2=False,
                 max_seq_length=384, doc_stride=128, max_query_length=64, n_best_size=20,
                 max_answer_length=30, start_n_top=5, end_n_top=5, dropout_prob=0.1,
                 null_score_diff_threshold=None, threshold_dev_fraction=0.5,
                 null_threshold_file=None, seed=12345):
        from albert_tf.modeling.squad import V1_HEAD, V2_HEAD
        self.name = "squad_v2" if version_2 else "squad_v1"
        self.head_names = V2_HEAD if version_2 else V1_HEAD
        self.tokenizer = tokenizer
        self.train_file, self.predict_file = train_file, predict_file
        self.cache_dir = cache_dir
        self.version_2 = version_2
        self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
        self.max_query_length = max_query_length
        self.n_best_size, self.max_answer_length = n_best_size, max_answer_length
        self.start_n_top, self.end_n_top = start_n_top, end_n_top
        self.dropout_prob = dropout_prob
        self.threshold = null_score_diff_threshold
        self.threshold_dev_fraction = threshold_dev_fraction
        self.null_threshold_file = null_threshold_file
        self.seed = seed
        self._questions, self._features = {}, {}

    def build_model(self, encoder):
        from albert_tf.modeling.squad import AlbertSquad
        return AlbertSquad(encoder, self.version_2, self.n_best_size, self.start_n_top,
                           self.end_n_top, self.dropout_prob)

    def questions(self, path, is_training):
        from albert_tf.data import squad
        if (path, is_training) not in self._questions:
            if not path:
                raise ValueError(f"--{'train' if is_training else 'predict'}_file is required")
            self._questions[path, is_training] = squad.read_squad(
                path, is_training, self.version_2)[0]
        return self._questions[path, is_training]

    def features(self, path, is_training):
        from albert_tf.data import squad
        if (path, is_training) in self._features:
            return self._features[path, is_training]
        if not path or not os.path.isfile(path):
            flag = "train_file" if is_training else "predict_file"
            raise FileNotFoundError(f"--{flag}={path} does not exist")
        settings = dict(task=self.name, is_training=is_training, file=finetuning.file_digest(path),
                        max_seq_length=self.max_seq_length, doc_stride=self.doc_stride,
                        max_query_length=self.max_query_length,
                        tokenizer=finetuning.tokenizer_digest(self.tokenizer),
                        do_lower_case=self.tokenizer.do_lower_case)
        stem = f"{self.name}_{'train' if is_training else 'predict'}"
        features = finetuning.cached_features(
            self.cache_dir, stem, settings,
            lambda: squad.convert_questions(self.questions(path, is_training), self.tokenizer,
                                            self.max_seq_length, self.doc_stride,
                                            self.max_query_length, is_training))
        self._features[path, is_training] = features
        return features

    def train_features(self):
        return self.features(self.train_file, True)

    def eval_sets(self):
        return [("dev", self.features(self.predict_file, False))]

    def predict_sets(self):
        return [("predict", self.features(self.predict_file, False))]

    def _postprocess(self, features, outputs):
        from albert_tf.data import squad
        questions = self.questions(self.predict_file, False)
        return questions, squad.postprocess(questions, features, outputs, self.n_best_size,
                                            self.max_answer_length, self.version_2)

    def eval_metrics(self, name, features, outputs):
        questions, (predictions, _, null_odds) = self._postprocess(features, outputs)
        golds = {q.qas_id: q.answers for q in questions}
        if not self.version_2:
            missing = [qid for qid, answers in golds.items() if not answers]
            if missing:
                raise ValueError(f"{self.predict_file}: question {missing[0]!r} (and "
                                 f"{len(missing) - 1} more) has no gold answer to evaluate")
            return squad_metrics.squad_v1(golds, predictions)
        threshold, report = self.threshold, list(golds)
        extra = {}
        if threshold is None:
            tune, report = split_by_paragraph(questions, self.threshold_dev_fraction, self.seed)
            threshold, tune_f1 = squad_metrics.tune_threshold_v2(
                {q: golds[q] for q in tune}, predictions, null_odds)
            extra = {"threshold_questions": len(tune), "threshold_f1": tune_f1}
        result = squad_metrics.squad_v2({q: golds[q] for q in report}, predictions, null_odds,
                                        threshold)
        result.update(extra, null_score_diff_threshold=threshold)
        return result

    def predict_threshold(self, output_dir):
        """The threshold for predictions.json: the flag, else --null_threshold_file (default
        output_dir/eval_results.txt), else 0 (a no-answer probability above one half)."""
        if self.threshold is not None:
            return self.threshold
        path = self.null_threshold_file or os.path.join(output_dir, "eval_results.txt")
        if os.path.isfile(path):
            return read_threshold(path)
        if self.null_threshold_file:
            raise FileNotFoundError(f"--null_threshold_file={path} does not exist")
        logging.warning("no --null_score_diff_threshold and no %s: answering \"\" when "
                        "null_odds > 0", path)
        return 0.0

    def export(self, model, export_dir):
        """Serving SavedModel: `question` + `context` strings → [CLS] question (cut to
        max_query_length) [SEP] context (its first window) [SEP] → v1 `start_logits`,
        `end_logits`; v2 the beam outputs and `cls_logits`; plus `input_word_ids`. v1 also
        writes export_dir/albert_model.tflite (ids in, start/end logits out)."""
        from albert_tf import export

        serving_model = SquadServing(model)
        keys = SquadServing.OUTPUTS[self.version_2]
        return export.export_finetuned(
            serving_model, export_dir, self.spm_model_file, self.tokenizer.do_lower_case,
            self.max_seq_length, ("question", "context"),
            lambda out: {k: out[k] for k in keys + ("input_word_ids",)},
            tflite_name=None if self.version_2 else "albert_model.tflite",
            tflite_output_fn=lambda out: {k: out[k] for k in keys},
            first_segment_length=self.max_query_length)

    def write_predictions(self, name, features, outputs, output_dir):
        _, (predictions, nbest, null_odds) = self._postprocess(features, outputs)
        if self.version_2:
            threshold = self.predict_threshold(output_dir)
            predictions = {q: "" if null_odds[q] > threshold else text
                           for q, text in predictions.items()}
            _write_json(os.path.join(output_dir, "null_odds.json"), null_odds)
            logging.info("v2 predictions use null_score_diff_threshold=%g", threshold)
        _write_json(os.path.join(output_dir, "predictions.json"), predictions)
        _write_json(os.path.join(output_dir, "nbest_predictions.json"), nbest)
        logging.info("Wrote %d predictions to %s", len(predictions),
                     os.path.join(output_dir, "predictions.json"))


class SquadServing:
    """An AlbertSquad called on packed `[CLS] question [SEP] context [SEP]` ids alone: adds the
    p_mask of the training features (only [CLS] and the context tokens can be answers) and
    passes `input_word_ids` through. What the --export_dir exports wrap."""

    OUTPUTS = {False: ("start_logits", "end_logits"),
               True: ("start_log_probs", "start_top_log_probs", "start_top_index",
                      "end_top_log_probs", "end_top_index", "cls_logits")}

    def __init__(self, model):
        self.model = model
        self.config = model.config
        self.variables = model.variables
        self.trainable_variables = model.trainable_variables

    def __call__(self, inputs, training=False):
        import tensorflow as tf
        types, mask = inputs["input_type_ids"], inputs["input_mask"]
        positions = tf.range(tf.shape(types)[1])[None]
        last = tf.reduce_sum(tf.cast(mask, tf.int32), -1, keepdims=True) - 1  # the final [SEP]
        answerable = (positions == 0) | ((tf.cast(types, tf.int32) == 1) & (positions < last))
        features = dict(inputs, p_mask=1 - tf.cast(answerable, tf.int32))
        out = dict(self.model(features, training=training))
        out["input_word_ids"] = inputs["input_word_ids"]
        return out


def split_by_paragraph(questions, fraction, seed):
    """(threshold qids, report qids): a seeded share `fraction` of the paragraphs, so that
    questions on one context never fall on both sides."""
    if not 0 < fraction < 1:
        raise ValueError(f"--threshold_dev_fraction must be in (0, 1), got {fraction}; or give "
                         f"--null_score_diff_threshold")
    paragraphs = sorted({q.paragraph for q in questions})
    if len(paragraphs) < 2:
        raise ValueError("choosing the v2 threshold needs at least two paragraphs in "
                         "--predict_file; give --null_score_diff_threshold instead")
    order = np.random.RandomState(seed).permutation(len(paragraphs))
    count = min(max(1, int(round(fraction * len(paragraphs)))), len(paragraphs) - 1)
    tune = {paragraphs[i] for i in order[:count]}
    return ([q.qas_id for q in questions if q.paragraph in tune],
            [q.qas_id for q in questions if q.paragraph not in tune])


def read_threshold(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    match = re.search(r"null_score_diff_threshold\s*=\s*(\S+)", text)
    try:
        return float(match.group(1) if match else text.strip())
    except ValueError:
        raise ValueError(f"{path} holds no threshold (a number or a "
                         f"'null_score_diff_threshold = x' line)") from None


def _write_json(path, value):
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def main(_):
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
        raise app.UsageError("at least one of --do_train, --do_eval, --do_predict must be true "
                             "(or --export_dir)")
    if FLAGS.do_train and not FLAGS.train_file:
        raise app.UsageError("--do_train needs --train_file")
    if (FLAGS.do_eval or FLAGS.do_predict) and not FLAGS.predict_file:
        raise app.UsageError("--do_eval and --do_predict need --predict_file")
    if (FLAGS.version_2_with_negative and FLAGS.do_eval and FLAGS.null_score_diff_threshold is None
            and not 0 < FLAGS.threshold_dev_fraction < 1):
        raise app.UsageError(f"--threshold_dev_fraction must be in (0, 1), got "
                             f"{FLAGS.threshold_dev_fraction}; or give --null_score_diff_threshold")
    # SQuAD's defaults are epochs and a warmup share; explicit step counts take over.
    if not FLAGS["num_train_epochs"].present:
        FLAGS.num_train_epochs = None if FLAGS["train_step"].present else 3.0
    if not FLAGS["warmup_proportion"].present:
        FLAGS.warmup_proportion = None if FLAGS["warmup_step"].present else 0.1
    tokenizer = finetuning.prepare(
        FLAGS, ("train_feature_file", "predict_feature_file", "predict_feature_left_file"),
        "superseded by the keyed feature cache in --cached_dir")
    task = SquadTask(
        tokenizer, FLAGS.train_file, FLAGS.predict_file, FLAGS.cached_dir or FLAGS.output_dir,
        FLAGS.version_2_with_negative, FLAGS.max_seq_length, FLAGS.doc_stride,
        FLAGS.max_query_length, FLAGS.n_best_size, FLAGS.max_answer_length, FLAGS.start_n_top,
        FLAGS.end_n_top, FLAGS.dropout_prob, FLAGS.null_score_diff_threshold,
        FLAGS.threshold_dev_fraction, FLAGS.null_threshold_file, FLAGS.random_seed)
    if FLAGS.export_dir:
        task.spm_model_file = finetuning.spm_model_path(FLAGS.spm_model_file,
                                                        FLAGS.albert_hub_module_handle)
    return finetuning.run_finetuning(task, FLAGS)


def run():
    for name, value in SQUAD_DEFAULTS.items():
        FLAGS.set_default(name, value)
    flags.mark_flags_as_required(["output_dir"])
    app.run(finetuning.command(main))


if __name__ == "__main__":
    run()
