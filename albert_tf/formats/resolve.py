"""What a model path holds: the checkpoint format (original TF1, Hugging Face, ours) for
`from_pretrained` and the fine-tuning scripts, or the kind of SavedModel export for predict;
and the vocabulary that lies beside it. One resolver for every entry point."""

import glob
import os
import re

import tensorflow as tf

from albert_tf.formats import keras_hub
from albert_tf.formats.names import local_model_path, suggestion


class SourceError(ValueError):
    """A model path, tokenizer or input that cannot be used, with a message naming it."""


def _exists(path):
    return tf.io.gfile.exists(path)


BEST_NAME = "model.ckpt-best"  # a run's best checkpoint, as the original releases name theirs
BEST_RECORD = "best_checkpoint.txt"  # which step, metric and value model.ckpt-best holds


def read_best_record(directory):
    """{"global_step", "metric", "value", "checkpoint"} of the directory's best checkpoint, from
    best_checkpoint.txt (None without one: a release's model.ckpt-best, or no evaluation)."""
    path = os.path.join(directory, BEST_RECORD)
    if not _exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        fields = dict(line.split(" = ", 1) for line in f.read().splitlines() if " = " in line)
    try:
        return dict(fields, global_step=int(fields["global_step"]), value=float(fields["value"]))
    except (KeyError, ValueError):
        return None


def run_checkpoint(directory):
    """(prefix, why) of the checkpoint that a directory means, for every tool that reads one
    (fine-tuning's --init_checkpoint, export_hub, convert_checkpoint, predict): the run's best
    (model.ckpt-best, kept by its evaluations) when it has one, else its newest; (None, None)
    when the directory holds no TensorFlow checkpoint."""
    latest = tf.train.latest_checkpoint(directory)
    best = os.path.join(directory, BEST_NAME)
    if _exists(best + ".index"):
        record = read_best_record(directory)
        why = (f"the run's best by {record['metric']} ({record['value']:.4g} at step "
               f"{record['global_step']})" if record else f"the directory's {BEST_NAME}")
        if latest and os.path.basename(latest) != BEST_NAME:
            why += f"; its newest is {os.path.basename(latest)}"
        return best, why
    if latest and re.search(r"-\d+$", latest):
        return latest, "the run's newest checkpoint (it kept no best: no evaluation ran)"
    if latest:  # a saved model (save_pretrained's model.ckpt), not a run's step
        return latest, None
    for name in ("variables/variables", "model.ckpt"):
        if _exists(os.path.join(directory, name + ".index")):
            return os.path.join(directory, name), None
    indexes = tf.io.gfile.glob(os.path.join(directory, "*.index"))
    if not indexes:
        return None, None

    def step(path):
        m = re.search(r"-(\d+)\.index$", path)
        return int(m.group(1)) if m else -1
    return max(indexes, key=step)[: -len(".index")], None


def checkpoint_choice(path):
    """Why `path` resolves to the checkpoint it does, for the log: which checkpoint of a run
    directory and why; "" for a prefix or file given explicitly (read as given)."""
    path = os.fspath(path).rstrip("/")
    if not tf.io.gfile.isdir(path) or _exists(path + ".index"):
        return ""
    prefix, why = run_checkpoint(path)
    return f" ({why})" if prefix and why else ""


def resolve_checkpoint(path):
    """(format, location, config path or None) for any path or model name (formats/names)
    `from_pretrained` accepts."""
    return checkpoint_at(local_path(path))


def local_path(path):
    """The local path of a checkpoint path or model name: the one place a name is resolved."""
    return local_model_path(os.fspath(path).rstrip("/"))


def checkpoint_at(path):
    """resolve_checkpoint for a local path (a name already resolved)."""
    # A common mistake (original issue #135): passing model.ckpt-N.index instead of the prefix.
    m = re.match(r"^(.*)\.(index|data-\d+-of-\d+|meta)$", path)
    if m and _exists(path):
        path = m.group(1)
    if _exists(path + ".index"):
        config = _config_beside(os.path.dirname(path), ("albert_config.json", "config.json"))
        return _tf_format(path), path, config
    if not _exists(path):
        raise FileNotFoundError(f"checkpoint not found: {path}{suggestion(path)}")
    if path.endswith((".safetensors", ".bin")):
        return "hf", path, _first_existing(os.path.dirname(path), ("config.json",))
    if not tf.io.gfile.isdir(path):
        directory = os.path.dirname(path) or "."
        raise ValueError(f"{path} is neither a checkpoint prefix nor a checkpoint directory" + (
            f": give its directory, {directory}" if path.endswith(".json") else ""))
    if keras_hub.is_preset(path):
        return "keras_hub", path, os.path.join(path, "config.json")
    for weights in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"):
        if _exists(os.path.join(path, weights)) and _exists(os.path.join(path, "config.json")):
            return "hf", os.path.join(path, weights), os.path.join(path, "config.json")
    prefix, _ = run_checkpoint(path)
    if prefix is None:
        versions = sorted((n for n in tf.io.gfile.listdir(path) if n.strip("/").isdigit()
                           and is_saved_model(os.path.join(path, n.strip("/")))),
                          key=lambda n: int(n.strip("/")))
        raise ValueError(f"no checkpoint in {path}: expected a TF checkpoint (*.index), or a "
                         f"Hugging Face config.json with model.safetensors/pytorch_model.bin" + (
                             f"; it holds TF Serving's versions of a SavedModel: give one, "
                             f"{os.path.join(path, versions[-1].strip('/'))}" if versions
                             else ""))
    config = _config_beside(path, ("albert_config.json", "assets/albert_config.json",
                                   "config.json"))
    return _tf_format(prefix), prefix, config


def _config_beside(directory, names):
    """The first of `names` in `directory`, else its one albert_config_*.json (brightmart/
    albert_zh's releases name theirs albert_config_tiny.json, ..._base.json, ...)."""
    found = _first_existing(directory, names)
    if found or "://" in directory:
        return found
    named = glob.glob(os.path.join(glob.escape(directory or "."), "albert_config_*.json"))
    return named[0] if len(named) == 1 else None


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
