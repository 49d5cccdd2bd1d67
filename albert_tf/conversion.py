"""Conversions between checkpoint formats through a model built from the config, every tensor
checked on the way: `convert` (convert_checkpoint) and `write_slim_tf1` (export_checkpoints).
Here, not in formats/, because it builds the models that import formats."""

import dataclasses
import os

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.data.conll import read_labels, write_labels
from albert_tf.data.labeled_text import LabelSet, saved_labels
from albert_tf.formats import hf
from albert_tf.formats.checkpoints import (assign_weights, missing_allowed, model_arrays,
                                           read_checkpoint, write_checkpoint_index,
                                           write_tf1_checkpoint)
from albert_tf.formats.resolve import SourceError, resolve_checkpoint
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.modeling.squad import V1_HEAD, V2_HEAD, AlbertSquad
from albert_tf.modeling.task_model import UNUSED_POOLER
from albert_tf.modeling.token_classifier import HEAD_NAMES as TOKEN_HEAD
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.files import write_json
from albert_tf.outputs import (CONVERSION_MARKER, CONVERTED_ENTRIES, check_not_input,
                               check_output_dir, check_output_files)
from albert_tf.tokenization import vocabulary_file
from albert_tf.training.checkpoint_files import CHOICE_RUN_KINDS, foreign_model, recorded_kind


MODELS = ("auto", "pretrainer", "classifier", "multiple_choice", "squad", "token_classifier",
          "encoder")
# What transformers names each fine-tuned model that has one (config.json's architectures).
HF_ARCHITECTURES = {"multiple_choice": "AlbertForMultipleChoice",
                    "squad": "AlbertForQuestionAnswering",
                    "token_classifier": hf.TOKEN_CLASSIFICATION}


def model_kind(arrays, label_set=None, choices=False):
    """What a checkpoint's `arrays` ({TF1 name: array}) hold, by their heads: "pretrainer" (MLM
    or SOP), "squad" (v1.1's or v2.0's), "token_classifier", "multiple_choice" (`output_weights`
    that score answer `choices`: a RACE or C3 run's, transformers' AlbertForMultipleChoice),
    "classifier" (any other `output_weights`), else "encoder"."""
    def holds(prefixes):
        return any(n.startswith(prefixes) for n in arrays)
    if holds(("cls/predictions/", "cls/seq_relationship/")):
        return "pretrainer"
    if holds(V1_HEAD + V2_HEAD):
        return "squad"
    if holds(TOKEN_HEAD):
        return "token_classifier"
    if "output_weights" in arrays:
        return "multiple_choice" if choices and not label_set else "classifier"
    return "encoder"


@dataclasses.dataclass
class Checked:
    """A checkpoint read into a model: `net` holds its weights; `kind` is one of MODELS;
    `label_set`, a classifier's labels (a fine-tuned run's labels.json, else numbered); `tags`,
    a token classifier's (its run's labels.txt), or None."""
    net: object
    input_format: str
    kind: str
    label_set: object = None
    tags: tuple = None


def load_checked(input_path, config=None, model="auto", init_from_group0=False):
    """A `Checked`: reads `input_path`, builds the model `model` names (one of MODELS; "auto":
    model_kind's, its head carried), checks every tensor against it."""
    arrays, config_path, in_fmt = read_checkpoint(input_path)
    directory = os.path.dirname(config_path) if config_path else None
    label_set = saved_labels(directory) if directory else None
    config = config or config_path
    if config is None:
        raise ValueError(f"no config beside {input_path}; pass --albert_config_file")
    if not isinstance(config, AlbertConfig):
        config = AlbertConfig.from_json_file(config)
    if model == "auto":
        choices = directory and (recorded_kind(directory) in CHOICE_RUN_KINDS or
                                 HF_ARCHITECTURES["multiple_choice"] in hf.architectures(directory))
        model = model_kind(arrays, label_set, choices)
        logging.info("%s holds %s", input_path, _KIND_NAMES[model])
    own = foreign_model(directory) if model != "encoder" else None
    if own:
        raise ValueError(f"{input_path} is a checkpoint of {own} (run.json), a model of your "
                         f"own, which would be converted as albert_tf's {model}: "
                         f"--model=encoder converts the encoder alone")
    head = _HEADS.get(model)
    if head and not any(n.startswith(head) for n in arrays):
        raise ValueError(f"{input_path} has no {model} head ({', '.join(head)})")
    if model == "classifier":
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
    elif model == "squad":
        net = AlbertSquad(config, version_2=any(n.startswith(V2_HEAD) for n in arrays))
    elif model == "token_classifier":
        net = AlbertTokenClassifier(
            config, int(arrays["token_classifier/output_weights"].shape[0]))
    elif model == "multiple_choice":
        net = AlbertMultipleChoice(config)
    else:
        net = (AlbertPretrainer if model == "pretrainer" else AlbertEncoder)(config)
    assign_weights(net, arrays, source=f"{in_fmt} checkpoint {input_path}",
                   init_from_group0=init_from_group0, allow_missing=missing_allowed(
                       in_fmt, UNUSED_POOLER if model in ("squad", "token_classifier") else ()))
    tags = (read_labels(directory) or hf.hf_tags(directory)
            if directory and model == "token_classifier" else None)
    return Checked(net, in_fmt, model, label_set if model == "classifier" else None,
                   tuple(tags) if tags else None)


_HEADS = {"classifier": ("output_weights",), "multiple_choice": ("output_weights",),
          "squad": V1_HEAD + V2_HEAD, "token_classifier": TOKEN_HEAD}
_KIND_NAMES = {"pretrainer": "a pretrainer (MLM and SOP heads)", "classifier": "a classifier",
               "multiple_choice": "a multiple-choice model (RACE)",
               "squad": "a SQuAD model", "token_classifier": "a token classifier (NER)",
               "encoder": "an encoder (no head)"}


def _check_format_holds(checked, fmt):
    """A fine-tuned head that `fmt` has no model for is refused, not dropped."""
    kind = checked.kind
    if fmt == "hf" and kind == "squad" and checked.net.version_2:
        raise ValueError("--format=hf: transformers has no ALBERT model for SQuAD 2.0's head "
                         "(start_logits, end_logits, answer_class: the original's); convert to "
                         "tf1 or albert_tf, or --model=encoder for the encoder alone (a run "
                         "with run_squad --v2_head=span converts to AlbertForQuestionAnswering)")
    if fmt == "keras_hub" and kind not in ("pretrainer", "classifier", "encoder"):
        raise ValueError(f"--format=keras_hub: KerasHub has no ALBERT model for "
                         f"{_KIND_NAMES[kind]}; convert to tf1, hf or albert_tf, or "
                         f"--model=encoder for the encoder alone")


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
    `output_dir` must be new, empty, or (with `overwrite`) an earlier conversion's output (its
    conversion.json says so), whose files are removed first; it is never an input's directory,
    a run directory or a model directory another tool wrote.
    """
    check_output_dir(output_dir, "output_dir", what="a converted checkpoint",
                     patterns=CONVERTED_ENTRIES, overwrite=overwrite, marker=CONVERSION_MARKER,
                     inputs={"input": input_path, "albert_config_file": config,
                             "spm_model_file": spm_model_file, "vocab_file": vocab_file})
    vocabulary, do_lower_case = carried_vocabulary(input_path, spm_model_file, vocab_file,
                                                   do_lower_case)
    checked = load_checked(input_path, config, model, init_from_group0)
    _check_format_holds(checked, fmt)
    net = checked.net
    _remove_earlier_conversion(output_dir)
    net.save_pretrained(output_dir, format=fmt, vocab_file=vocabulary,
                        do_lower_case=do_lower_case, global_step=checkpoint_step(input_path))
    if checked.label_set and fmt == "hf":
        hf.write_hf_labels(output_dir, checked.label_set)
    elif checked.label_set:
        checked.label_set.save(output_dir)
    elif fmt == "hf" and checked.kind == "token_classifier" and checked.tags:
        hf.write_hf_tags(output_dir, checked.tags)
    elif fmt == "hf" and checked.kind in HF_ARCHITECTURES:
        hf.write_hf_architecture(output_dir, HF_ARCHITECTURES[checked.kind])
    if fmt == "hf" and checked.kind in ("squad", "token_classifier"):
        hf.drop_pooler(output_dir)
    if checked.tags:
        write_labels(output_dir, checked.tags)
    write_json(os.path.join(output_dir, CONVERSION_MARKER),
               {"input": os.fspath(input_path), "format": fmt, "model": checked.kind})
    logging.info("Wrote %s (%s, %d tensors) from %s checkpoint %s", output_dir, fmt,
                 len(net.tf1_weights()), checked.input_format, input_path)
    return net


def _remove_earlier_conversion(output_dir):
    """An earlier conversion's files (check_output_dir: only such a directory gets here), so
    that none of another format's stays beside the new one (a KerasHub tokenizer.json, which
    transformers would read before spiece.model)."""
    if not tf.io.gfile.isdir(output_dir):
        return
    for name in tf.io.gfile.listdir(output_dir):
        path = os.path.join(output_dir, name.rstrip("/"))
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        else:
            tf.io.gfile.remove(path)


def checkpoint_step(input_path):
    """The training step a checkpoint was saved at (TF1's global_step, our optimizer's
    iterations), 0 where it keeps none (Hugging Face, KerasHub, a bare export)."""
    fmt, location, _ = resolve_checkpoint(input_path)
    if fmt in ("hf", "keras_hub"):
        return 0
    reader = tf.train.load_checkpoint(location)
    names = reader.get_variable_to_shape_map()
    steps = ("global_step", "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE",
             "optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE")
    key = next((k for k in steps if k in names), None)
    return int(reader.get_tensor(key)) if key else 0


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
    net = load_checked(input_path, config).net
    step = checkpoint_step(input_path)
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
