"""What a model path holds for predict and the tokenizer loader: a checkpoint in any format
`read_checkpoint` reads, or one of the SavedModel export kinds."""

import os

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.dtype_policy import float32_policy
from albert_tf.formats.checkpoints import assign_weights, missing_allowed, read_local_checkpoint
from albert_tf.formats.names import local_model_path, suggestion
from albert_tf.formats.resolve import SourceError, is_saved_model


def _import_tensorflow_text():
    """Exports with tokenizer ops need the tensorflow-text op kernels registered first."""
    try:
        import tensorflow_text  # noqa: F401
    except ImportError:  # the encoder and pretrainer exports do not need it
        pass


def _checkpoint_location(path):
    """(path for read_local_checkpoint, the directory beside it)."""
    path = os.fspath(path).rstrip("/")
    return path, (path if tf.io.gfile.isdir(path) else os.path.dirname(path) or ".")


class ModelSource:
    """What a model path holds: `kind` is "checkpoint" (any format `read_checkpoint` reads;
    a run directory means its best checkpoint, resolve.run_checkpoint), one of the SavedModel export kinds
    "encoder", "pretrainer", "text_classifier" (raw-string serving), "text_tagger" (run_ner's
    raw-sentence serving), "preprocessor", or a LiteRT file: "tflite_text" (strings in) or
    "tflite_ids" (token ids in; its vocabulary is the export's beside it)."""

    def __init__(self, path, albert_config_file=None):
        self.path = local_model_path(path)
        if not (tf.io.gfile.exists(self.path) or tf.io.gfile.exists(self.path + ".index")):
            raise SourceError(f"--model={self.path} not found: give a checkpoint (directory or "
                              f"prefix), a SavedModel export directory, a .tflite file or a "
                              f"model name{suggestion(self.path)}")
        self.loaded = None
        self.arrays = self.config = None
        if self.path.endswith(".tflite"):
            self._load_tflite()
        elif is_saved_model(self.path):
            self._load_saved_model()
        else:
            self.kind = "checkpoint"
            self.location, self.directory = _checkpoint_location(self.path)
            self._read_checkpoint(albert_config_file)

    def _load_saved_model(self):
        _import_tensorflow_text()
        try:
            self.loaded = tf.saved_model.load(self.path)
        except Exception as e:  # noqa: BLE001 - reported with the path
            hint = (" (exports with tokenizer ops need `pip install tensorflow-text`)"
                    if "SentencepieceOp" in str(e) or "not registered" in str(e) else "")
            raise SourceError(f"cannot load the SavedModel {self.path}: {e}{hint}") from e
        self.kind = self._export_kind()
        self.directory = self.path
        asset = getattr(self.loaded, "albert_config_file", None)
        if asset is not None:
            self.config = AlbertConfig.from_json_file(asset.asset_path.numpy().decode("utf-8"))

    def _load_tflite(self):
        from albert_tf.formats import litert  # tensorflow-text: only for .tflite
        try:
            self.loaded = litert.interpreter(model_path=self.path).get_signature_runner()
        except (ImportError, RuntimeError, ValueError) as e:
            raise SourceError(f"cannot load the LiteRT model {self.path}: {e}") from e
        inputs = self.loaded.get_input_details()
        self.kind = "tflite_ids" if "input_word_ids" in inputs else "tflite_text"
        self.directory = os.path.dirname(self.path) or "."
        self.seq_length = (int(inputs["input_word_ids"]["shape"][-1])
                           if self.kind == "tflite_ids" else None)

    def _read_checkpoint(self, albert_config_file):
        try:
            self.arrays, config_path, self.format = read_local_checkpoint(self.location)
        except (FileNotFoundError, ValueError) as e:
            raise SourceError(f"--model={self.path}: {e}") from e
        config_path = albert_config_file or config_path
        if not config_path:
            raise SourceError(f"no albert_config.json or config.json beside the checkpoint "
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
        if "sentences" in names:
            return "text_tagger"
        if {"question", "context"} <= set(names):
            return "text_squad"
        if "input_word_ids" in names and callable(obj):
            return "encoder"
        raise SourceError(f"{self.path} is a SavedModel of no kind this tool knows: expected an "
                          f"albert_tf encoder/pretrainer export or a raw-string serving export "
                          f"(serving_default inputs: {sorted(names) or 'none'})")

    def has_mlm_head(self):
        if self.kind == "checkpoint":
            return "cls/predictions/output_bias" in self.arrays
        return self.kind == "pretrainer"

    def num_classifier_labels(self):
        if self.kind == "checkpoint" and "output_weights" in self.arrays:
            return int(self.arrays["output_weights"].shape[0])
        return None

    def text_inputs(self):
        """The string inputs of a raw-string export's serving_default (or a string-in
        .tflite's), in packing order."""
        if self.kind == "tflite_text":
            spec = self.loaded.get_input_details()
        else:
            spec = self.loaded.signatures["serving_default"].structured_input_signature[1]
        return [k for k in ("text_a", "text_b") if k in spec]

    def build(self, model_cls, **kwargs):
        """A model of `model_cls` with the checkpoint's weights (checked, all-or-nothing), in
        float32 whatever Keras policy the process holds (a run trained in it leaves its mixed
        policy behind): predictions the same in a notebook as from the command line."""
        with float32_policy():
            model = model_cls(self.config, **kwargs)
            try:
                assign_weights(model, self.arrays, source=f"{self.format} checkpoint {self.path}",
                               allow_missing=missing_allowed(self.format, ()))
            except ValueError as e:
                raise SourceError(str(e)) from e
        return model
