"""Classification: labels and probabilities (or a regression score) from a fine-tuned classifier
checkpoint, a raw-string serving export or an exported .tflite (strings or ids in)."""

import numpy as np

from albert_tf.data.conll import read_labels
from albert_tf.data.glue import find_task, get_task, window_starts
from albert_tf.data.labeled_text import saved_labels
from albert_tf.modeling.classifier import pool_windows
from albert_tf.serving.predictor import (PredictError, Predictor, batches, check_pairs,
                                         inference_function, pad_batch)
from albert_tf.training.checkpoint_files import CHOICE_RUN_KINDS, recorded_kind


def label_names(labels=None, task_name=None):
    if labels is not None and task_name:
        raise PredictError("give --labels or --task_name, not both")
    if labels is not None:
        names = [s.strip() for s in labels.split(",")] if isinstance(labels, str) else [
            str(s) for s in labels]
        if not all(names):
            raise PredictError(f"--labels={labels!r} has an empty label")
        return names, False
    if task_name:
        try:
            task = get_task(task_name)
        except ValueError as e:
            raise PredictError(str(e)) from e
        return list(task.labels), task.is_regression
    return None, False


def _exported_label_names(loaded):
    """Label names an export may carry (a string tensor/variable attribute), else None."""
    for name in ("label_names", "class_names", "labels"):
        value = getattr(loaded, name, None)
        if value is None:
            continue
        try:
            value = value() if callable(value) else value
            array = np.asarray(getattr(value, "numpy", lambda: value)())
        except Exception:  # noqa: BLE001 - not a constant: no names
            continue
        if array.ndim == 1 and array.dtype.kind in "SOU":
            return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in array]
    return None


class Classifier(Predictor):
    """Labels and probabilities from a fine-tuned classifier: a run_classifier output_dir (its
    model.ckpt-best and albert_config.json; label strings from `task_name` or `labels`, else
    "0", "1", ...), a raw-string serving export (`serving_default` on `text_a`/`text_b`) or one
    of its .tflite files (run one text at a time with LiteRT; labels from labels.txt beside it).
    A one-output head (STS-B) gives a `score`. The labels.json a run (or export) keeps beside
    it names the labels and the problem type; multi-label: `labels` holds those at or above
    their thresholds."""

    def __init__(self, model, labels=None, task_name=None, max_seq_length=None, **kwargs):
        super().__init__(model, max_seq_length=max_seq_length, **kwargs)
        names, regression = label_names(labels, task_name)
        named_regression = regression  # --task_name's
        kind = self.source.kind
        self.label_set = saved_labels(getattr(self.source, "directory", None))
        self.windows_read = 0  # the long texts' windows read so far (a model trained on them)
        if self.label_set and self.label_set.window_stride and max_seq_length is None:
            self.max_seq_length = self.label_set.window_length  # the windows it was trained on
        if self.label_set and names is None and not regression:
            names, regression = list(self.label_set.labels) or None, self.label_set.is_regression
        multi_label = bool(self.label_set and self.label_set.is_multi_label)
        if kind == "checkpoint":
            run_kind = recorded_kind(self.source.directory)
            if run_kind in CHOICE_RUN_KINDS:
                raise PredictError(f"{self.source.path} is a multiple-choice run ({run_kind}): "
                                   f"its head scores answer choices, not classes: "
                                   f"--task=choose answers questions with it; --task=embed "
                                   f"reads its encoder")
            num_labels = self.source.num_classifier_labels()
            if num_labels is None:
                raise PredictError(f"{self.source.path} has no classifier head (output_weights, "
                                   f"output_bias): give a run_classifier output_dir or a "
                                   f"classifier export")
            self.regression = num_labels == 1  # one output: regression (STS-B)
            if regression and num_labels != 1:
                raise PredictError(f"--task_name={task_name} is a regression task but the "
                                   f"checkpoint's head has {num_labels} outputs")
            if self.regression and names:
                raise PredictError(f"the checkpoint's head has one output (regression: a score); "
                                   f"it has no labels {', '.join(names)}")
            if names is not None and not self.regression and len(names) != num_labels:
                raise PredictError(f"{len(names)} labels ({', '.join(names)}) but the "
                                   f"checkpoint's head has {num_labels} outputs")
            from albert_tf.modeling.classifier import AlbertClassifier
            self._model = inference_function(self.source.build(
                AlbertClassifier, num_labels=num_labels, regression=self.regression,
                multi_label=multi_label,
                target=self.label_set.target if self.label_set and self.regression else None))
            self.num_labels = num_labels
            self.labels = None if self.regression else (
                names or [str(i) for i in range(num_labels)])
            self.inputs = self._trained_inputs()
        elif kind in ("text_classifier", "tflite_text", "tflite_ids"):
            if named_regression:
                raise PredictError(f"--task_name={task_name} is a regression task; the export "
                                   f"gives its own outputs")
            self.regression = regression  # its labels.json's: a score even beside logits
            self.num_labels = None
            if kind == "text_classifier":
                self.inputs = self.source.text_inputs()
                self.labels = names or _exported_label_names(self.source.loaded)
                return
            self.labels = names or read_labels(self.source.directory)
            if kind == "tflite_text":
                self.inputs = self.source.text_inputs()
                if "text_a" not in self.inputs:
                    names = sorted(self.source.loaded.get_input_details())
                    raise PredictError(f"{self.source.path} takes {', '.join(names)}, not text_a: "
                                       f"not a classifier's .tflite")
                return
            if max_seq_length is not None and max_seq_length != self.source.seq_length:
                raise PredictError(f"--max_seq_length={max_seq_length}: {self.source.path} "
                                   f"takes sequences of {self.source.seq_length}")
            self.max_seq_length = self.source.seq_length
        else:
            raise PredictError(f"{self.source.path} is a {kind} export, which has no classifier "
                               f"head: give a run_classifier output_dir or a classifier export")

    @property
    def text_columns(self):
        return self.label_set.text_columns if self.label_set else ()

    def __call__(self, texts, texts_b=None):
        texts, texts_b = check_pairs(texts, texts_b)
        results = []
        for part in batches(len(texts), self.batch_size):
            a, b = texts[part], texts_b[part]
            if self.source.kind == "checkpoint":
                self._check_pairs(b, "the run in")
                out = self._run_checkpoint(a, b)
            elif self.source.kind == "tflite_ids":
                out = self._outputs(self._run_tflite_ids(a, b))
            else:
                self._check_pairs(b)
                out = self._outputs(self._run_tflite_text(a, b)
                                    if self.source.kind == "tflite_text" else
                                    self._run_export(a, b))
            for i in range(len(a)):
                row = {"text": a[i]}
                if b[i] is not None:
                    row["text_b"] = b[i]
                row.update({k: v[i] for k, v in out.items()})
                results.append(row)
        return results

    def _rows(self, a, b):
        """(packed rows, each row's text): one per text, or with the run's window_stride a
        long text's windows (data.glue.window_starts)."""
        stride = self.label_set and self.label_set.window_stride
        if not stride:
            return [self._encode(x, y) for x, y in zip(a, b)], np.arange(len(a))
        budget = self.max_seq_length - 2
        rows, texts = [], []
        for i, (x, y) in enumerate(zip(a, b)):
            if y is not None:
                raise PredictError("this model reads one text in windows: give no text_b")
            ids = self.tokenizer.encode(x)
            for start in window_starts(len(ids), budget, stride):
                rows.append(self._encode_ids(ids[start:start + budget]))
                texts.append(i)
        self.windows_read += len(rows)
        return rows, np.asarray(texts)

    def _encode_ids(self, ids):
        return [self.cls_id] + list(ids) + [self.sep_id], [0] * (len(ids) + 2)

    def _pool(self, out, texts, count):
        """Each text's outputs from its rows': mean logits through the head."""
        import tensorflow as tf
        if len(texts) == count:
            return out
        pooled = pool_windows({"logits": tf.constant(out["logits"], tf.float32)},
                              tf.constant(texts), count, self.regression,
                              self.label_set.is_multi_label, self.label_set.target)
        return {k: v.numpy() for k, v in pooled.items()}

    def _run_checkpoint(self, a, b):
        import tensorflow as tf
        rows, texts = self._rows(a, b)
        out = self._model({k: tf.constant(v) for k, v in pad_batch(rows).items()})
        out = self._pool({k: np.asarray(v) for k, v in out.items()}, texts, len(a))
        if self.regression:
            return {"score": [float(v) for v in np.asarray(out["predictions"])]}
        return self._named(np.asarray(out["probabilities"], np.float64))

    def _named(self, probabilities, predicted=None):
        labels = self.labels
        if labels is not None and len(labels) != probabilities.shape[-1]:
            raise PredictError(f"{len(labels)} labels ({', '.join(labels)}) but the model gives "
                               f"{probabilities.shape[-1]} probabilities")
        if self.label_set and self.label_set.is_multi_label:
            thresholds = np.asarray(self.label_set.thresholds or [0.5] * len(labels))
            return {"label": [[n for n, hit in zip(labels, row) if hit]
                              for row in probabilities >= thresholds],
                    "probabilities": [[float(x) for x in p] for p in probabilities],
                    "labels": [list(labels)] * len(probabilities)}
        best = probabilities.argmax(-1)
        if predicted is None:
            predicted = [labels[i] if labels else str(i) for i in best]
        out = {"label": list(predicted),
               "probability": [float(p[i]) for p, i in zip(probabilities, best)],
               "probabilities": [[float(x) for x in p] for p in probabilities]}
        if labels is not None:
            out["labels"] = [list(labels)] * len(probabilities)
        return out

    def _trained_inputs(self):
        """The text inputs a checkpoint's run read: text_a, and text_b for a pair task (its
        labels.json's text columns, else its GLUE --task_name); None where it does not say."""
        columns = self.label_set.text_columns if self.label_set else ()
        if columns:
            return ("text_a", "text_b")[:len(columns)]
        task = find_task(self.run_settings.get("task_name"))  # None: CLUE, own data
        return None if task is None else ("text_a", "text_b")[:1 + task.is_pair]

    def _check_pairs(self, b, what="the export"):
        if self.inputs is None:
            return
        has_b = [y is not None for y in b]
        if "text_b" in self.inputs and not all(has_b):
            raise PredictError(f"{what} {self.source.path} classifies pairs: give --text_b "
                               f"(or two tab-separated columns)")
        if "text_b" not in self.inputs and any(has_b):
            raise PredictError(f"{what} {self.source.path} classifies single texts; it takes "
                               f"no second text (--text_b, or a second tab-separated column "
                               f"of a .txt --input_file)")

    def _run_export(self, a, b):
        import tensorflow as tf
        feed = {"text_a": tf.constant(a)}
        if "text_b" in self.inputs:
            feed["text_b"] = tf.constant(b)
        return {k: v.numpy() for k, v in
                self.source.loaded.signatures["serving_default"](**feed).items()}

    def _run_tflite_text(self, a, b):
        rows = []
        for x, y in zip(a, b):
            feed = {"text_a": np.array([x.encode("utf-8")], object)}
            if "text_b" in self.inputs:
                feed["text_b"] = np.array([y.encode("utf-8")], object)
            rows.append(self.source.loaded(**feed))
        return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}

    def _run_tflite_ids(self, a, b):
        rows, texts = self._rows(a, b)
        outputs = []
        for ids, types in rows:
            pad = [0] * (self.max_seq_length - len(ids))
            outputs.append(self.source.loaded(
                input_word_ids=np.array([ids + pad], np.int32),
                input_mask=np.array([[1] * len(ids) + pad], np.int32),
                input_type_ids=np.array([types + pad], np.int32)))
        out = {k: np.concatenate([r[k] for r in outputs]) for k in outputs[0]}
        return self._pool(out, texts, len(a))

    def _outputs(self, out):
        """Labels and probabilities (or a score) from an export's numpy outputs."""
        if self.regression or "probabilities" not in out and "logits" not in out:
            for key in ("predictions", "score", "scores"):  # a regression export (STS-B)
                if key in out and out[key].dtype.kind == "f":
                    return {"score": [float(v) for v in np.reshape(out[key], [-1])]}
        if "probabilities" in out:
            probabilities = np.asarray(out["probabilities"], np.float64)
        elif "logits" in out:
            logits = np.asarray(out["logits"], np.float64)
            probabilities = np.exp(logits - logits.max(-1, keepdims=True))
            probabilities /= probabilities.sum(-1, keepdims=True)
        else:
            raise PredictError(f"the export {self.source.path} returns {sorted(out)}, not "
                               f"probabilities, logits or predictions")
        predicted = None
        for key in ("labels", "label"):
            value = out.get(key)
            if value is not None and value.dtype.kind in "OS" and value.ndim == 1:
                predicted = [v.decode("utf-8") for v in value]
                break
        if predicted is not None and self.labels is not None:
            best = probabilities.argmax(-1)
            predicted = [self.labels[i] if i < len(self.labels) else p
                         for i, p in zip(best, predicted)]
        return self._named(probabilities, predicted)
