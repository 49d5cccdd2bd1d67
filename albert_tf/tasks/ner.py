"""Token classification (NER, POS, chunking) on CoNLL files: the task, its labels and its
conlleval metrics."""

import os
import re

import numpy as np
from absl import logging

from albert_tf.data import conll, tagging
from albert_tf.data.features import cached_features
from albert_tf.files import atomic_write_bytes, atomic_write_text, file_digest
from albert_tf.modeling.token_classifier import HEAD_NAMES, AlbertTokenClassifier
from albert_tf.tasks import conll_metrics
from albert_tf.tasks.base import FinetuningTask
from albert_tf.training.results import remove_stale_results, write_eval_results
from albert_tf.training.stuck import constant_loss

_CHUNK_TAG = re.compile(r"^[BIES]-.")


def is_chunk_scheme(labels):
    """True when every tag but O is `<B|I|E|S>-<type>` (BIO, IOB1, IOBES): entity metrics
    apply. Otherwise (POS tags) token accuracy is the metric."""
    return all(t == "O" or _CHUNK_TAG.match(t) for t in labels) and any(t != "O" for t in labels)


def run_labels(output_dir, data_dir, needed):
    """The label list of a run: output_dir/labels.txt when an earlier run wrote it (checked
    against train.txt when that is read), else train.txt's tags (NerTask.write_labels keeps
    them there when training starts, for later runs: eval, predict, export and resume see the
    same ids). `needed`: whether train.txt is read."""
    path = os.path.join(output_dir, conll.LABELS_FILE)
    saved = conll.read_labels(output_dir)
    if not needed and saved:
        return saved
    train = conll.split_file(data_dir, "train")
    labels = conll.label_list(conll.read_conll(train))
    if saved is not None and labels != saved:
        raise ValueError(f"{train} has the tags {', '.join(labels)} but {path} (from an earlier "
                         f"run in this --output_dir) has {', '.join(saved)}: use a new "
                         f"--output_dir for other data")
    return labels


def tag_metrics(gold, predicted, chunked, prefix="eval_"):
    """conlleval's precision, recall and F1 (overall and per type, with `chunked`) and token
    accuracy, as fractions."""
    scores = conll_metrics.evaluate(gold, predicted)
    keep = [k for k in scores if not k.endswith("_chunks")] if chunked else ["accuracy"]
    return {prefix + k: float(scores[k]) for k in keep}


class NerTask(FinetuningTask):
    """Token classification on CoNLL files in `data_dir` (train.txt, dev.txt or valid.txt,
    test.txt) for `run_finetuning`: one tag per original token, predicted on its first piece,
    long sentences in overlapping windows; metrics as conlleval."""

    name = "ner"
    head_names = HEAD_NAMES
    exportable = True

    def __init__(self, data_dir, tokenizer, max_seq_length, cache_dir, labels,
                 classifier_dropout=0.1, window_stride=None):
        self.window_stride = window_stride or tagging.default_stride(max_seq_length)
        tagging.check_window(max_seq_length, self.window_stride)
        self.data_dir = data_dir
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.cache_dir = cache_dir
        self.labels = list(labels)
        self.chunked = is_chunk_scheme(self.labels)
        self.best_metric = "eval_f1" if self.chunked else "eval_accuracy"
        self.classifier_dropout = classifier_dropout
        self._sentences = {}

    def write_labels(self, output_dir):
        conll.write_labels(output_dir, self.labels)

    def build_model(self, encoder):
        return AlbertTokenClassifier(encoder, len(self.labels), self.classifier_dropout)

    def sentences(self, split):
        """A split's sentences; the test file's may have no tags (sentences to predict)."""
        if split not in self._sentences:
            self._sentences[split] = conll.read_conll(conll.split_file(self.data_dir, split),
                                                      untagged=split == "test")
        return self._sentences[split]

    def tagged(self, split):
        return all(tag is not None for s in self.sentences(split) for tag in s.tags)

    def features(self, split):
        path = conll.split_file(self.data_dir, split)
        settings = dict(task="ner", split=split, file=file_digest(path), labels=self.labels,
                        max_seq_length=self.max_seq_length, window_stride=self.window_stride,
                        tokenizer=self.tokenizer.digest(),
                        do_lower_case=self.tokenizer.do_lower_case)
        return cached_features(self.cache_dir, f"ner_{split}", settings, lambda: self._build(split))

    def _build(self, split):
        sentences = self.sentences(split)
        unknown = sorted({t for s in sentences for t in s.tags} - set(self.labels) - {None})
        if unknown:
            logging.warning("%s tags not in train.txt: %s (the model cannot predict them: "
                            "their tokens score as errors, and are left out of the loss)", split,
                            ", ".join(unknown))
        features = tagging.convert_sentences(sentences, self.tokenizer, self.max_seq_length,
                                             self.labels, self.window_stride)
        logging.info("%s: %d sentences, %d words in %d windows of at most %d pieces, %d apart "
                     "(--window_stride)", split, len(sentences),
                     len(features["host_word_window"]), len(features["lengths"]),
                     self.max_seq_length - 2, self.window_stride)
        return features

    def check_inputs(self, splits):
        """The data files of `splits` exist and parse (before any training); predicting reads
        dev too, where there is one."""
        dev = "test" in splits and conll.has_split(self.data_dir, "dev")
        for split in set(splits) | ({"dev"} if dev else set()):
            self.sentences(split)

    def train_features(self):
        return self.features("train")

    def eval_sets(self):
        return [("dev", self.features("dev"))]

    def predict_sets(self):
        """Dev (where there is one) and test, both written in the CoNLL layout."""
        return [(split, self.features(split))
                for split in ("dev", "test")
                if split == "test" or conll.has_split(self.data_dir, split)]

    def predicted_tags(self, features, outputs):
        return [[self.labels[i] for i in row]
                for row in tagging.words_of_windows(features, outputs["tag_ids"])]

    def constant_loss(self, features):
        """The training loss of predicting the tag frequencies whatever the input."""
        return constant_loss(features["tag_ids"][features["tag_mask"] > 0])

    def predicted_classes(self, features, outputs):
        return [tag for row in self.predicted_tags(features, outputs) for tag in row]

    def eval_metrics(self, name, features, outputs):
        """name: the split ("dev" or "test")."""
        gold = [s.tags for s in self.sentences(name)]
        result = tag_metrics(gold, self.predicted_tags(features, outputs), self.chunked)
        result["eval_loss"] = float(np.sum(outputs["loss_sum"])
                                    / max(float(np.sum(outputs["token_count"])), 1.0))
        return result

    def write_predictions(self, name, features, outputs, output_dir):
        """<name>_predictions.txt: every token line of the input with the predicted tag added as
        the last column, after the separator of the line's own last one (conlleval's input:
        spaces, or tabs with -d), a blank line after each sentence; the scores in
        <name>_results.txt where the file has tags (eval_results.txt stays the evaluations':
        their best checkpoint's, with its step)."""
        predicted = self.predicted_tags(features, outputs)
        lines = []
        for sentence, tags in zip(self.sentences(name), predicted):
            lines.extend(_with_column(line, tag) for line, tag in zip(sentence.lines, tags))
            lines.append("\n")
        path = os.path.join(output_dir, f"{name}_predictions.txt")
        atomic_write_text(path, "".join(lines))
        scores = os.path.join(output_dir, f"{name}_results.txt")
        if not self.tagged(name):
            remove_stale_results(scores, "these sentences have no tags to be scored against")
            logging.info("NER %s: predictions in %s (no tags to score them against)", name, path)
            return None
        result = self.eval_metrics(name, features, outputs)
        write_eval_results(scores, result)
        logging.info("NER %s: %s; predictions in %s", name, "  ".join(
            f"{k} {v:.4f}" for k, v in sorted(result.items()) if "_" not in k[5:]), path)
        return None

    def export(self, model, export_dir, lite_options=None, output_dir=None):
        """The raw-sentence serving SavedModel (serving.tag), and unless `lite_options.files`
        is "none", export_dir/tagger_text.tflite (one sentence in: words, tags, scores, through
        the run's windows; `serving.lite.tagger_to_tflite`) with labels.txt beside it."""
        from albert_tf.serving import lite
        from albert_tf.serving.tag import export_tagger

        options = lite_options or lite.LiteOptions()
        export_tagger(model, export_dir, self.tokenizer.asset_file, self.tokenizer.do_lower_case,
                      self.max_seq_length, self.labels, self.window_stride)
        if options.files == "none":
            return export_dir
        if options.files == "ids":
            logging.warning("run_ner writes its string-in .tflite only (--export_tflite=ids "
                            "has no ids-in tagger)")
        path = os.path.join(os.fspath(export_dir), "tagger_text.tflite")
        atomic_write_bytes(path, lite.tagger_to_tflite(
            model, self.tokenizer.asset_file, self.tokenizer.do_lower_case, self.max_seq_length,
            self.labels, options.quantization, self.window_stride))
        conll.write_labels(export_dir, self.labels)
        logging.info("Wrote %s (%s)", path, options.quantization)
        return export_dir


def _with_column(line, value):
    """A CoNLL token line with `value` added as its last column, separated as its last column
    is (a tab-separated file stays tab-separated; conlleval splits on one separator)."""
    line = line.rstrip()
    last = re.search(r"(\s+)\S+$", line)  # none: a token alone (an untagged test file)
    return f"{line}{last.group(1) if last else ' '}{value}\n"
