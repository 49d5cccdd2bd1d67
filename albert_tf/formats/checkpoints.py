"""Checkpoint formats: the original TF1 layout, Hugging Face ALBERT, and ours.

Every format is read into one mapping {original TF1 variable name: numpy array}; a model's
`tf1_weights()` gives the same names for its variables, so loading is one checked assignment.
Formats:
  "albert_tf"  albert_config.json + a TF2 object checkpoint (what our trainer writes)
  "tf1"        albert_config.json + a name-based checkpoint with the original names
               (the released `model.ckpt-best`; also TF-Hub v1 modules, `module/` prefix)
  "hf"         config.json + model.safetensors (or pytorch_model.bin), transformers' names
"""

import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.files import atomic_write_text
from albert_tf.formats import hf, keras_hub
from albert_tf.formats.resolve import (SourceError, checkpoint_at, checkpoint_choice,
                                       is_saved_model, local_path)
from albert_tf.tokenization import FullTokenizer, vocabulary_file

FORMATS = ("albert_tf", "tf1", "hf", "keras_hub")
MODEL_KEY = "model"  # our object checkpoints hold the weights under this child
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# Training state in TF1 checkpoints that a model never loads.
_TF1_IGNORED = re.compile(r"(^global_step$|/(adam|lamb)_[mv]$|/Adam(_1)?$|^beta[12]_power$)")


def read_checkpoint(path):
    """(arrays {TF1 name: np.ndarray}, config path or None, format) for any supported path or
    model name."""
    return read_local_checkpoint(local_path(path))


def read_local_checkpoint(path):
    """read_checkpoint for a local path (a name already resolved)."""
    fmt, location, config = checkpoint_at(path)
    logging.info("Reading the %s checkpoint %s%s", fmt, location, checkpoint_choice(path))
    if fmt == "hf":
        arrays = hf.hf_to_tf1(hf.read_hf_state(location),
                              next(iter(hf.architectures(os.path.dirname(location))), None))
    elif fmt == "keras_hub":
        arrays = keras_hub.read_preset(location)
    else:
        reader = tf.train.load_checkpoint(location)
        arrays = {}
        if any(k.startswith(HUB_RUN_KEY) for k in reader.get_variable_to_shape_map()):
            raise SourceError(
                f"{location} is a run fine-tuned from a TF-Hub module (--albert_hub_module_"
                f"handle): its encoder is the module's own variables, which no checkpoint format "
                f"names; export it with the run's script (--output_dir=RUN --export_dir=DIR, a "
                f"SavedModel that predict --model=DIR reads), or fine-tune from the module's "
                f"checkpoint as --init_checkpoint for a run that converts")
        for key in reader.get_variable_to_shape_map():
            name = _tf1_name(key) if fmt == "tf1" else _object_key_to_name(key)
            if name is not None:
                arrays[name] = reader.get_tensor(key)
    if not arrays:
        export = os.path.dirname(os.path.dirname(location))
        hint = (f": {export} is a TF2 SavedModel (a TF-Hub text encoder); fine-tune it with "
                f"--albert_hub_module_handle, or run it with predict --model"
                if is_saved_model(export) else "")
        raise ValueError(f"no ALBERT weights in the checkpoint {location}{hint}")
    return arrays, config, fmt


# A checkpoint key of a run whose encoder is a formats.hub.HubEncoder ("hub/<index>/<name>").
HUB_RUN_KEY = f"{MODEL_KEY}/hub.S"


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


# ---- assigning to a model ----------------------------------------------------------------------

def _group0_name(name):
    """The group-0 / first-sublayer counterpart used by the original `init_from_group0` warm start."""
    name = re.sub(r"/group_\d+/", "/group_0/", name)
    return re.sub(r"/(ffn|attention)_\d+/", r"/\1_1/", name)


def assign_weights(model, arrays, source="checkpoint", init_from_group0=False,
                   allow_missing=(), allow_reshaped=()):
    """Checks every tensor against the model, then assigns them all; never a partial load.

    allow_missing: name prefixes that may be absent; allow_reshaped: name prefixes that may
    have another shape (a task head for another number of labels: MNLI's before RTE). Both
    are left at their initial values, logged.
    """
    expected = model.tf1_weights()
    values, missing, bad_shapes, reshaped = {}, [], [], {}
    for name, variable in expected.items():
        value = arrays.get(name)
        if value is None and init_from_group0:
            value = arrays.get(_group0_name(name))
        if value is None:
            if not name.startswith(tuple(allow_missing)):
                missing.append(name)
            continue
        if tuple(value.shape) != tuple(variable.shape):
            shapes = f"{name}: checkpoint {tuple(value.shape)} vs model {tuple(variable.shape)}"
            if name.startswith(tuple(allow_reshaped)):
                reshaped[name] = shapes
                continue
            bad_shapes.append(shapes)
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
    if reshaped:
        logging.warning("%s: its head has another shape, so this model's keeps its initial "
                        "values: %s", source, "; ".join(reshaped.values()))
    skipped = [n for n in expected if n not in values and n not in reshaped]
    if skipped:
        logging.warning("%s: %d tensors not in the checkpoint keep their initial values: %s",
                        source, len(skipped), ", ".join(skipped))
    for name, value in values.items():
        variable = expected[name]
        variable.assign(value.astype(variable.dtype, copy=False))
    return sorted(values)


# ---- writing -----------------------------------------------------------------------------------

def model_arrays(model):
    return {name: np.asarray(variable.numpy()) for name, variable in model.tf1_weights().items()}


def named_weights_checkpoint(model):
    """A trackable holding the model's variables under their TF1 names (our checkpoint layout)."""
    variables = {name: getattr(v, "value", v) for name, v in model.tf1_weights().items()}
    return tf.train.Checkpoint(**variables)


def write_checkpoint_index(directory, prefixes):
    """The `checkpoint` index file listing `prefixes` (oldest first), the last as the latest."""
    names = [os.path.basename(p) for p in prefixes]
    atomic_write_text(os.path.join(directory, "checkpoint"),
                      f'model_checkpoint_path: "{names[-1]}"\n' + "".join(
                          f'all_model_checkpoint_paths: "{n}"\n' for n in names))


def publish_checkpoint(tmp_prefix, final_prefix):
    """Renames a checkpoint written under `tmp_prefix` to `final_prefix`. A reader trusts a
    prefix by its .index: the old index goes before any data file is replaced, the new one
    comes last, so a kill in between never leaves an index over other data."""
    if tf.io.gfile.exists(final_prefix + ".index"):
        tf.io.gfile.remove(final_prefix + ".index")
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
    publish_checkpoint(tmp, prefix)


def save_pretrained(model, directory, format="albert_tf", spm_model_file=None, vocab_file=None,
                    do_lower_case=True, global_step=0):
    """Writes the model's weights and config to `directory` in one of FORMATS, with the
    vocabulary (SentencePiece model or WordPiece vocab file) when one is given: copied beside
    the checkpoint, or for "hf" as the tokenizer files transformers' AutoTokenizer reads.
    `global_step`: the "tf1" checkpoint's (the step an Estimator resuming it starts from)."""
    if format not in FORMATS:
        raise ValueError(f"unknown checkpoint format {format!r}; use one of {FORMATS}")
    vocabulary = vocabulary_file(spm_model_file, vocab_file)
    if format in ("hf", "keras_hub"):
        model.config.check_google_layout("a Hugging Face ALBERT" if format == "hf" else
                                         "a KerasHub preset")
    tf.io.gfile.makedirs(directory)
    if format == "hf":
        hf.write_hf_checkpoint(model_arrays(model), model.config, directory)
    elif format == "keras_hub":  # its own config.json and tokenizer asset
        return keras_hub.write_preset(model_arrays(model), model.config, directory, vocabulary)
    elif format == "tf1":
        write_tf1_checkpoint(model_arrays(model), os.path.join(directory, "model.ckpt-best"),
                             global_step)
        write_checkpoint_index(directory, ["model.ckpt-best"])
    else:
        prefix = os.path.join(directory, "model.ckpt")
        tmp = tf.train.Checkpoint(**{MODEL_KEY: named_weights_checkpoint(model)}).write(
            f"{prefix}.tmp-{os.getpid()}")
        publish_checkpoint(tmp, prefix)
        write_checkpoint_index(directory, ["model.ckpt"])
    if format != "hf":
        model.config.to_json_file(os.path.join(directory, "albert_config.json"))
    if vocabulary and format == "hf":
        hf.write_hf_tokenizer(FullTokenizer(vocab_file=vocabulary, do_lower_case=do_lower_case),
                              directory, model.config.max_position_embeddings)
    elif vocabulary:
        tf.io.gfile.copy(vocabulary, os.path.join(directory, os.path.basename(vocabulary)),
                         overwrite=True)
    return directory


def missing_allowed(fmt, allow_missing):
    """KerasHub presets have no SOP head, and transformers saves AlbertForMaskedLM,
    ...ForTokenClassification and ...ForQuestionAnswering without the pooler (and SOP head): a
    model loaded from one keeps its initial values there (assign_weights names them in a
    warning), as transformers' own models built from such a checkpoint do."""
    extra = {"keras_hub": ("cls/seq_relationship/",),
             "hf": ("cls/seq_relationship/", "bert/pooler/")}.get(fmt, ())
    return tuple(allow_missing) + extra


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
                       init_from_group0=init_from_group0,
                       allow_missing=missing_allowed(fmt, allow_missing))
        return model

    def load_checkpoint(self, path, init_from_group0=False, allow_missing=(),
                        allow_reshaped=()):
        """Loads weights from any supported checkpoint into this (already built) model."""
        arrays, _, fmt = read_checkpoint(path)
        return assign_weights(self, arrays, source=f"{fmt} checkpoint {path}",
                              init_from_group0=init_from_group0,
                              allow_missing=missing_allowed(fmt, allow_missing),
                              allow_reshaped=allow_reshaped)

    def save_pretrained(self, directory, format="albert_tf", spm_model_file=None,
                        vocab_file=None, do_lower_case=True, global_step=0):
        """Writes `directory` in format "albert_tf" (ours), "tf1" (original), "hf" or
        "keras_hub", with the vocabulary when one is given."""
        return save_pretrained(self, directory, format=format, spm_model_file=spm_model_file,
                               vocab_file=vocab_file, do_lower_case=do_lower_case,
                               global_step=global_step)
