"""The one tokenizer loader: the SentencePiece model and lower-casing that go with a model."""

import json
import os

import tensorflow as tf
from absl import logging

from albert_tf.formats import keras_hub
from albert_tf.formats.resolve import ModelSource, SourceError, is_saved_model, spm_models_beside


def _saved_model_settings(path):
    """(SentencePiece assets, {do_lower_case, vocab_size} found among the variables)."""
    models = sorted(tf.io.gfile.glob(os.path.join(path, "assets", "*.model")))
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
    """(where: a SavedModel path or a checkpoint directory, SentencePiece models found there,
    do_lower_case or None, vocab size or None) for a model path or ModelSource: a SavedModel's
    assets and variables, or the *.model beside a checkpoint and a Hugging Face
    tokenizer_config.json."""
    if isinstance(model, ModelSource):
        path = model.path if model.kind != "checkpoint" else model.directory
    else:
        path = os.fspath(model)
        path = path if tf.io.gfile.isdir(path) else os.path.dirname(path) or "."
    if is_saved_model(path):
        models, values = _saved_model_settings(path)
        lower = values.get("do_lower_case")
        return path, models, None if lower is None else bool(lower), values.get("vocab_size")
    if keras_hub.is_preset(path):  # KerasHub feeds text to SentencePiece as it is
        return path, spm_models_beside(path), False, None
    return path, spm_models_beside(path), _hf_do_lower_case(path), None


def _carried_model(path, models):
    if is_saved_model(path):
        if not models:
            raise SourceError(f"the export {path} has no SentencePiece asset; pass "
                              f"--spm_model_file")
        return models[0]
    if not models:
        raise SourceError(f"no SentencePiece model: pass --spm_model_file (there is no *.model "
                          f"beside the checkpoint in {path})")
    if len(models) > 1:
        raise SourceError(f"several SentencePiece models beside the checkpoint "
                          f"({', '.join(map(os.path.basename, models))}); pass --spm_model_file")
    return models[0]


def load_tokenizer(spm_model_file=None, do_lower_case=None, model=None, vocab_size=None):
    """FullTokenizer from --spm_model_file, else from what `model` carries (a SavedModel's or
    TF-Hub module's asset, or the one *.model beside a checkpoint).

    do_lower_case None: the export's setting, else the Hugging Face tokenizer_config.json's,
    else True (the original default). vocab_size: the model's; a SentencePiece model with more
    pieces is refused, one with fewer is a warning.
    """
    from albert_tf.tokenization import FullTokenizer

    carried_lower = None
    if model is not None:
        path, models, carried_lower, carried_vocab = _carried(model)
        vocab_size = carried_vocab or vocab_size
    if spm_model_file and spm_model_file != "from_tf_hub":
        if not tf.io.gfile.exists(spm_model_file):
            raise SourceError(f"--spm_model_file={spm_model_file} does not exist")
        where = spm_model_file
    elif model is not None:
        where = _carried_model(path, models)
    else:
        raise SourceError("--spm_model_file is required (or a model that carries its "
                          "SentencePiece model)")
    do_lower_case = do_lower_case if do_lower_case is not None else carried_lower
    do_lower_case = True if do_lower_case is None else bool(do_lower_case)
    try:
        tokenizer = FullTokenizer(where, do_lower_case)
        tokenizer.special_ids()
    except (FileNotFoundError, ValueError) as e:
        raise SourceError(str(e)) from e
    if vocab_size is not None and len(tokenizer) != vocab_size:
        message = (f"the SentencePiece model {where} has {len(tokenizer)} pieces but the model's "
                   f"vocab_size is {vocab_size}: is it the model's vocabulary?")
        if len(tokenizer) > vocab_size:
            raise SourceError(message)
        logging.warning(message)
    logging.info("Tokenizer %s (do_lower_case=%s)", where, do_lower_case)
    return tokenizer
