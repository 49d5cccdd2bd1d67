"""Token classification on raw sentences: words split on whitespace, tags per word (and the
entities they form) from a run_ner output_dir or its serving export. The in-graph function
below is both the export's signature and the checkpoint path of `Tagger`."""

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data.conll import LABELS_FILE, chunks, read_labels
from albert_tf.formats.hf import hf_tags
from albert_tf.data.tagging import (check_window, default_stride, plan_windows,
                                    window_begins, window_inputs)
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.serving.classify import label_names
from albert_tf.serving.finetuned import save_serving
from albert_tf.serving.predictor import PredictError, Predictor, batches
from albert_tf.serving.saved_model import float32_model
from albert_tf.tokenization import in_graph_tokenizer
from albert_tf.tokenization.in_graph import split_words
from albert_tf.tracing import graph_function

SENTENCES = "sentences"


def tagging_function(model, tokenizer, max_seq_length, labels, stride=None):
    """A tf.function: string sentences [batch] → `words`, `tags` (string [batch, most words],
    "" past each sentence's end), `scores` (the tag's probability) and `word_count` [batch].
    Windows are cut as for training (data.tagging), all of a call's in one model call."""
    stride = stride or default_stride(max_seq_length)
    check_window(max_seq_length, stride)
    label_table = tf.constant(list(labels))

    @graph_function(input_signature=[tf.TensorSpec([None], tf.string, name=SENTENCES)])
    def tag(sentences):
        words = split_words(sentences)[0]
        pieces = tokenizer.tokenize(words.flat_values)
        # A word with no piece (only characters the tokenizer drops) is read as one [UNK].
        counts = pieces.row_lengths()
        padded = tf.concat([pieces, tf.fill([tf.size(counts), 1], tokenizer.unk_id)], axis=1)
        keep = tf.ragged.range(padded.row_lengths()) < tf.maximum(counts, 1)[:, None]
        pieces = tf.ragged.boolean_mask(padded, keep)
        per_word = tf.RaggedTensor.from_row_lengths(pieces.row_lengths(), words.row_lengths())
        plan = plan_windows(per_word, max_seq_length - 2, stride)
        by_sentence = tf.RaggedTensor.from_row_lengths(pieces.flat_values,
                                                       tf.reduce_sum(per_word, axis=1))
        inputs = window_inputs(tf.cast(by_sentence.flat_values, tf.int32),
                               window_begins(by_sentence, plan), plan["window_length"],
                               tokenizer.cls_id, tokenizer.sep_id)
        probabilities = model(inputs, training=False)["probabilities"]
        at = tf.stack([plan["word_window"], plan["word_position"] + 1], axis=1)
        per_word_probabilities = tf.gather_nd(probabilities, at)
        best = tf.argmax(per_word_probabilities, -1, output_type=tf.int32)
        rows = words.row_lengths()

        def dense(values, default):
            return tf.RaggedTensor.from_row_lengths(values, rows).to_tensor(default)
        return {"words": words.to_tensor(""), "tags": dense(tf.gather(label_table, best), ""),
                "scores": dense(tf.reduce_max(per_word_probabilities, -1), 0.0),
                "word_count": tf.cast(rows, tf.int32)}
    return tag


def export_tagger(model, export_dir, vocabulary, do_lower_case, max_seq_length, labels,
                  stride=None):
    """The raw-sentence serving SavedModel: `serving_default(sentences)` → words, tags, scores,
    word_count (see `tagging_function`); `label_names` holds the tag set. A model under a
    mixed policy is exported in float32 (`saved_model.float32_model`)."""
    model = float32_model(model)
    save_serving(model, export_dir, vocabulary, do_lower_case,
                 lambda tokenizer: {"serving_default": tagging_function(
                     model, tokenizer, max_seq_length, labels, stride)},
                 attributes={"label_names": tf.Variable(list(labels), trainable=False,
                                                        name="label_names")})
    logging.info("Wrote the serving SavedModel %s (input: sentences; %d tags)", export_dir,
                 len(labels))
    return export_dir


def entities(sentence, words, tags):
    """The chunks of `tags` (conlleval's rules) with their text and character span in
    `sentence` (words split on whitespace, as the tagger does)."""
    starts, at = [], 0
    for word in words:
        at = sentence.index(word, at)
        starts.append(at)
        at += len(word)
    return [{"type": kind, "text": sentence[starts[first]:starts[last] + len(words[last])],
             "start": starts[first], "end": starts[last] + len(words[last]),
             "words": [first, last + 1]}
            for kind, first, last in chunks(tags)]


class Tagger(Predictor):
    """Tags per word and the entities they form, from a run_ner output_dir (its
    model.ckpt-best, albert_config.json and labels.txt; or `labels`), its serving export or the
    export's tagger_text.tflite (LiteRT, one sentence per call). A run's checkpoint reads long
    sentences in the run's windows (run.json's max_seq_length and window_stride) unless
    `max_seq_length` or `window_stride` says otherwise."""

    def __init__(self, model, labels=None, window_stride=None, **kwargs):
        super().__init__(model, **kwargs)
        kind = self.source.kind
        if kind == "checkpoint":
            head = self.source.arrays.get("token_classifier/output_weights")
            if head is None:
                raise PredictError(f"{self.source.path} has no token classification head "
                                   f"(token_classifier/output_weights): give a run_ner "
                                   f"output_dir or a run_ner export")
            self.labels = self._checkpoint_labels(labels, int(head.shape[0]))
            model = self.source.build(AlbertTokenClassifier, num_labels=len(self.labels))
            tokenizer = in_graph_tokenizer(self.tokenizer.asset_file, self.tokenizer.do_lower_case)
            self.window_stride = (window_stride or self._run_stride()
                                  or default_stride(self.max_seq_length))
            self._tag = tagging_function(model, tokenizer, self.max_seq_length, self.labels,
                                         self.window_stride)
            logging.info("Long sentences in windows of %d pieces, %d apart (--window_stride)",
                         self.max_seq_length - 2, self.window_stride)
        elif window_stride is not None:
            raise PredictError("--window_stride is for checkpoints; an export cuts the windows "
                               "its run did")
        elif kind == "text_tagger":
            if labels is not None:
                raise PredictError("--labels is for checkpoints; the export has its own tags")
            self._tag = self.source.loaded.signatures["serving_default"]
        elif kind == "tflite_text" and SENTENCES in self.source.loaded.get_input_details():
            if labels is not None:
                raise PredictError("--labels is for checkpoints; the .tflite has its own tags")
            self._tag = self._tag_on_litert
        else:
            raise PredictError(f"{self.source.path} is a {kind} export, which has no token "
                               f"classification head: give a run_ner output_dir or export")

    def _run_stride(self):
        """The run's --window_stride where it fits these windows (the run's length)."""
        stride = self.run_settings.get("window_stride")
        if stride and self.max_seq_length == self.run_settings.get("max_seq_length"):
            return stride
        return None

    def _tag_on_litert(self, sentences):
        """tagger_text.tflite one sentence at a time, as the SavedModel's batch outputs."""
        rows = []
        for text in sentences.numpy():
            if not text.split():  # no word: nothing to run (LiteRT returns empty tensors)
                rows.append(([], [], []))
                continue
            out = self.source.loaded(sentences=np.array([text], object))
            rows.append((list(out["words"]), list(out["tags"]), list(out["scores"])))
        width = max([len(r[0]) for r in rows] + [0])

        def dense(i, fill):
            return np.array([r[i] + [fill] * (width - len(r[i])) for r in rows], object
                            if i < 2 else np.float32).reshape(len(rows), width)
        return {"words": dense(0, b""), "tags": dense(1, b""), "scores": dense(2, 0.0),
                "word_count": np.array([len(r[0]) for r in rows], np.int32)}

    def _checkpoint_labels(self, labels, num_labels):
        labels = label_names(labels)[0] if labels is not None else (
            read_labels(self.source.directory) or hf_tags(self.source.directory))
        if labels is None:
            raise PredictError(f"no {LABELS_FILE} beside {self.source.path}: give --labels "
                               f"(the {num_labels} tags in the order of the training run)")
        if len(labels) != num_labels:
            raise PredictError(f"{len(labels)} labels ({', '.join(labels)}) but the "
                               f"checkpoint's head has {num_labels} outputs")
        return list(labels)

    def __call__(self, texts, texts_b=None):
        if texts_b is not None and any(t is not None for t in texts_b):
            raise PredictError("--task=ner tags single sentences; it takes no --text_b")
        texts = [texts] if isinstance(texts, str) else list(texts)
        results = []
        for part in batches(len(texts), self.batch_size):
            out = {k: np.asarray(v) for k, v in self._tag(
                **{SENTENCES: tf.constant(texts[part])}).items()}
            for i, text in enumerate(texts[part]):
                n = int(out["word_count"][i])
                words = [w.decode("utf-8") for w in out["words"][i, :n]]
                tags = [t.decode("utf-8") for t in out["tags"][i, :n]]
                results.append({"text": text, "words": words, "tags": tags,
                                "scores": [round(float(s), 6) for s in out["scores"][i, :n]],
                                "entities": entities(text, words, tags)})
        return results
