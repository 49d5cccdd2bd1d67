"""Conversions between checkpoint formats through a model built from the config, every tensor
checked on the way: `convert` (convert_checkpoint) and `write_slim_tf1` (export_checkpoints).
Here, not in formats/, because it builds the models that import formats."""

import dataclasses
import os

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.data.labeled_text import LabelSet, saved_labels
from albert_tf.formats import hf
from albert_tf.formats.checkpoints import (assign_weights, missing_allowed, model_arrays,
                                           read_checkpoint, write_checkpoint_index,
                                           write_tf1_checkpoint)
from albert_tf.formats.resolve import SourceError, resolve_checkpoint
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.outputs import (CONVERTED_ENTRIES, check_not_input, check_output_dir,
                               check_output_files)
from albert_tf.tokenization import vocabulary_file


def load_checked(input_path, config=None, model="auto", init_from_group0=False):
    """(model with the checkpoint's weights, input format): reads `input_path`, builds the
    pretrainer (when it has MLM/SOP heads, or model="pretrainer"), the classifier (a
    fine-tuned run's, named by the labels.json beside it, or model="classifier"; its
    `label_set` attribute holds those labels) or the encoder, checks every tensor against
    it."""
    arrays, config_path, in_fmt = read_checkpoint(input_path)
    label_set = saved_labels(os.path.dirname(config_path)) if config_path else None
    config = config or config_path
    if config is None:
        raise ValueError(f"no config beside {input_path}; pass --albert_config_file")
    if not isinstance(config, AlbertConfig):
        config = AlbertConfig.from_json_file(config)
    if model == "auto":
        model = ("pretrainer" if any(n.startswith("cls/") for n in arrays) else
                 "classifier" if label_set and "output_weights" in arrays else "encoder")
    if model == "classifier":
        if "output_weights" not in arrays:
            raise ValueError(f"{input_path} has no classifier head (output_weights)")
        num_labels = int(arrays["output_weights"].shape[0])
        label_set = label_set or LabelSet("regression" if num_labels == 1 else "single_label",
                                          tuple(str(i) for i in range(num_labels))
                                          if num_labels > 1 else ())
        net = AlbertClassifier(config, num_labels, regression=label_set.is_regression,
                               multi_label=label_set.is_multi_label)
        if label_set.target:  # the standardized head in the scores' units: any reader's
            mean, std = label_set.target
            arrays = dict(arrays, output_weights=arrays["output_weights"] * std,
                          output_bias=arrays["output_bias"] * std + mean)
            label_set = dataclasses.replace(label_set, target=None)
        net.label_set = label_set
    else:
        net = (AlbertPretrainer if model == "pretrainer" else AlbertEncoder)(config)
    assign_weights(net, arrays, source=f"{in_fmt} checkpoint {input_path}",
                   init_from_group0=init_from_group0, allow_missing=missing_allowed(in_fmt, ()))
    return net, in_fmt


def carried_vocabulary(input_path, spm_model_file=None, vocab_file=None, do_lower_case=None):
    """(vocabulary file or None, do_lower_case) for a conversion: the flags' (checked before
    any work), else the one the input carries, as every tool finds it (beside a checkpoint, a
    Hugging Face directory's, a KerasHub preset's asset); none is a warning that says so."""
    named = vocabulary_file(spm_model_file, vocab_file)
    try:
        tokenizer = load_tokenizer(spm_model_file, do_lower_case, vocab_file=vocab_file,
                                   model=None if named else input_path)
    except SourceError as e:
        if named:
            raise
        logging.warning("No vocabulary for the conversion (%s): the output carries no tokenizer, "
                        "so tools that load one from it will ask for --spm_model_file or "
                        "--vocab_file (and transformers' AutoTokenizer will not find one)", e)
        return None, True if do_lower_case is None else do_lower_case
    if not named:
        logging.info("The vocabulary of --input: %s", tokenizer.asset_file)
    return tokenizer.asset_file, tokenizer.do_lower_case


def convert(input_path, output_dir, fmt, config=None, model="auto", spm_model_file=None,
            init_from_group0=False, overwrite=False, vocab_file=None, do_lower_case=None):
    """Reads `input_path`, checks it against the config, writes `output_dir` in `fmt`.

    model: "pretrainer", "classifier", "encoder", or "auto" (the pretrainer when the input has
    MLM/SOP heads, the classifier when it is a fine-tuned classifier run with labels.json).
    A classifier's labels go with it (hf: id2label, label2id and problem_type in config.json).
    The vocabulary (see `carried_vocabulary`) is written in the output's format.
    `output_dir` must be new, empty, or (with `overwrite`) an earlier conversion's output; it
    is never an input's directory or a run directory.
    """
    check_output_dir(output_dir, "output_dir", what="a converted checkpoint",
                     patterns=CONVERTED_ENTRIES, overwrite=overwrite,
                     inputs={"input": input_path, "albert_config_file": config,
                             "spm_model_file": spm_model_file, "vocab_file": vocab_file})
    vocabulary, do_lower_case = carried_vocabulary(input_path, spm_model_file, vocab_file,
                                                   do_lower_case)
    net, in_fmt = load_checked(input_path, config, model, init_from_group0)
    net.save_pretrained(output_dir, format=fmt, vocab_file=vocabulary,
                        do_lower_case=do_lower_case)
    label_set = getattr(net, "label_set", None)
    if label_set and fmt == "hf":
        hf.write_hf_labels(output_dir, label_set)
    elif label_set:
        label_set.save(output_dir)
    logging.info("Wrote %s (%s, %d tensors) from %s checkpoint %s", output_dir, fmt,
                 len(net.tf1_weights()), in_fmt, input_path)
    return net


def _is_tf1_checkpoint(index_path):
    """Whether a .index is a name-based (TF1) checkpoint's, as write_slim_tf1 writes."""
    try:
        names = tf.train.load_checkpoint(index_path[:-len(".index")]).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError):
        return False
    return "_CHECKPOINTABLE_OBJECT_GRAPH" not in names


def write_slim_tf1(input_path, prefix, config=None, overwrite=False):
    """The original export_checkpoints.py: the model's weights (no optimizer slots) as a TF1
    checkpoint at `prefix`, with the input's global_step and a `checkpoint` file beside it
    unless the directory's own `checkpoint` lists other checkpoints (a run's: left as it is).
    An existing TF1 checkpoint at `prefix` is replaced only with `overwrite`."""
    prefix = os.fspath(prefix)
    inputs = {"checkpoint_name": input_path, "albert_config_file": config}
    check_not_input(prefix, "export_path", inputs)
    check_output_files([prefix + ".index"], "export_path", what="a TF1 checkpoint",
                       overwrite=overwrite, is_kind=_is_tf1_checkpoint, inputs=inputs)
    net, _ = load_checked(input_path, config)
    fmt, location, _ = resolve_checkpoint(input_path)
    step = 0
    if fmt != "hf":
        reader = tf.train.load_checkpoint(location)
        names = reader.get_variable_to_shape_map()
        steps = ("global_step", "optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE")
        key = next((k for k in steps if k in names), None)
        step = int(reader.get_tensor(key)) if key else 0
    directory = os.path.dirname(os.path.abspath(prefix))
    tf.io.gfile.makedirs(directory)
    write_tf1_checkpoint(model_arrays(net), prefix, step)
    state = tf.train.get_checkpoint_state(directory)
    if state is None or set(state.all_model_checkpoint_paths) <= {prefix, os.path.basename(prefix)}:
        write_checkpoint_index(directory, [prefix])
    else:
        logging.info("%s/checkpoint lists other checkpoints: left as it is", directory)
    logging.info("Wrote %s (%d tensors, global_step %d) from %s", prefix,
                 len(net.tf1_weights()), step, input_path)
    return net
