"""Extractive question answering from a run_squad output_dir: each context read in windows as
the run read its predict file, the answer picked as its predictions.json (data.squad,
data.squad_answers) and, for a v2 model, "" where the no-answer score passes the run's
threshold; or from its serving export, whose `answer` signature does the same in its graph
(serving.answer_spans)."""

import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data.squad import Question, convert_questions, read_threshold
from albert_tf.data.squad_answers import postprocess
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.serving.predictor import (PredictError, Predictor, batches, check_pairs,
                                         inference_function, pad_batch)

# run_squad's defaults, for a checkpoint whose run.json does not say.
DEFAULT_DOC_STRIDE, DEFAULT_MAX_QUERY_LENGTH = 128, 64
N_BEST_SIZE, MAX_ANSWER_LENGTH = 20, 30


def default_doc_stride(max_seq_length, max_query_length=DEFAULT_MAX_QUERY_LENGTH):
    """Without a run's doc_stride: run_squad's 128, or half the room a longest question leaves
    where that is less (128 apart in 128-token windows left gaps: pieces in no window)."""
    return min(DEFAULT_DOC_STRIDE, max(1, (max_seq_length - max_query_length - 3) // 2))


class Answerer(Predictor):
    """Answers (text, character span in the context, probability) to questions on contexts,
    from a run_squad output_dir (its model.ckpt-best and run.json: max_seq_length, doc_stride,
    max_query_length, max_answer_length, n_best_size; a v2 run's threshold from its
    eval_results.txt)."""

    def __init__(self, model, window_stride=None, **kwargs):
        super().__init__(model, **kwargs)
        kind, arrays = self.source.kind, self.source.arrays
        self._served = None
        if kind == "text_squad":
            self._served = self.source.loaded.signatures.get("answer")
            if self._served is None:
                raise PredictError(f"{self.source.path} is a run_squad serving export without "
                                   f"the answer signature (exported before it had one): export "
                                   f"the run again, or give its output_dir")
            if window_stride:
                logging.warning("--window_stride is not used: %s reads contexts in the windows "
                                "it was exported with", self.source.path)
            self.version_2 = "null_odds" in self._served.structured_outputs
            logging.info("SQuAD %s serving export: answers from its answer signature, in the "
                         "run's windows", "v2.0" if self.version_2 else "v1.1")
            return
        if kind.startswith("tflite"):
            raise PredictError(f"{self.source.path} is a LiteRT file, which predict does not "
                               f"answer with (it runs in LiteRT apps: export.md): give the "
                               f"run_squad output_dir or its serving export directory")
        if kind != "checkpoint":
            raise PredictError(f"{self.source.path} is a {kind} export, which has no SQuAD "
                               f"head: give a run_squad output_dir or its serving export")
        settings = self.run_settings
        if "cls/squad/output_weights" in arrays:  # v1's head, or v2's span head (run.json)
            self.version_2, head = bool(settings.get("version_2_with_negative")), "span"
        elif "start_logits/dense/kernel" in arrays:
            self.version_2, head = True, "answer_class"
        else:
            raise PredictError(f"{self.source.path} has no SQuAD head (cls/squad/ or "
                               f"start_logits/): give a run_squad output_dir or its serving export")
        self.max_query_length = settings.get("max_query_length") or DEFAULT_MAX_QUERY_LENGTH
        self.doc_stride = window_stride or settings.get("doc_stride") or default_doc_stride(
            self.max_seq_length, self.max_query_length)
        self.max_answer_length = settings.get("max_answer_length") or MAX_ANSWER_LENGTH
        self.n_best_size = settings.get("n_best_size") or N_BEST_SIZE  # what probability is over
        if self.max_seq_length <= self.max_query_length + 3:
            raise PredictError(f"--max_seq_length={self.max_seq_length} leaves no room for the "
                               f"context after a question of up to {self.max_query_length} "
                               f"pieces")
        model = self.source.build(AlbertSquad, version_2=self.version_2,
                                  n_best_size=self.n_best_size,
                                  start_n_top=settings.get("start_n_top") or 5,
                                  end_n_top=settings.get("end_n_top") or 5, v2_head=head)
        self._call = inference_function(model)  # with the top-k spans (AlbertSquad.eval_outputs)
        self._outputs = model.top_outputs
        self.threshold = self._threshold(settings) if self.version_2 else None
        logging.info("SQuAD %s: contexts in windows of %d tokens, %d apart (%s), questions "
                     "cut to %d pieces%s", "v2.0" if self.version_2 else "v1.1",
                     self.max_seq_length, self.doc_stride, "--window_stride" if window_stride
                     else "the run's doc_stride" if settings.get("doc_stride") else "default",
                     self.max_query_length,
                     "" if self.threshold is None else
                     f", no answer where null_odds > {self.threshold:g}")

    @property
    def text_columns(self):
        return ("question", "context")

    def _threshold(self, settings):
        """The run's null_score_diff_threshold: its flag, else the one its evaluation chose
        (eval_results.txt), else 0 (a no-answer probability above one half)."""
        if settings.get("null_score_diff_threshold") is not None:
            return float(settings["null_score_diff_threshold"])
        path = os.path.join(self.source.directory, "eval_results.txt")
        if os.path.isfile(path):
            return read_threshold(path)
        logging.warning("no eval_results.txt in %s (the run's chosen threshold): answering \"\" "
                        "when null_odds > 0", self.source.directory)
        return 0.0

    def __call__(self, texts, texts_b=None):
        questions_, contexts = check_pairs(texts, texts_b)
        if any(c is None for c in contexts):
            raise PredictError("--task=qa answers a question (--text) on its context "
                               "(--text_b); a table --input_file: question and context columns")
        paragraphs = {}
        questions = [Question(str(i), q, c, paragraphs.setdefault(c, len(paragraphs)), [])
                     for i, (q, c) in enumerate(zip(questions_, contexts))]
        for i, q in enumerate(questions):
            if not q.question.strip() or not q.context.strip():
                raise PredictError(f"input {i + 1} has an empty "
                                   f"{'question' if not q.question.strip() else 'context'}")
        if self._served is not None:
            return self._served_answers(questions)
        tokenizer = self.tokenizer
        features = convert_questions(questions, tokenizer, self.max_seq_length, self.doc_stride,
                                     self.max_query_length, is_training=False)
        outputs = self._run(features)
        _, nbest, null_odds = postprocess(questions, features, outputs, self.n_best_size,
                                          self.max_answer_length, self.version_2, char_spans=True)
        results = []
        for q in questions:
            best = nbest[q.qas_id][0]
            result = {"question": q.question, "answer": best["text"], "start": best["start"],
                      "end": best["end"], "probability": round(best["probability"], 6)}
            if self.version_2:
                odds = null_odds[q.qas_id]
                result["null_odds"] = round(odds, 6)
                if odds > self.threshold:
                    result.update(answer="", start=None, end=None, best_span=best["text"])
            results.append(result)
        return results

    def _served_answers(self, questions):
        """The export's answers: its score (start + end logit; v2 log-probability) in place of
        the n-best probability, which it does not compute."""
        results = []
        for part in batches(len(questions), self.batch_size):
            out = self._served(question=tf.constant([q.question for q in questions[part]]),
                               context=tf.constant([q.context for q in questions[part]]))
            out = {k: v.numpy() for k, v in out.items()}
            for i, q in enumerate(questions[part]):
                answer = out["answer"][i].decode("utf-8")
                result = {"question": q.question, "answer": answer,
                          "start": int(out["start"][i]) if answer else None,
                          "end": int(out["end"][i]) if answer else None,
                          "score": round(float(out["score"][i]), 6)}
                if self.version_2:
                    result["null_odds"] = round(float(out["null_odds"][i]), 6)
                    if not answer:
                        result["best_span"] = out["best_span"][i].decode("utf-8")
                results.append(result)
        return results

    def _run(self, features):
        """The model's top-k outputs for every window, in order."""
        starts = np.concatenate([[0], np.cumsum(features["lengths"])])
        rows = [(features["input_word_ids"][a:b], features["input_type_ids"][a:b])
                for a, b in zip(starts[:-1], starts[1:])]
        p_mask = [features["p_mask"][a:b] for a, b in zip(starts[:-1], starts[1:])]
        chunks = []
        for part in batches(len(rows), self.batch_size):
            inputs = pad_batch(rows[part])
            padded = np.ones_like(inputs["input_word_ids"])
            for i, mask in enumerate(p_mask[part]):
                padded[i, :len(mask)] = mask
            inputs["p_mask"] = padded
            out = self._call(inputs)
            chunks.append({k: np.asarray(out[k]) for k in self._outputs})
        return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
