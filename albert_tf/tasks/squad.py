"""SQuAD v1.1 / v2.0 fine-tuning: the task, the no-answer threshold of v2 and the serving
wrapper of the exported model."""

import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data.features import cached_features
from albert_tf.data.squad import read_threshold
from albert_tf.data.squad_answers import postprocess
from albert_tf.files import file_digest, write_json
from albert_tf.tasks import squad_metrics
from albert_tf.tasks.base import FinetuningTask
from albert_tf.training.checkpoint_files import recorded_settings

# The TFLite Task Library's BertQuestionAnswerer packs questions and contexts to this length.
TASK_LIBRARY_SEQ_LENGTH = 384


def task_name(version_2):
    return "squad_v2" if version_2 else "squad_v1"


def head_names(version_2, v2_head="answer_class"):
    from albert_tf.modeling.squad import V1_HEAD, V2_HEAD
    return V2_HEAD if version_2 and v2_head == "answer_class" else V1_HEAD


class SquadTask(FinetuningTask):
    """SQuAD v1.1/v2.0 for `run_finetuning`: features from the JSON files (cached in
    `cache_dir`), EM/F1 with the official scripts' rules, predictions.json / nbest / null_odds,
    and the question + context serving export."""

    best_metric = "f1"
    exportable = True

    def __init__(self, tokenizer, train_file, predict_file, cache_dir, version_2=False,
                 max_seq_length=384, doc_stride=128, max_query_length=64, n_best_size=20,
                 max_answer_length=30, start_n_top=5, end_n_top=5, dropout_prob=0.1,
                 null_score_diff_threshold=None, threshold_dev_fraction=0.5,
                 null_threshold_file=None, seed=12345, train_feature_file=None,
                 predict_feature_file=None, v2_head="answer_class"):
        self.name = task_name(version_2)
        self.head_names = head_names(version_2, v2_head)
        self.v2_head = v2_head
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
        # The original's feature files: features written there once, read back after.
        self.feature_files = {True: train_feature_file, False: predict_feature_file}
        self._questions, self._features = {}, {}
        self._tuned_here = False  # whether this run's evaluation chose the threshold

    def build_model(self, encoder):
        from albert_tf.modeling.squad import AlbertSquad
        return AlbertSquad(encoder, self.version_2, self.n_best_size, self.start_n_top,
                           self.end_n_top, self.dropout_prob, self.v2_head)

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
        have_data = self._check_source(path, is_training)
        settings = dict(task=self.name, is_training=is_training,
                        file=file_digest(path) if have_data else None,
                        max_seq_length=self.max_seq_length, doc_stride=self.doc_stride,
                        max_query_length=self.max_query_length,
                        tokenizer=self.tokenizer.digest(),
                        do_lower_case=self.tokenizer.do_lower_case)
        stem = f"{self.name}_{'train' if is_training else 'predict'}"
        features = cached_features(
            self.cache_dir, stem, settings,
            lambda: squad.convert_questions(self.questions(path, is_training), self.tokenizer,
                                            self.max_seq_length, self.doc_stride,
                                            self.max_query_length, is_training),
            path=self.feature_files[is_training],
            flag="train_feature_file" if is_training else "predict_feature_file")
        self._features[path, is_training] = features
        return features

    def _check_source(self, path, is_training):
        """Whether the data file is there; without it the feature file must be."""
        feature_file = self.feature_files[is_training]
        have_data = bool(path) and os.path.isfile(path)
        if not have_data and not (feature_file and tf.io.gfile.exists(feature_file)):
            flag = "train_file" if is_training else "predict_file"
            raise FileNotFoundError(f"--{flag}={path} does not exist" if path else
                                    f"no --{flag} given")
        return have_data

    def check_inputs(self, splits):
        """The files of `splits` (train; dev and test read --predict_file) exist and parse
        (before any training), where no feature file stands in for them."""
        for split in splits:
            is_training = split == "train"
            path = self.train_file if is_training else self.predict_file
            if self._check_source(path, is_training):
                self.questions(path, is_training)

    def train_features(self):
        return self.features(self.train_file, True)

    def eval_sets(self):
        return [("dev", self.features(self.predict_file, False))]

    def predict_sets(self):
        return [("predict", self.features(self.predict_file, False))]

    def _postprocess(self, features, outputs):
        questions = self.questions(self.predict_file, False)
        return questions, postprocess(questions, features, outputs, self.n_best_size,
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
            self._tuned_here = True
        result = squad_metrics.squad_v2({q: golds[q] for q in report}, predictions, null_odds,
                                        threshold)
        result.update(extra, null_score_diff_threshold=threshold)
        return result

    def predict_threshold(self, output_dir, golds=None, predictions=None, null_odds=None):
        """The threshold for predictions.json: the flag, else --null_threshold_file (default
        output_dir/eval_results.txt), else, when --predict_file has answers, the one that
        maximises F1 on them (the original's --do_predict), else 0 (a no-answer probability
        above one half)."""
        if self.threshold is not None:
            return self.threshold
        path = self.null_threshold_file or os.path.join(output_dir, "eval_results.txt")
        if os.path.isfile(path):
            return read_threshold(path)
        if self.null_threshold_file:
            raise FileNotFoundError(f"--null_threshold_file={path} does not exist")
        if golds:
            threshold, _ = squad_metrics.tune_threshold_v2(golds, predictions, null_odds)
            logging.info("null_score_diff_threshold %g: the best F1 on the answers of %s, as "
                         "the original's --do_predict chose it", threshold, self.predict_file)
            return threshold
        logging.warning("no --null_score_diff_threshold and no %s: answering \"\" when "
                        "null_odds > 0", path)
        return 0.0

    def _gold_answers(self):
        """{qid: answers} of --predict_file, or None when it cannot be scored (no answers, or
        a v1 question without one)."""
        golds = {q.qas_id: q.answers for q in self.questions(self.predict_file, False)}
        if not any(golds.values()) or (not self.version_2 and not all(golds.values())):
            return None
        return golds

    def export(self, model, export_dir, lite_options=None, output_dir=None):
        """Serving SavedModel: `question` + `context` strings → [CLS] question (cut to
        max_query_length) [SEP] context (its first window) [SEP] → v1 and the v2 span head
        `start_logits`, `end_logits`; the answer_class head the beam outputs and `cls_logits`;
        plus `input_word_ids` and
        `context_offsets` (each position's context word as a UTF-8 byte range). Its `answer`
        signature answers as --do_predict does, in the run's windows
        (`serving.answer_spans`; a v2 run's threshold from output_dir's eval_results.txt). Also
        export_dir/albert_model.tflite (ids in, the same outputs), albert_model_text.tflite
        (the strings in, the same outputs) and, for v1 at 384 tokens,
        albert_model_task_library.tflite (the TFLite Task Library's BertQuestionAnswerer)."""
        from albert_tf.serving.answer_spans import answer_signature
        from albert_tf.serving.finetuned import export_finetuned

        serving_model = SquadServing(model)
        keys = serving_model.outputs
        threshold = None
        if self.version_2:  # the run's, as its predictions use it
            threshold = (self.predict_threshold(output_dir, None, None, None) if output_dir
                         else self.threshold or 0.0)

        def answer(tokenizer):
            return answer_signature(serving_model, tokenizer, self.max_seq_length,
                                    self.doc_stride, self.max_query_length,
                                    self.max_answer_length, self.version_2, threshold)
        return export_finetuned(
            serving_model, export_dir, self.tokenizer.asset_file, self.tokenizer.do_lower_case,
            self.max_seq_length, ("question", "context"),
            lambda out: {k: out[k] for k in keys + ("input_word_ids",)},
            tflite_name="albert_model.tflite",
            tflite_output_fn=lambda out: {k: out[k] for k in keys},
            first_segment_length=self.max_query_length,
            text_output_fn=lambda out: {k: out[k] for k in keys + ("input_word_ids",)},
            lite_options=lite_options, task_library=self._task_library(), text_offsets=True,
            more_signatures={"answer": answer})

    def _task_library(self):
        """The outputs of albert_model_task_library.tflite, which the TFLite Task Library's
        BertQuestionAnswerer runs (v1 start and end logits at its fixed 384 tokens), or None."""
        if (self.version_2 or self.max_seq_length != TASK_LIBRARY_SEQ_LENGTH
                or not self.tokenizer.do_lower_case):
            logging.info("No albert_model_task_library.tflite: the TFLite Task Library's "
                         "BertQuestionAnswerer takes v1 models at --max_seq_length=%d, "
                         "lowercased", TASK_LIBRARY_SEQ_LENGTH)
            return None
        return {"start_logits": "start_logits", "end_logits": "end_logits"}

    def write_predictions(self, name, features, outputs, output_dir):
        """predictions.json, nbest_predictions.json, v2 null_odds.json; returns the official
        metrics of these predictions against --predict_file's answers (None without them):
        v1 exact_match, f1; v2 exact, f1, total, HasAns_/NoAns_ and the threshold used."""
        _, (predictions, nbest, null_odds) = self._postprocess(features, outputs)
        golds = self._gold_answers()
        if self.version_2:
            threshold = self.predict_threshold(output_dir, golds, predictions, null_odds)
            predictions = {q: "" if null_odds[q] > threshold else text
                           for q, text in predictions.items()}
            write_json(os.path.join(output_dir, "null_odds.json"), null_odds)
            logging.info("v2 predictions use null_score_diff_threshold=%g", threshold)
        write_json(os.path.join(output_dir, "predictions.json"), predictions)
        write_json(os.path.join(output_dir, "nbest_predictions.json"), nbest)
        logging.info("Wrote %d predictions to %s", len(predictions),
                     os.path.join(output_dir, "predictions.json"))
        if golds is None:
            return None
        if not self.version_2:
            return squad_metrics.squad_v1(golds, predictions)
        # The official v2.0 dict of predictions.json as written: null_odds as the no-answer
        # scores at the threshold applied above (at the official script's default 1.0 they
        # blanked the answers whose null_odds lie between 1.0 and a higher threshold); not on
        # the questions the run's evaluation chose that threshold on.
        tuned = self._threshold_questions(output_dir)
        extra = {"threshold_questions": len(tuned)} if tuned else {}
        return dict(squad_metrics.squad_v2({q: a for q, a in golds.items() if q not in tuned},
                                           predictions, null_odds, threshold),
                    null_score_diff_threshold=threshold, **extra)

    def _threshold_questions(self, output_dir):
        """The ids of the --predict_file questions on which the run's evaluation (this one's, or
        an earlier one's in run.json) chose the threshold its eval_results.txt holds (the same
        file, split as evaluate does), where the predictions use that threshold; else none."""
        path = os.path.join(output_dir, "eval_results.txt")
        if self.threshold is not None or self.null_threshold_file or not os.path.isfile(path):
            return set()
        with open(path, encoding="utf-8") as f:
            if not re.search(r"^threshold_questions = ", f.read(), re.MULTILINE):
                return set()
        evaluated = recorded_settings(output_dir).get("predict_file")
        if not self._tuned_here and evaluated != os.path.abspath(self.predict_file):
            return set()
        tune, _ = split_by_paragraph(self.questions(self.predict_file, False),
                                     self.threshold_dev_fraction, self.seed)
        return set(tune)


class SquadServing:
    """An AlbertSquad called on packed `[CLS] question [SEP] context [SEP]` ids alone: adds the
    p_mask of the training features (only [CLS] and the context tokens can be answers) and
    passes `input_word_ids` through. What the --export_dir exports wrap."""

    def __init__(self, model):
        self.model = model
        # What the exports return: the v2 answer_class head's beam, else the span logits.
        self.outputs = (("start_log_probs", "start_top_log_probs", "start_top_index",
                         "end_top_log_probs", "end_top_index", "cls_logits") if model.beam else
                        ("start_logits", "end_logits"))
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
