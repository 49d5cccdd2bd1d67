"""Inference from any checkpoint or export: fill-mask, classification and embeddings.

  python -m albert_tf.predict --task=fill_mask --model=albert_base \
      --text="The capital of France is [MASK]." --top_k=5
  python -m albert_tf.predict --task=classify --model=out/mrpc --task_name=mrpc \
      --spm_model_file=albert_base/30k-clean.model --text="..." --text_b="..."
  python -m albert_tf.predict --task=classify --model=serving/mrpc --text="..." --text_b="..."
  python -m albert_tf.predict --task=embed --model=hub/albert_base --input_file=lines.txt \
      --output_file=vectors.jsonl --pooling=mean

--model is a SavedModel directory (saved_model.pb: an encoder or pretrainer export of
`albert_tf.export`, or a raw-string classifier serving export), or anything
`AlbertPretrainer.from_pretrained` reads (the original TF1 release directory or checkpoint
prefix, a Hugging Face directory, a run_pretraining or run_classifier output_dir; a directory
with model.ckpt-best uses that one). One JSON object per input is printed, or written to
--output_file (JSON lines; for embeddings a `.npy` path gets a [texts, hidden] float32 array).

Importable: `FillMask`, `Classifier`, `Embedder` (load once, call on lists of texts) and
`predict(task, model, texts, texts_b=None, **options)`.
"""

import glob
import json
import os
import re
import sys

import numpy as np
from absl import app, flags, logging

TASKS = ("fill_mask", "classify", "embed")
POOLINGS = ("cls", "first", "mean")
DEFAULT_MAX_SEQ_LENGTH = 128
MASK_PATTERN = re.compile(r"\[MASK\]", re.IGNORECASE)
_UNDERLINE = "\u2581"


class PredictError(ValueError):
    """A usage problem with a clear message (bad model, tokenizer, text or labels)."""


# ---- locating and loading the model --------------------------------------------------------

def is_saved_model(path):
    import tensorflow as tf
    return tf.io.gfile.isdir(path) and tf.io.gfile.exists(os.path.join(path, "saved_model.pb"))


def _import_tensorflow_text():
    """Exports with tokenizer ops need the tensorflow-text op kernels registered first."""
    try:
        import tensorflow_text  # noqa: F401
    except ImportError:  # the encoder and pretrainer exports do not need it
        pass


def _checkpoint_location(path):
    """(path for read_checkpoint, directory beside it): a directory holding model.ckpt-best
    (run_classifier's best checkpoint) uses it rather than the latest checkpoint."""
    import tensorflow as tf
    path = os.fspath(path).rstrip("/")
    if tf.io.gfile.isdir(path):
        best = os.path.join(path, "model.ckpt-best")
        if tf.io.gfile.exists(best + ".index"):
            return best, path
        return path, path
    return path, os.path.dirname(path) or "."


class ModelSource:
    """What --model points at: `kind` is "checkpoint" or one of the export kinds
    "encoder", "pretrainer", "text_classifier" (raw-string serving), "preprocessor"."""

    def __init__(self, path, albert_config_file=None):
        import tensorflow as tf
        self.path = os.fspath(path)
        if not (tf.io.gfile.exists(self.path) or tf.io.gfile.exists(self.path + ".index")):
            raise PredictError(f"--model={self.path} not found: give a checkpoint (directory or "
                               f"prefix) or a SavedModel export directory")
        self.loaded = None
        self.arrays = self.config = None
        if is_saved_model(self.path):
            _import_tensorflow_text()
            try:
                self.loaded = tf.saved_model.load(self.path)
            except Exception as e:  # noqa: BLE001 - reported with the path
                hint = (" (exports with tokenizer ops need `pip install tensorflow-text`)"
                        if "SentencepieceOp" in str(e) or "not registered" in str(e) else "")
                raise PredictError(f"cannot load the SavedModel {self.path}: {e}{hint}") from e
            self.kind = self._export_kind()
            self.directory = self.path
            asset = getattr(self.loaded, "albert_config_file", None)
            if asset is not None:
                from albert_tf.config import AlbertConfig
                self.config = AlbertConfig.from_json_file(
                    asset.asset_path.numpy().decode("utf-8"))
        else:
            self.kind = "checkpoint"
            self.location, self.directory = _checkpoint_location(self.path)
            self._read_checkpoint(albert_config_file)

    def _read_checkpoint(self, albert_config_file):
        from albert_tf.checkpoints import read_checkpoint
        from albert_tf.config import AlbertConfig
        try:
            self.arrays, config_path, self.format = read_checkpoint(self.location)
        except (FileNotFoundError, ValueError) as e:
            raise PredictError(f"--model={self.path}: {e}") from e
        config_path = albert_config_file or config_path
        if not config_path:
            raise PredictError(f"no albert_config.json or config.json beside the checkpoint "
                               f"{self.path}; pass --albert_config_file")
        self.config = AlbertConfig.from_json_file(config_path)

    def _export_kind(self):
        obj = self.loaded
        if hasattr(obj, "bert_pack_inputs"):
            return "preprocessor"
        if hasattr(obj, "mlm"):
            return "pretrainer"
        signature = obj.signatures.get("serving_default")
        names = {}
        if signature is not None:
            names = {k: spec.dtype for k, spec in signature.structured_input_signature[1].items()}
        if "text_a" in names:
            return "text_classifier"
        if "input_word_ids" in names and callable(obj):
            return "encoder"
        raise PredictError(f"{self.path} is a SavedModel of no kind this tool knows: expected an "
                           f"albert_tf encoder/pretrainer export or a raw-string serving export "
                           f"(serving_default inputs: {sorted(names) or 'none'})")

    # -- what the export or checkpoint can do --

    def has_mlm_head(self):
        if self.kind == "checkpoint":
            return "cls/predictions/output_bias" in self.arrays
        return self.kind == "pretrainer"

    def num_classifier_labels(self):
        if self.kind == "checkpoint" and "output_weights" in self.arrays:
            return int(self.arrays["output_weights"].shape[0])
        return None

    def text_inputs(self):
        """The string inputs of a raw-string export's serving_default, in packing order."""
        spec = self.loaded.signatures["serving_default"].structured_input_signature[1]
        return [k for k in ("text_a", "text_b") if k in spec]

    def build(self, model_cls, **kwargs):
        """A model of `model_cls` with the checkpoint's weights (checked, all-or-nothing)."""
        from albert_tf.checkpoints import assign_weights
        model = model_cls(self.config, **kwargs)
        try:
            assign_weights(model, self.arrays, source=f"{self.format} checkpoint {self.path}")
        except ValueError as e:
            raise PredictError(str(e)) from e
        return model


# ---- tokenizer -----------------------------------------------------------------------------

def _hf_do_lower_case(directory):
    path = os.path.join(directory, "tokenizer_config.json")
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f).get("do_lower_case")
            return None if value is None else bool(value)
        except (OSError, ValueError):
            return None
    return None


def load_tokenizer(source, spm_model_file=None, do_lower_case=None):
    """FullTokenizer from --spm_model_file, else the one *.model beside the checkpoint, else the
    export's asset. do_lower_case None: the export's setting (or the Hugging Face
    tokenizer_config.json), else True (the original default)."""
    from albert_tf.tokenization import FullTokenizer
    import tensorflow as tf

    exported_lower = None
    if source.loaded is not None and hasattr(source.loaded, "do_lower_case"):
        exported_lower = bool(source.loaded.do_lower_case.numpy())
    if spm_model_file:
        if not tf.io.gfile.exists(spm_model_file):
            raise PredictError(f"--spm_model_file={spm_model_file} does not exist")
        where = spm_model_file
    elif source.loaded is not None:
        asset = getattr(source.loaded, "sp_model_file", None)
        if asset is None:
            raise PredictError(f"the export {source.path} has no SentencePiece asset; pass "
                               f"--spm_model_file")
        where = asset.asset_path.numpy().decode("utf-8")
    else:
        candidates = sorted(glob.glob(os.path.join(glob.escape(source.directory), "*.model")))
        if not candidates:
            raise PredictError(f"no SentencePiece model: pass --spm_model_file (there is no "
                               f"*.model beside the checkpoint in {source.directory})")
        if len(candidates) > 1:
            raise PredictError(f"several SentencePiece models beside the checkpoint "
                               f"({', '.join(map(os.path.basename, candidates))}); pass "
                               f"--spm_model_file")
        where = candidates[0]
    if do_lower_case is None:
        do_lower_case = exported_lower
    if do_lower_case is None and source.kind == "checkpoint":
        do_lower_case = _hf_do_lower_case(source.directory)
    do_lower_case = True if do_lower_case is None else bool(do_lower_case)
    try:
        tokenizer = FullTokenizer(where, do_lower_case)
        tokenizer.special_ids()
    except (FileNotFoundError, ValueError) as e:
        raise PredictError(str(e)) from e
    vocab_size = source.config.vocab_size if source.config is not None else None
    if source.loaded is not None and hasattr(source.loaded, "vocab_size"):
        vocab_size = int(source.loaded.vocab_size.numpy())
    if vocab_size is not None and len(tokenizer) != vocab_size:
        message = (f"the SentencePiece model {where} has {len(tokenizer)} pieces but the model's "
                   f"vocab_size is {vocab_size}: is it the model's vocabulary?")
        if len(tokenizer) > vocab_size:
            raise PredictError(message)
        logging.warning(message)
    logging.info("Tokenizer %s (do_lower_case=%s)", where, do_lower_case)
    return tokenizer


# ---- features --------------------------------------------------------------------------------

def pack(a, b, max_seq_length, cls_id, sep_id):
    """[CLS] A [SEP] (B [SEP]) ids and type ids, truncated as the original classifier:
    one segment cut at the end, two by `_truncate_seq_pair` (from the end of the longer)."""
    from albert_tf.data.glue import truncate_pair
    a = list(a)
    if b is None:
        a = a[:max(max_seq_length - 2, 0)]
        return [cls_id] + a + [sep_id], [0] * (len(a) + 2)
    b = list(b)
    truncate_pair(a, b, max(max_seq_length - 3, 0))
    return [cls_id] + a + [sep_id] + b + [sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1)


def pad_batch(rows, extra=None):
    """Int32 encoder inputs padded to the longest row of the batch (outputs at real positions
    do not depend on the padding length)."""
    length = max(len(ids) for ids, _ in rows)
    ids = np.zeros([len(rows), length], np.int32)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, (row, row_types) in enumerate(rows):
        ids[i, :len(row)] = row
        types[i, :len(row)] = row_types
        mask[i, :len(row)] = 1
    out = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    out.update(extra or {})
    return out


def _batches(n, batch_size):
    for start in range(0, n, max(int(batch_size), 1)):
        yield slice(start, min(start + batch_size, n))


def _check_pairs(texts, texts_b):
    texts = [texts] if isinstance(texts, str) else list(texts)
    if texts_b is None:
        return texts, [None] * len(texts)
    texts_b = [texts_b] if isinstance(texts_b, str) else list(texts_b)
    if len(texts_b) != len(texts):
        raise PredictError(f"{len(texts)} texts but {len(texts_b)} second texts")
    return texts, texts_b


class _Predictor:
    def __init__(self, model, spm_model_file=None, do_lower_case=None, max_seq_length=None,
                 batch_size=32, albert_config_file=None):
        self.source = model if isinstance(model, ModelSource) else ModelSource(
            model, albert_config_file)
        config = self.source.config
        if max_seq_length is None:  # 128, or less when the model has fewer positions
            max_seq_length = min(DEFAULT_MAX_SEQ_LENGTH, config.max_position_embeddings
                                 if config is not None else DEFAULT_MAX_SEQ_LENGTH)
        self.max_seq_length = int(max_seq_length)
        self.batch_size = int(batch_size)
        self._tokenizer_args = (spm_model_file, do_lower_case)
        self._tokenizer = None
        if config is not None and self.max_seq_length > config.max_position_embeddings:
            raise PredictError(f"--max_seq_length={self.max_seq_length} exceeds the model's "
                               f"max_position_embeddings={config.max_position_embeddings}")
        if self.max_seq_length < 3:
            raise PredictError(f"--max_seq_length={self.max_seq_length} leaves no room for text")

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.source, *self._tokenizer_args)
            ids = self._tokenizer.special_ids()
            self.cls_id, self.sep_id, self.mask_id = ids["[CLS]"], ids["[SEP]"], ids["[MASK]"]
        return self._tokenizer

    def _encode(self, a, b):
        tokenizer = self.tokenizer
        return pack(tokenizer.encode(a), None if b is None else tokenizer.encode(b),
                    self.max_seq_length, self.cls_id, self.sep_id)

    def _encoder_outputs(self, inputs):
        """pooled_output and sequence_output (numpy) from the checkpoint encoder or export."""
        import tensorflow as tf
        feed = {k: tf.constant(inputs[k]) for k in ("input_word_ids", "input_mask",
                                                     "input_type_ids")}
        out = self._encoder(feed, training=False)
        return {k: np.asarray(out[k]) for k in ("pooled_output", "sequence_output")}

    def _load_encoder(self, what):
        kind = self.source.kind
        if kind == "checkpoint":
            from albert_tf.modeling.encoder import AlbertEncoder
            self._encoder = self.source.build(AlbertEncoder)
        elif kind in ("encoder", "pretrainer"):
            self._encoder = self.source.loaded
        else:
            raise PredictError(f"{self.source.path} is a {kind} export: {what} needs a checkpoint "
                               f"or an encoder/pretrainer export")


# ---- fill-mask -------------------------------------------------------------------------------

def piece_text(piece):
    """Readable text of a SentencePiece piece: the word-start mark becomes nothing."""
    if piece.startswith("<") or piece.startswith("["):
        return piece
    return piece.replace(_UNDERLINE, " ").strip()


class FillMask(_Predictor):
    """Top-k tokens for each [MASK] of each text, from the masked-LM head.

    The text is split on [MASK] (any case); the pieces are tokenized one by one and joined with
    the mask id, so each [MASK] is exactly one token. A piece that follows a [MASK] without a
    space ("[MASK]." or "un[MASK]able") loses its word-start mark, as in running text.
    """

    def __init__(self, model, top_k=5, **kwargs):
        super().__init__(model, **kwargs)
        self.top_k = int(top_k)
        if self.top_k < 1:
            raise PredictError(f"--top_k={top_k} must be at least 1")
        if not self.source.has_mlm_head():
            what = ("a checkpoint without the masked-LM head (cls/predictions/...)"
                    if self.source.kind == "checkpoint" else f"a {self.source.kind} export")
            raise PredictError(f"fill_mask needs a masked-LM head, but {self.source.path} is "
                               f"{what}: use a pretraining checkpoint or an export made with "
                               f"--export_type=pretrainer")
        if self.source.kind == "checkpoint":
            from albert_tf.modeling.pretrainer import AlbertPretrainer
            self._model = self.source.build(AlbertPretrainer)
            self._mlm = lambda feed: self._model(feed, training=False)
        else:
            self._mlm = lambda feed: self.source.loaded.mlm(feed, training=False)

    def _segment_ids(self, text):
        """Ids of one segment with `None` where the masks go."""
        tokenizer = self.tokenizer
        parts = MASK_PATTERN.split(text)
        ids = []
        for i, part in enumerate(parts):
            if i:
                ids.append(None)
            pieces = tokenizer.tokenize(part)
            if i and pieces and part[:1] and not part[:1].isspace():
                # Glued to the mask: no word start ("▁" alone is dropped, "▁x" becomes "x").
                first = pieces[0]
                if first == _UNDERLINE:
                    pieces = pieces[1:]
                elif first.startswith(_UNDERLINE) and first[1:] in tokenizer.vocab:
                    pieces = [first[1:]] + pieces[1:]
            ids.extend(tokenizer.convert_tokens_to_ids(pieces))
        return ids

    def features(self, text, text_b=None):
        """(ids, type ids, mask positions) of one input; errors for no or truncated masks."""
        a = self._segment_ids(text)
        b = None if text_b is None else self._segment_ids(text_b)
        count = a.count(None) + (b.count(None) if b is not None else 0)
        if not count:
            raise PredictError(f"no [MASK] in {text!r}" + (
                f" or {text_b!r}" if text_b is not None else "") +
                ": fill_mask predicts the token at each [MASK]")
        ids, types = pack(a, b, self.max_seq_length, -1, -2)
        positions = [i for i, t in enumerate(ids) if t is None]
        if len(positions) != count:
            raise PredictError(f"{count - len(positions)} [MASK] of {text!r} fall beyond "
                               f"--max_seq_length={self.max_seq_length}")
        special = {-1: self.cls_id, -2: self.sep_id, None: self.mask_id}
        ids = [special.get(t, t) if t is None or t < 0 else t for t in ids]
        return ids, types, positions

    def __call__(self, texts, texts_b=None):
        import tensorflow as tf
        texts, texts_b = _check_pairs(texts, texts_b)
        feats = [self.features(a, b) for a, b in zip(texts, texts_b)]
        results = []
        for part in _batches(len(feats), self.batch_size):
            batch = feats[part]
            width = max(len(f[2]) for f in batch)
            positions = np.zeros([len(batch), width], np.int32)
            for i, f in enumerate(batch):
                positions[i, :len(f[2])] = f[2]
            inputs = pad_batch([(f[0], f[1]) for f in batch],
                               {"masked_lm_positions": positions})
            logits = np.asarray(self._mlm({k: tf.constant(v) for k, v in inputs.items()})[
                "mlm_logits"], np.float64)
            for i, f in enumerate(batch):
                results.append(self._result(texts[part][i], texts_b[part][i],
                                            logits[i, :len(f[2])], f[2]))
        return results

    def _result(self, text, text_b, logits, positions):
        tokenizer = self.tokenizer
        logits = logits - logits.max(-1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(-1, keepdims=True)
        masks = []
        for k, (row, position) in enumerate(zip(probabilities, positions)):
            top = np.argsort(-row, kind="stable")[:self.top_k]
            pieces = tokenizer.convert_ids_to_tokens(top)
            masks.append({"mask": k, "position": int(position), "predictions": [
                {"token": piece, "token_id": int(i), "text": piece_text(piece),
                 "probability": float(row[i])} for piece, i in zip(pieces, top)]})
        out = {"text": text}
        if text_b is not None:
            out["text_b"] = text_b
        fills = iter([m["predictions"][0]["text"] for m in masks])
        out["filled"] = MASK_PATTERN.sub(lambda _: next(fills), text)
        if text_b is not None:
            out["filled_b"] = MASK_PATTERN.sub(lambda _: next(fills), text_b)
        out["masks"] = masks
        return out


# ---- classification --------------------------------------------------------------------------

def _label_names(labels=None, task_name=None):
    if labels is not None and task_name:
        raise PredictError("give --labels or --task_name, not both")
    if labels is not None:
        names = [s.strip() for s in labels.split(",")] if isinstance(labels, str) else [
            str(s) for s in labels]
        if not all(names):
            raise PredictError(f"--labels={labels!r} has an empty label")
        return names, False
    if task_name:
        from albert_tf.data import glue
        try:
            task = glue.get_task(task_name)
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


class Classifier(_Predictor):
    """Labels and probabilities from a fine-tuned classifier: a run_classifier output_dir (its
    model.ckpt-best and albert_config.json; label strings from `task_name` or `labels`, else
    "0", "1", ...) or a raw-string serving export (`serving_default` on `text_a`/`text_b`).
    A one-output head (STS-B) gives a `score`."""

    def __init__(self, model, labels=None, task_name=None, **kwargs):
        super().__init__(model, **kwargs)
        names, regression = _label_names(labels, task_name)
        kind = self.source.kind
        if kind == "checkpoint":
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
            self._model = self.source.build(AlbertClassifier, num_labels=num_labels,
                                            regression=self.regression)
            self.num_labels = num_labels
            self.labels = None if self.regression else (
                names or [str(i) for i in range(num_labels)])
        elif kind == "text_classifier":
            if regression:
                raise PredictError(f"--task_name={task_name} is a regression task; the export "
                                   f"gives its own outputs")
            self.regression = False
            self.inputs = self.source.text_inputs()
            self.labels = names or _exported_label_names(self.source.loaded)
            self.num_labels = None
        else:
            raise PredictError(f"{self.source.path} is a {kind} export, which has no classifier "
                               f"head: give a run_classifier output_dir or a classifier export")

    def __call__(self, texts, texts_b=None):
        texts, texts_b = _check_pairs(texts, texts_b)
        results = []
        for part in _batches(len(texts), self.batch_size):
            a, b = texts[part], texts_b[part]
            if self.source.kind == "checkpoint":
                out = self._run_checkpoint(a, b)
            else:
                out = self._run_export(a, b)
            for i in range(len(a)):
                row = {"text": a[i]}
                if b[i] is not None:
                    row["text_b"] = b[i]
                row.update({k: v[i] for k, v in out.items()})
                results.append(row)
        return results

    def _run_checkpoint(self, a, b):
        import tensorflow as tf
        inputs = pad_batch([self._encode(x, y) for x, y in zip(a, b)])
        out = self._model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
        if self.regression:
            return {"score": [float(v) for v in np.asarray(out["predictions"])]}
        return self._named(np.asarray(out["probabilities"], np.float64))

    def _named(self, probabilities, predicted=None):
        labels = self.labels
        if labels is not None and len(labels) != probabilities.shape[-1]:
            raise PredictError(f"{len(labels)} labels ({', '.join(labels)}) but the model gives "
                               f"{probabilities.shape[-1]} probabilities")
        best = probabilities.argmax(-1)
        if predicted is None:
            predicted = [labels[i] if labels else str(i) for i in best]
        out = {"label": list(predicted),
               "probability": [float(p[i]) for p, i in zip(probabilities, best)],
               "probabilities": [[float(x) for x in p] for p in probabilities]}
        if labels is not None:
            out["labels"] = [list(labels)] * len(probabilities)
        return out

    def _run_export(self, a, b):
        import tensorflow as tf
        has_b = [y is not None for y in b]
        if "text_b" in self.inputs and not all(has_b):
            raise PredictError(f"the export {self.source.path} classifies pairs: give --text_b "
                               f"(or two tab-separated columns)")
        if "text_b" not in self.inputs and any(has_b):
            raise PredictError(f"the export {self.source.path} classifies single texts; it takes "
                               f"no --text_b")
        feed = {"text_a": tf.constant(a)}
        if "text_b" in self.inputs:
            feed["text_b"] = tf.constant(b)
        out = self.source.loaded.signatures["serving_default"](**feed)
        if "probabilities" not in out and "logits" not in out:
            for key in ("predictions", "score", "scores"):  # a regression export (STS-B)
                if key in out and out[key].dtype.is_floating:
                    return {"score": [float(v) for v in np.reshape(out[key].numpy(), [-1])]}
        if "probabilities" in out:
            probabilities = np.asarray(out["probabilities"], np.float64)
        elif "logits" in out:
            probabilities = np.asarray(tf.nn.softmax(out["logits"], -1), np.float64)
        else:
            raise PredictError(f"the export {self.source.path} returns {sorted(out)}, not "
                               f"probabilities, logits or predictions")
        predicted = None
        for key in ("labels", "label"):
            value = out.get(key)
            if value is not None and value.dtype == tf.string and value.shape.rank == 1:
                predicted = [v.decode("utf-8") for v in value.numpy()]
                break
        if predicted is not None and self.labels is not None:
            best = probabilities.argmax(-1)
            predicted = [self.labels[i] if i < len(self.labels) else p
                         for i, p in zip(best, predicted)]
        return self._named(probabilities, predicted)


# ---- embeddings ------------------------------------------------------------------------------

class Embedder(_Predictor):
    """One vector per text (or pair): `cls` the encoder's pooled_output ([CLS] through the
    pooler, the original `get_pooled_output`), `first` the [CLS] position of sequence_output,
    `mean` sequence_output averaged over the real tokens (special tokens included)."""

    def __init__(self, model, pooling="cls", **kwargs):
        super().__init__(model, **kwargs)
        if pooling not in POOLINGS:
            raise PredictError(f"--pooling={pooling!r}: one of {', '.join(POOLINGS)}")
        self.pooling = pooling
        self._load_encoder("embed")

    def vectors(self, texts, texts_b=None):
        """float32 [texts, hidden]."""
        texts, texts_b = _check_pairs(texts, texts_b)
        out = []
        for part in _batches(len(texts), self.batch_size):
            inputs = pad_batch([self._encode(a, b) for a, b in zip(texts[part], texts_b[part])])
            encoded = self._encoder_outputs(inputs)
            if self.pooling == "cls":
                vectors = encoded["pooled_output"]
            elif self.pooling == "first":
                vectors = encoded["sequence_output"][:, 0]
            else:
                mask = inputs["input_mask"][..., None].astype(np.float32)
                vectors = (encoded["sequence_output"] * mask).sum(1) / mask.sum(1)
            out.append(np.asarray(vectors, np.float32))
        if not out:
            return np.zeros([0, 0], np.float32)
        return np.concatenate(out, 0)

    def __call__(self, texts, texts_b=None):
        texts, texts_b = _check_pairs(texts, texts_b)
        vectors = self.vectors(texts, texts_b)
        results = []
        for a, b, v in zip(texts, texts_b, vectors):
            row = {"text": a}
            if b is not None:
                row["text_b"] = b
            row["embedding"] = [float(x) for x in v]
            results.append(row)
        return results


PREDICTORS = {"fill_mask": FillMask, "classify": Classifier, "embed": Embedder}


def predict(task, model, texts, texts_b=None, **options):
    """One-shot: builds the task's predictor for `model` and runs it on `texts`."""
    if task not in PREDICTORS:
        raise PredictError(f"--task={task!r}: one of {', '.join(TASKS)}")
    return PREDICTORS[task](model, **options)(texts, texts_b)


# ---- command line ----------------------------------------------------------------------------

FLAGS = flags.FLAGS


def define_flags():
    """The entry point's flags, defined on demand (names other scripts define are shared)."""
    def define(fn, name, *args, **kwargs):
        if name not in FLAGS:
            fn(name, *args, **kwargs)

    define(flags.DEFINE_enum, "task", None, list(TASKS), "What to predict.")
    define(flags.DEFINE_string, "model", None,
           "A checkpoint (original TF1 directory/prefix, Hugging Face directory, run_pretraining "
           "or run_classifier output_dir) or a SavedModel export directory.")
    define(flags.DEFINE_string, "spm_model_file", None,
           "SentencePiece model; default: the one *.model beside the checkpoint, or the "
           "export's asset.")
    define(flags.DEFINE_bool, "do_lower_case", None,
           "Lowercase the text; default: the export's setting, else true.")
    define(flags.DEFINE_string, "albert_config_file", None,
           "albert_config.json, when none is beside the checkpoint.")
    define(flags.DEFINE_string, "text", None, "One text (fill_mask: with [MASK] tokens).")
    define(flags.DEFINE_string, "text_b", None, "The second segment of a pair.")
    define(flags.DEFINE_string, "input_file", None,
           "One text per line, or two tab-separated columns for pairs.")
    define(flags.DEFINE_string, "output_file", None,
           "Write JSON lines here instead of printing them (embed: *.npy writes an array).")
    define(flags.DEFINE_integer, "max_seq_length", DEFAULT_MAX_SEQ_LENGTH,
           "Tokens per sequence, special included (default: 128, or the model's "
           "max_position_embeddings when smaller).")
    define(flags.DEFINE_integer, "batch_size", 32, "Texts per model call.")
    define(flags.DEFINE_integer, "top_k", 5, "fill_mask: candidates per [MASK].")
    define(flags.DEFINE_string, "task_name", None,
           "classify: the GLUE task whose label strings the checkpoint's outputs are.")
    define(flags.DEFINE_list, "labels", None, "classify: label strings, comma-separated.")
    define(flags.DEFINE_enum, "format", "json", ["json", "text"],
           "json: one JSON object per input; text: a short readable line per input.")
    define(flags.DEFINE_enum, "pooling", "cls", list(POOLINGS),
           "embed: cls (pooled_output), first ([CLS] of sequence_output) or mean.")


def read_input_file(path):
    """(texts, texts_b or None): a second tab-separated column makes pairs (all or none)."""
    if not os.path.isfile(path):
        raise PredictError(f"--input_file={path} not found")
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.strip():
                rows.append(line.split("\t"))
    if not rows:
        raise PredictError(f"--input_file={path} holds no text")
    widths = {len(r) for r in rows}
    if widths == {1}:
        return [r[0] for r in rows], None
    if widths == {2}:
        return [r[0] for r in rows], [r[1] for r in rows]
    raise PredictError(f"--input_file={path}: every line needs one text or two tab-separated "
                       f"texts (found lines with {sorted(widths)} columns)")


def format_text(result):
    """A short human-readable rendering of one result (--format=text)."""
    pair = f"  |  {result['text_b']}" if "text_b" in result else ""
    if "masks" in result:
        filled = result["filled"] + (f"  |  {result['filled_b']}" if "filled_b" in result else "")
        lines = [filled]
        for mask in result["masks"]:
            lines.append(f"  [MASK] {mask['mask'] + 1}: " + "  ".join(
                f"{p['text'] or p['token']} {p['probability']:.4f}" for p in mask["predictions"]))
        return "\n".join(lines)
    if "score" in result:
        return f"{result['score']:.4f}\t{result['text']}{pair}"
    if "label" in result:
        names = result.get("labels")
        if names:
            probabilities = ", ".join(f"{n} {p:.4f}"
                                      for n, p in zip(names, result["probabilities"]))
        else:
            probabilities = " ".join(f"{p:.4f}" for p in result["probabilities"])
        return f"{result['label']} ({probabilities})\t{result['text']}{pair}"
    vector = result["embedding"]
    head = " ".join(f"{x:.4f}" for x in vector[:8])
    more = " ..." if len(vector) > 8 else ""
    return f"[{head}{more}] ({len(vector)} dims)\t{result['text']}{pair}"


def write_results(results, output_file=None, vectors=None, stream=None, output_format="json"):
    if output_file and output_file.endswith(".npy"):
        if vectors is None:
            raise PredictError("--output_file=*.npy is for --task=embed")
        os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
        np.save(output_file, vectors)
        return
    render = format_text if output_format == "text" else (
        lambda r: json.dumps(r, ensure_ascii=False))
    lines = "".join(render(r) + "\n" for r in results)
    if output_file:
        os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
        with open(output_file, "w", encoding="utf-8") as f:
            f.write(lines)
    else:
        (stream or sys.stdout).write(lines)
        (stream or sys.stdout).flush()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if (FLAGS.text is None) == (FLAGS.input_file is None):
        raise app.UsageError("give --text (and --text_b) or --input_file")
    if FLAGS.input_file and FLAGS.text_b is not None:
        raise app.UsageError("--text_b goes with --text; pairs in --input_file are two "
                             "tab-separated columns")
    try:
        if FLAGS.input_file:
            texts, texts_b = read_input_file(FLAGS.input_file)
        else:
            texts, texts_b = [FLAGS.text], None if FLAGS.text_b is None else [FLAGS.text_b]
        common = dict(spm_model_file=FLAGS.spm_model_file, do_lower_case=FLAGS.do_lower_case,
                      max_seq_length=FLAGS.max_seq_length if FLAGS["max_seq_length"].present
                      else None, batch_size=FLAGS.batch_size,
                      albert_config_file=FLAGS.albert_config_file)
        if FLAGS.task == "fill_mask":
            predictor = FillMask(FLAGS.model, top_k=FLAGS.top_k, **common)
        elif FLAGS.task == "classify":
            predictor = Classifier(FLAGS.model, labels=FLAGS.labels, task_name=FLAGS.task_name,
                                   **common)
        else:
            predictor = Embedder(FLAGS.model, pooling=FLAGS.pooling, **common)
        vectors = None
        if FLAGS.task == "embed" and FLAGS.output_file and FLAGS.output_file.endswith(".npy"):
            vectors, results = predictor.vectors(texts, texts_b), []
        else:
            results = predictor(texts, texts_b)
        write_results(results, FLAGS.output_file, vectors, output_format=FLAGS.format)
    except PredictError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if FLAGS.output_file:
        logging.info("Wrote %d predictions to %s", len(texts), FLAGS.output_file)
    return 0


def run():
    define_flags()
    flags.mark_flags_as_required(["task", "model"])
    app.run(main)


if __name__ == "__main__":
    run()
