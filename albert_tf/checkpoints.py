"""Checkpoint formats and conversions: the original TF1 layout, Hugging Face ALBERT, and ours.

Every format is read into one mapping {original TF1 variable name: numpy array}; a model's
`tf1_weights()` gives the same names for its variables, so loading is one checked assignment.
Formats:
  "albert_tf"  albert_config.json + a TF2 object checkpoint (what our trainer writes)
  "tf1"        albert_config.json + a name-based checkpoint with the original names
               (the released `model.ckpt-best`; also TF-Hub v1 modules, `module/` prefix)
  "hf"         config.json + model.safetensors (or pytorch_model.bin), transformers' names
"""

import json
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig, atomic_write_text

FORMATS = ("albert_tf", "tf1", "hf")
MODEL_KEY = "model"  # our object checkpoints hold the weights under this child
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# Training state in TF1 checkpoints that a model never loads.
_TF1_IGNORED = re.compile(r"(^global_step$|/(adam|lamb)_[mv]$|/Adam(_1)?$|^beta[12]_power$)")

# Hugging Face ↔ TF1 names: (HF pattern, TF1 pattern, transpose). `{g}`/`{i}` are group and
# inner-group indices. HF stores Linear weights [out, in]; TF1 kernels are [in, out].
_LAYER = "albert.encoder.albert_layer_groups.{g}.albert_layers.{i}."
_BLOCK = "bert/encoder/transformer/group_{g}/inner_group_{i}/"
_HF_RULES = [
    ("albert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("albert.embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings",
     False),
    ("albert.embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings",
     False),
    ("albert.embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("albert.embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ("albert.encoder.embedding_hidden_mapping_in.weight",
     "bert/encoder/embedding_hidden_mapping_in/kernel", True),
    ("albert.encoder.embedding_hidden_mapping_in.bias",
     "bert/encoder/embedding_hidden_mapping_in/bias", False),
]
for _hf, _tf1 in [("attention.query", "attention_1/self/query"),
                  ("attention.key", "attention_1/self/key"),
                  ("attention.value", "attention_1/self/value"),
                  ("attention.dense", "attention_1/output/dense"),
                  ("ffn", "ffn_1/intermediate/dense"),
                  ("ffn_output", "ffn_1/intermediate/output/dense")]:
    _HF_RULES += [(_LAYER + _hf + ".weight", _BLOCK + _tf1 + "/kernel", True),
                  (_LAYER + _hf + ".bias", _BLOCK + _tf1 + "/bias", False)]
for _hf, _tf1 in [("attention.LayerNorm", "LayerNorm"), ("full_layer_layer_norm", "LayerNorm_1")]:
    _HF_RULES += [(_LAYER + _hf + ".weight", _BLOCK + _tf1 + "/gamma", False),
                  (_LAYER + _hf + ".bias", _BLOCK + _tf1 + "/beta", False)]
_HF_RULES += [
    ("albert.pooler.weight", "bert/pooler/dense/kernel", True),
    ("albert.pooler.bias", "bert/pooler/dense/bias", False),
    ("predictions.dense.weight", "cls/predictions/transform/dense/kernel", True),
    ("predictions.dense.bias", "cls/predictions/transform/dense/bias", False),
    ("predictions.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
    ("predictions.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta", False),
    ("predictions.bias", "cls/predictions/output_bias", False),
    ("sop_classifier.classifier.weight", "cls/seq_relationship/output_weights", False),
    ("sop_classifier.classifier.bias", "cls/seq_relationship/output_bias", False),
]
# Tied copies and buffers that transformers may store; they carry no weights of their own.
_HF_IGNORED = re.compile(r"(^predictions\.decoder\.|position_ids$)")


def _pattern_to_regex(pattern):
    return re.compile("^" + re.escape(pattern).replace(r"\{g\}", r"(?P<g>\d+)")
                      .replace(r"\{i\}", r"(?P<i>\d+)") + "$")


_HF_TO_TF1 = [(_pattern_to_regex(hf), tf1, t) for hf, tf1, t in _HF_RULES]
_TF1_TO_HF = [(_pattern_to_regex(tf1), hf, t) for hf, tf1, t in _HF_RULES]


def _rename(name, rules):
    for regex, target, transpose in rules:
        m = regex.match(name)
        if m:
            return target.format(**m.groupdict()), transpose
    return None, False


def hf_to_tf1(state):
    """Hugging Face state dict (numpy arrays) → {TF1 name: array}. Unknown keys are an error."""
    out, unknown = {}, []
    for key, value in state.items():
        name = key if key.startswith(("albert.", "predictions.", "sop_classifier.")) else (
            "albert." + key)
        if _HF_IGNORED.search(name):
            continue
        target, transpose = _rename(name, _HF_TO_TF1)
        if target is None:
            unknown.append(key)
            continue
        out[target] = np.ascontiguousarray(value.T) if transpose else value
    if unknown:
        raise ValueError(f"Hugging Face checkpoint has tensors that are not ALBERT weights: "
                         f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
    return out


def tf1_to_hf(arrays):
    """{TF1 name: array} → a Hugging Face state dict (transformers' AlbertForPreTraining names)."""
    out = {}
    for name, value in arrays.items():
        target, transpose = _rename(name, _TF1_TO_HF)
        if target is None:
            raise ValueError(f"no Hugging Face name for tensor {name!r}")
        out[target] = np.ascontiguousarray(value.T) if transpose else np.ascontiguousarray(value)
    return out


# ---- locating and reading a checkpoint ---------------------------------------------------------

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


def read_checkpoint(path):
    """(arrays {TF1 name: np.ndarray}, config path or None, format) for any supported path."""
    fmt, location, config = resolve_checkpoint(path)
    if fmt == "hf":
        arrays = hf_to_tf1(_read_hf_state(location))
    else:
        reader = tf.train.load_checkpoint(location)
        arrays = {}
        for key in reader.get_variable_to_shape_map():
            name = _tf1_name(key) if fmt == "tf1" else _object_key_to_name(key)
            if name is not None:
                arrays[name] = reader.get_tensor(key)
    return arrays, config, fmt


def _tf1_name(key):
    name = key[len("module/"):] if key.startswith("module/") else key
    return None if _TF1_IGNORED.search(name) else name


def _object_key_to_name(key):
    """`model/bert.Sembeddings.../.ATTRIBUTES/VARIABLE_VALUE` → `bert/embeddings/...`."""
    prefix = MODEL_KEY + "/"
    if not (key.startswith(prefix) and key.endswith(_VALUE_SUFFIX)):
        return None
    escaped = key[len(prefix):-len(_VALUE_SUFFIX)]
    if "/" in escaped:  # optimizer slots and other nested state
        return None
    return re.sub(r"\.(S|\.)", lambda m: "/" if m.group(1) == "S" else ".", escaped)


def _read_hf_state(location):
    if location.endswith(".index.json"):
        with tf.io.gfile.GFile(location) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        state = {}
        for shard in shards:
            state.update(_read_hf_state(os.path.join(os.path.dirname(location), shard)))
        return state
    if location.endswith(".safetensors"):
        from safetensors.numpy import load_file
        return load_file(location)
    try:
        import torch
    except ImportError:
        raise ImportError(f"{location} is a PyTorch pickle: install torch to read it, or convert "
                          f"it to model.safetensors") from None
    state = torch.load(location, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy()
            for k, v in state.items()}


# ---- assigning to a model ----------------------------------------------------------------------

def _group0_name(name):
    """The group-0 / first-sublayer counterpart used by the original `init_from_group0` warm start."""
    name = re.sub(r"/group_\d+/", "/group_0/", name)
    return re.sub(r"/(ffn|attention)_\d+/", r"/\1_1/", name)


def assign_weights(model, arrays, source="checkpoint", init_from_group0=False,
                   allow_missing=()):
    """Checks every tensor against the model, then assigns them all; never a partial load.

    allow_missing: name prefixes that may be absent (left at their initial values, logged).
    """
    expected = model.tf1_weights()
    values, missing, bad_shapes = {}, [], []
    for name, variable in expected.items():
        value = arrays.get(name)
        if value is None and init_from_group0:
            value = arrays.get(_group0_name(name))
        if value is None:
            if not name.startswith(tuple(allow_missing)):
                missing.append(name)
            continue
        if tuple(value.shape) != tuple(variable.shape):
            bad_shapes.append(f"{name}: checkpoint {tuple(value.shape)} vs model "
                              f"{tuple(variable.shape)}")
        values[name] = value
    owned_scopes = {name.split("/")[0] for name in expected}
    unexpected = sorted(n for n in arrays if n.split("/")[0] in owned_scopes and n not in expected
                        and not init_from_group0)
    problems = []
    if bad_shapes:
        problems.append("tensors whose shapes do not fit the config:\n  " + "\n  ".join(bad_shapes))
    if missing:
        problems.append(f"{len(missing)} tensors the model needs are missing, e.g. "
                        + ", ".join(missing[:4]))
    if unexpected:
        problems.append(f"{len(unexpected)} tensors the config does not use (check "
                        f"num_hidden_groups, inner_group_num, embedding_size), e.g. "
                        + ", ".join(unexpected[:4]))
    if problems:
        raise ValueError(f"{source} does not fit the model config: " + "; ".join(problems))
    skipped = [n for n in expected if n not in values]
    if skipped:
        logging.warning("%s: %d tensors not in the checkpoint keep their initial values: %s",
                        source, len(skipped), ", ".join(skipped))
    for name, value in values.items():
        variable = expected[name]
        variable.assign(value.astype(variable.dtype, copy=False))
    return sorted(values)


# ---- writing -----------------------------------------------------------------------------------

def _model_arrays(model):
    return {name: np.asarray(variable.numpy()) for name, variable in model.tf1_weights().items()}


def named_weights_checkpoint(model):
    """A trackable holding the model's variables under their TF1 names (our checkpoint layout)."""
    variables = {name: getattr(v, "value", v) for name, v in model.tf1_weights().items()}
    return tf.train.Checkpoint(**variables)


def _write_checkpoint_state(directory, prefix_name):
    atomic_write_text(os.path.join(directory, "checkpoint"),
                      f'model_checkpoint_path: "{prefix_name}"\n'
                      f'all_model_checkpoint_paths: "{prefix_name}"\n')


def _publish(tmp_prefix, final_prefix):
    """Renames a checkpoint written under `tmp_prefix`: data files first, the index last."""
    for path in sorted(tf.io.gfile.glob(tmp_prefix + ".data-*")):
        tf.io.gfile.rename(path, final_prefix + path[len(tmp_prefix):], overwrite=True)
    tf.io.gfile.rename(tmp_prefix + ".index", final_prefix + ".index", overwrite=True)


def write_tf1_checkpoint(arrays, prefix, global_step=0):
    """A name-based checkpoint with the original names, readable by TF1 `tf.train.Saver`."""
    tmp = f"{prefix}.tmp-{os.getpid()}"
    names = list(arrays) + ["global_step"]
    tensors = [tf.constant(arrays[n]) for n in arrays] + [tf.constant(global_step, tf.int64)]
    tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)
    _publish(tmp, prefix)


def write_hf_checkpoint(arrays, config, directory):
    """config.json + model.safetensors that transformers' Albert*.from_pretrained loads."""
    from safetensors.numpy import save_file
    state = tf1_to_hf(arrays)
    hf_config = config.to_hf_dict()
    if not any(k.startswith(("predictions.", "sop_classifier.")) for k in state):
        hf_config["architectures"] = ["AlbertModel"]
    tmp = os.path.join(directory, f".model.safetensors.tmp-{os.getpid()}")
    save_file(state, tmp, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(directory, "model.safetensors"))
    atomic_write_text(os.path.join(directory, "config.json"), json.dumps(hf_config, indent=2))


def save_pretrained(model, directory, format="albert_tf", spm_model_file=None):
    """Writes the model's weights and config to `directory` in one of FORMATS."""
    if format not in FORMATS:
        raise ValueError(f"unknown checkpoint format {format!r}; use one of {FORMATS}")
    tf.io.gfile.makedirs(directory)
    if format == "hf":
        write_hf_checkpoint(_model_arrays(model), model.config, directory)
    elif format == "tf1":
        write_tf1_checkpoint(_model_arrays(model), os.path.join(directory, "model.ckpt-best"))
        _write_checkpoint_state(directory, "model.ckpt-best")
    else:
        prefix = os.path.join(directory, "model.ckpt")
        tmp = tf.train.Checkpoint(**{MODEL_KEY: named_weights_checkpoint(model)}).write(
            f"{prefix}.tmp-{os.getpid()}")
        _publish(tmp, prefix)
        _write_checkpoint_state(directory, "model.ckpt")
    if format != "hf":
        model.config.to_json_file(os.path.join(directory, "albert_config.json"))
    if spm_model_file:
        tf.io.gfile.copy(spm_model_file, os.path.join(directory, os.path.basename(spm_model_file)),
                         overwrite=True)
    return directory


class PretrainedMixin:
    """`from_pretrained` / `save_pretrained` for models that define `tf1_weights()`."""

    @classmethod
    def from_pretrained(cls, path, config=None, init_from_group0=False, allow_missing=(),
                        **kwargs):
        """Builds the model from a checkpoint in any supported format and loads its weights.

        config: an AlbertConfig, a dict, or a path; by default the config beside the checkpoint.
        """
        arrays, config_path, fmt = read_checkpoint(path)
        if config is None:
            if config_path is None:
                raise ValueError(f"no albert_config.json or config.json beside checkpoint {path}; "
                                 f"pass config= (or --albert_config_file)")
            config = config_path
        if isinstance(config, (str, os.PathLike)):
            config = AlbertConfig.from_json_file(str(config))
        elif isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        model = cls(config, **kwargs)
        assign_weights(model, arrays, source=f"{fmt} checkpoint {path}",
                       init_from_group0=init_from_group0, allow_missing=allow_missing)
        return model

    def load_checkpoint(self, path, init_from_group0=False, allow_missing=()):
        """Loads weights from any supported checkpoint into this (already built) model."""
        arrays, _, fmt = read_checkpoint(path)
        return assign_weights(self, arrays, source=f"{fmt} checkpoint {path}",
                              init_from_group0=init_from_group0, allow_missing=allow_missing)

    def save_pretrained(self, directory, format="albert_tf", spm_model_file=None):
        """Writes `directory` in format "albert_tf" (ours), "tf1" (original) or "hf"."""
        return save_pretrained(self, directory, format=format, spm_model_file=spm_model_file)
