"""The one tokenizer loader: the vocabulary (SentencePiece model or WordPiece vocab) and the
lower-casing that go with a model."""

import fnmatch
import json
import os

import tensorflow as tf
from absl import logging

from albert_tf.files import atomic_write_bytes, write_json
from albert_tf.formats import keras_hub
from albert_tf.formats.names import local_model_path
from albert_tf.formats.resolve import SourceError, is_saved_model, vocabularies_beside
from albert_tf.formats.sources import ModelSource
from albert_tf.tokenization import SENTENCEPIECE
from albert_tf.tokenization.loader import (HF_FAST_TOKENIZER, HF_FAST_TOKENIZER_IS, REQUIRED,
                                        open_vocabulary, tokenizer_from_flags)


def _saved_model_settings(path):
    """(vocabulary assets, {do_lower_case, vocab_size} found among the variables)."""
    models = vocabularies_beside(os.path.join(path, "assets"))
    values = {}
    try:
        reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
        for key in reader.get_variable_to_shape_map():
            name = key.split("/")[0]
            if name in ("do_lower_case", "vocab_size"):
                values[name] = reader.get_tensor(key).item()
    except (tf.errors.NotFoundError, ValueError):
        pass
    return models, values


def _hf_do_lower_case(directory):
    path = os.path.join(directory, "tokenizer_config.json")
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f).get("do_lower_case")
    except (OSError, ValueError):
        return None
    return None if value is None else bool(value)


def _carried(model):
    """(where: a SavedModel path or a checkpoint directory, vocabularies found there,
    do_lower_case or None, vocab size or None) for a model path or ModelSource: a SavedModel's
    assets and variables, or the vocabulary beside a checkpoint and a Hugging Face
    tokenizer_config.json."""
    if isinstance(model, ModelSource):
        path = model.directory if model.kind in ("checkpoint", "tflite_ids") else model.path
    else:
        path = local_model_path(model)
        path = path if tf.io.gfile.isdir(path) else os.path.dirname(path) or "."
    if is_saved_model(path):
        models, values = _saved_model_settings(path)
        lower = values.get("do_lower_case")
        return path, models, None if lower is None else bool(lower), values.get("vocab_size")
    if keras_hub.is_preset(path):  # KerasHub feeds text to SentencePiece as it is
        return path, vocabularies_beside(path), False, None
    return path, vocabularies_beside(path), _hf_do_lower_case(path), None


def _carried_model(path, models):
    if is_saved_model(path):
        if not models:
            raise SourceError(f"the export {path} has no vocabulary asset; pass "
                              f"--spm_model_file or --vocab_file")
        return models[0]
    if not models:
        fast = os.path.join(path, HF_FAST_TOKENIZER)
        raise SourceError(f"no vocabulary: pass --spm_model_file or --vocab_file (there is no "
                          f"*.model or vocab*.txt beside the checkpoint in {path}" + (
                              f"; its {fast} is {HF_FAST_TOKENIZER_IS}"
                              if tf.io.gfile.exists(fast) else "") + ")")
    if len(models) > 1:
        raise SourceError(f"several vocabularies beside the checkpoint "
                          f"({', '.join(map(os.path.basename, models))}); pass --spm_model_file "
                          f"or --vocab_file")
    return models[0]


def load_tokenizer(spm_model_file=None, do_lower_case=None, model=None, vocab_size=None,
                   vocab_file=None):
    """FullTokenizer from --spm_model_file or --vocab_file, else from what `model` carries (a
    SavedModel's or TF-Hub module's asset, or the one vocabulary beside a checkpoint).

    do_lower_case None: the export's setting, else the Hugging Face tokenizer_config.json's,
    else True (the original default). vocab_size: the model's; a vocabulary with more
    entries is refused, one with fewer is a warning.
    """
    carried_lower, models = None, []
    if model is not None:
        path, models, carried_lower, carried_vocab = _carried(model)
        vocab_size = carried_vocab or vocab_size
        if None not in (do_lower_case, carried_lower) and bool(do_lower_case) != carried_lower:
            logging.warning("--do_lower_case=%s, but the model in %s reads text with "
                            "do_lower_case=%s: its vocabulary meets text cased otherwise than "
                            "in its training (drop the flag to take the model's)",
                            bool(do_lower_case), path, carried_lower)
    do_lower_case = do_lower_case if do_lower_case is not None else carried_lower
    do_lower_case = True if do_lower_case is None else bool(do_lower_case)
    try:
        tokenizer = tokenizer_from_flags(spm_model_file, vocab_file, do_lower_case,
                                         required=model is None)
        named = tokenizer is not None
        if tokenizer is None:
            tokenizer = open_vocabulary(_carried_model(path, models), do_lower_case)
    except (FileNotFoundError, ValueError) as e:
        message = str(e)
        if message == REQUIRED:
            message += ", or a model that carries its vocabulary"
        raise SourceError(message) from None
    where = tokenizer.asset_file
    fast = os.path.join(path, HF_FAST_TOKENIZER) if model is not None and not models else None
    carried = models or ([fast] if fast and tf.io.gfile.exists(fast) else [])
    if named and carried:  # a flag's vocabulary against the model's own
        _check_carried(tokenizer, carried, spm_model_file, vocab_file)
    if vocab_size is not None and len(tokenizer) != vocab_size:
        message = (f"the vocabulary {where} has {len(tokenizer)} entries but the model's "
                   f"vocab_size is {vocab_size}: is it the model's vocabulary?")
        if len(tokenizer) > vocab_size:
            raise SourceError(message)
        logging.warning(message)
    logging.info("Tokenizer %s (%s, do_lower_case=%s)", where, tokenizer.kind, do_lower_case)
    if not do_lower_case and tokenizer.uncased:
        logging.warning("do_lower_case=False, but the vocabulary %s has no upper-case piece: "
                        "an uncased vocabulary, in which capital letters are unknown pieces "
                        "(give --do_lower_case)", where)
    return tokenizer



def _check_carried(tokenizer, carried, spm_model_file, vocab_file):
    """A vocabulary named by a flag must be the one the model carries (beside its checkpoint,
    among its export's assets), byte for byte or piece for piece: another one's ids index the
    model's embeddings as if they were its own, and nothing else would say so."""
    given = _read_bytes(tokenizer.asset_file)
    if given in {_read_bytes(path) for path in carried}:
        return
    pieces = tokenizer.convert_ids_to_tokens(range(len(tokenizer)))
    carried = {path: _pieces(path, tokenizer.do_lower_case) for path in carried}
    carried = {path: theirs for path, theirs in carried.items() if theirs}
    for theirs in carried.values():
        if theirs == pieces:
            return
    if not carried:
        return
    first = next((i for i, (a, b) in enumerate(zip(pieces, theirs)) if a != b),
                 min(len(pieces), len(theirs)))
    flag = "spm_model_file" if spm_model_file else "vocab_file"
    difference = (f"id {first} is {pieces[first]!r} in --{flag}'s, {theirs[first]!r} in the "
                  f"model's" if first < min(len(pieces), len(theirs)) else
                  f"{len(pieces)} entries in --{flag}'s, {len(theirs)} in the model's")
    raise SourceError(
        f"--{flag}={spm_model_file or vocab_file} is not the vocabulary the model was trained "
        f"with ({', '.join(carried)}; {difference}): leave out --{flag} to use the model's")


def _pieces(path, do_lower_case):
    """The pieces, in id order, of a vocabulary file or of a Hugging Face tokenizer.json (its
    Unigram or WordPiece model's vocabulary; empty where it has none)."""
    if os.path.basename(path) != HF_FAST_TOKENIZER:
        other = open_vocabulary(path, do_lower_case)
        return other.convert_ids_to_tokens(range(len(other)))
    vocab = json.loads(_read_bytes(path)).get("model", {}).get("vocab", [])
    if isinstance(vocab, dict):  # WordPiece: {piece: id}
        return sorted(vocab, key=vocab.get)
    return [entry[0] for entry in vocab]  # Unigram: [[piece, score], ...]


def _read_bytes(path):
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def check_run_vocabulary(directory, tokenizer):
    """A run directory carries one vocabulary, the one its checkpoints are trained with: one
    that already holds another is refused before anything is written there."""
    source = tokenizer.asset_file if tokenizer is not None else None
    if not source or not tf.io.gfile.isdir(directory):
        return
    beside = vocabularies_beside(directory)
    if beside and _read_bytes(source) not in {_read_bytes(path) for path in beside}:
        raise ValueError(
            f"--output_dir={directory} holds another vocabulary "
            f"({', '.join(os.path.basename(path) for path in beside)}) than this run's "
            f"{source}, and predict, export_hub and convert_checkpoint would read the run's "
            f"checkpoints with it: give --output_dir a new directory, or move that file out")


def keep_vocabulary(directory, tokenizer):
    """Copies the tokenizer's vocabulary into a run directory (unless it is there already:
    check_run_vocabulary refuses another), with its lower-casing in a tokenizer_config.json,
    so that predict, export_hub and convert_checkpoint find it beside the run's checkpoints. A
    tokenizer_config.json found there is not replaced."""
    source = tokenizer.asset_file
    if not source:
        return
    if not vocabularies_beside(directory):
        name = os.path.basename(source)
        if tokenizer.kind == SENTENCEPIECE:
            name = name if name.endswith(".model") else "spiece.model"
        elif not fnmatch.fnmatch(name, "vocab*.txt"):
            name = "vocab.txt"
        atomic_write_bytes(os.path.join(directory, name), _read_bytes(source))
    config = os.path.join(directory, "tokenizer_config.json")
    if not tf.io.gfile.exists(config):
        write_json(config, {"do_lower_case": bool(tokenizer.do_lower_case)})
