"""What a model path holds: the checkpoint format (original TF1, Hugging Face, ours) for
`from_pretrained` and the fine-tuning scripts, or the kind of SavedModel export for predict;
and the vocabulary that lies beside it. One resolver for every entry point."""

import glob
import os
import re

import tensorflow as tf

from albert_tf.formats import keras_hub


class SourceError(ValueError):
    """A model path, tokenizer or input that cannot be used, with a message naming it."""


def _exists(path):
    return tf.io.gfile.exists(path)


def _find_tf_prefix(directory):
    """The checkpoint prefix inside a directory: latest in `checkpoint`, else model.ckpt-best, else
    the highest-numbered *.index."""
    latest = tf.train.latest_checkpoint(directory)
    if latest:
        return latest
    for prefix in ("model.ckpt-best", "variables/variables", "model.ckpt"):
        if _exists(os.path.join(directory, prefix + ".index")):
            return os.path.join(directory, prefix)
    indexes = tf.io.gfile.glob(os.path.join(directory, "*.index"))
    if not indexes:
        return None

    def step(path):
        m = re.search(r"-(\d+)\.index$", path)
        return int(m.group(1)) if m else -1
    return max(indexes, key=step)[: -len(".index")]


def resolve_checkpoint(path):
    """(format, location, config path or None) for any path `from_pretrained` accepts."""
    path = str(path).rstrip("/")
    # A common mistake (original issue #135): passing model.ckpt-N.index instead of the prefix.
    m = re.match(r"^(.*)\.(index|data-\d+-of-\d+|meta)$", path)
    if m and _exists(path):
        path = m.group(1)
    if _exists(path + ".index"):
        directory = os.path.dirname(path)
        config = _first_existing(directory, ("albert_config.json", "config.json"))
        return _tf_format(path), path, config
    if not _exists(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if path.endswith((".safetensors", ".bin")):
        return "hf", path, _first_existing(os.path.dirname(path), ("config.json",))
    if not tf.io.gfile.isdir(path):
        raise ValueError(f"{path} is neither a checkpoint prefix nor a checkpoint directory")
    if keras_hub.is_preset(path):
        return "keras_hub", path, os.path.join(path, "config.json")
    for weights in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"):
        if _exists(os.path.join(path, weights)) and _exists(os.path.join(path, "config.json")):
            return "hf", os.path.join(path, weights), os.path.join(path, "config.json")
    prefix = _find_tf_prefix(path)
    if prefix is None:
        raise ValueError(f"no checkpoint in {path}: expected a TF checkpoint (*.index), or a "
                         f"Hugging Face config.json with model.safetensors/pytorch_model.bin")
    config = _first_existing(path, ("albert_config.json", "assets/albert_config.json",
                                    "config.json"))
    return _tf_format(prefix), prefix, config


def _first_existing(directory, names):
    for name in names:
        candidate = os.path.join(directory, name)
        if _exists(candidate):
            return candidate
    return None


def _tf_format(prefix):
    names = [name for name, _ in tf.train.list_variables(prefix)]
    return "albert_tf" if "_CHECKPOINTABLE_OBJECT_GRAPH" in names else "tf1"




def is_saved_model(path):
    return tf.io.gfile.isdir(path) and tf.io.gfile.exists(os.path.join(path, "saved_model.pb"))


def vocabularies_beside(directory):
    """The vocabularies in a checkpoint's directory, sorted: its SentencePiece models (*.model;
    a KerasHub preset's assets/tokenizer/vocabulary.spm), else its WordPiece vocabularies
    (vocab*.txt: the Chinese releases' vocab_chinese.txt, Hugging Face's vocab.txt)."""
    preset = os.path.join(directory, keras_hub.TOKENIZER_FILE)
    if _exists(preset):
        return [preset]
    if "://" in directory:
        def matches(pattern):
            return tf.io.gfile.glob(os.path.join(directory, pattern))
    else:
        def matches(pattern):
            return glob.glob(os.path.join(glob.escape(directory), pattern))
    return sorted(matches("*.model")) or sorted(matches("vocab*.txt"))


def _import_tensorflow_text():
    """Exports with tokenizer ops need the tensorflow-text op kernels registered first."""
    try:
        import tensorflow_text  # noqa: F401
    except ImportError:  # the encoder and pretrainer exports do not need it
        pass


def _checkpoint_location(path):
    """(path for read_checkpoint, directory beside it): a directory holding model.ckpt-best
    (a fine-tuning run's best checkpoint) uses it rather than the latest checkpoint."""
    path = os.fspath(path).rstrip("/")
    if tf.io.gfile.isdir(path):
        best = os.path.join(path, "model.ckpt-best")
        if tf.io.gfile.exists(best + ".index"):
            return best, path
        return path, path
    return path, os.path.dirname(path) or "."


class ModelSource:
    """What a model path holds: `kind` is "checkpoint" (any format `read_checkpoint` reads;
    a directory with model.ckpt-best uses that one) or one of the SavedModel export kinds
    "encoder", "pretrainer", "text_classifier" (raw-string serving), "text_tagger" (run_ner's
    raw-sentence serving), "preprocessor"."""

    def __init__(self, path, albert_config_file=None):
        self.path = os.fspath(path)
        if not (tf.io.gfile.exists(self.path) or tf.io.gfile.exists(self.path + ".index")):
            raise SourceError(f"--model={self.path} not found: give a checkpoint (directory or "
                              f"prefix) or a SavedModel export directory")
        self.loaded = None
        self.arrays = self.config = None
        if is_saved_model(self.path):
            self._load_saved_model()
        else:
            self.kind = "checkpoint"
            self.location, self.directory = _checkpoint_location(self.path)
            self._read_checkpoint(albert_config_file)

    def _load_saved_model(self):
        from albert_tf.config import AlbertConfig
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

    def _read_checkpoint(self, albert_config_file):
        from albert_tf.config import AlbertConfig
        from albert_tf.formats.checkpoints import read_checkpoint
        try:
            self.arrays, config_path, self.format = read_checkpoint(self.location)
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
        """The string inputs of a raw-string export's serving_default, in packing order."""
        spec = self.loaded.signatures["serving_default"].structured_input_signature[1]
        return [k for k in ("text_a", "text_b") if k in spec]

    def build(self, model_cls, **kwargs):
        """A model of `model_cls` with the checkpoint's weights (checked, all-or-nothing)."""
        from albert_tf.formats.checkpoints import assign_weights, missing_allowed
        model = model_cls(self.config, **kwargs)
        try:
            assign_weights(model, self.arrays, source=f"{self.format} checkpoint {self.path}",
                           allow_missing=missing_allowed(self.format, ()))
        except ValueError as e:
            raise SourceError(str(e)) from e
        return model


def find_vocabulary(checkpoint):
    """The single vocabulary (SentencePiece model or WordPiece vocab*.txt) beside (or inside) a
    checkpoint; a clear error otherwise."""
    _, location, _ = resolve_checkpoint(checkpoint)
    directory = location if tf.io.gfile.isdir(location) else os.path.dirname(location)
    found = vocabularies_beside(directory)
    if len(found) != 1:
        raise ValueError(f"--spm_model_file or --vocab_file is required: expected exactly one "
                         f"*.model or vocab*.txt beside checkpoint {checkpoint} in {directory}, "
                         f"found {', '.join(found) if found else 'none'}")
    return found[0]
