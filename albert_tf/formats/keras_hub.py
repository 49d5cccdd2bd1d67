"""KerasHub ALBERT presets (`AlbertBackbone`, `AlbertMaskedLM`): a preset directory ↔ the
original TF1 tensor names, through KerasHub's own classes (`pip install keras-hub`).

A preset holds `config.json` (the backbone), `model.weights.h5` (or sharded
`model.weights.json`), `assets/tokenizer/vocabulary.spm`, `metadata.json`, and for a masked-LM
task `task.json` / `task.weights.h5`. What KerasHub holds differently from ALBERT: no SOP head
(dropped when writing, absent when reading), one `dropout` for hidden and attention dropout,
the MLM head's LayerNorm epsilon 1e-5 (ALBERT: 1e-12), GELU always the tanh approximation.
"""

import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.config import KERAS_HUB_BACKBONE, KERAS_HUB_MLM_EPSILON
from albert_tf.dtype_policy import float32_policy
from albert_tf.tokenization import SENTENCEPIECE, vocabulary_kind

TOKENIZER_FILE = os.path.join("assets", "tokenizer", "vocabulary.spm")
MASKED_LM = "AlbertMaskedLM"
CLASSIFIER = "AlbertTextClassifier"
# Our (and the original's) classifier head is output_weights [labels, H]; KerasHub's Dense
# kernel is its transpose.
_TRANSPOSED = ("output_weights",)
_APPROXIMATE_GELU = ("gelu", "gelu_new", "gelu_pytorch_tanh")


def _keras_hub():
    try:
        import keras_hub
    except ImportError:
        raise ImportError("KerasHub presets need `pip install keras-hub`") from None
    return keras_hub


def _read_json(path):
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def is_preset(directory):
    """Whether `directory` is a KerasHub preset of an ALBERT backbone."""
    config = os.path.join(directory, "config.json")
    if not tf.io.gfile.exists(config):
        return False
    try:
        data = _read_json(config)
    except (ValueError, OSError):
        return False
    return isinstance(data, dict) and data.get("class_name") == KERAS_HUB_BACKBONE


def _backbone_kwargs(config):
    changes = []
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        changes.append(f"one dropout {config.hidden_dropout_prob} for hidden and attention "
                       f"(attention was {config.attention_probs_dropout_prob})")
    if config.hidden_act not in _APPROXIMATE_GELU:
        raise ValueError(f"KerasHub's AlbertBackbone has tanh-approximated GELU only; this "
                         f"model uses hidden_act={config.hidden_act!r}")
    return dict(vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
                num_heads=config.num_attention_heads, embedding_dim=config.embedding_size,
                hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
                num_groups=config.num_hidden_groups,
                num_inner_repetitions=config.inner_group_num,
                dropout=config.hidden_dropout_prob,
                max_sequence_length=config.max_position_embeddings,
                num_segments=config.type_vocab_size), changes


def _mapping(backbone, mlm_head=None, classifier_dense=None):
    """(TF1 name, KerasHub variable) for every weight."""
    rows = [("bert/embeddings/word_embeddings", backbone.token_embedding.embeddings),
            ("bert/embeddings/position_embeddings",
             backbone.position_embedding.position_embeddings),
            ("bert/embeddings/token_type_embeddings", backbone.segment_embedding.embeddings),
            ("bert/embeddings/LayerNorm/gamma", backbone.embeddings_layer_norm.gamma),
            ("bert/embeddings/LayerNorm/beta", backbone.embeddings_layer_norm.beta),
            ("bert/encoder/embedding_hidden_mapping_in/kernel",
             backbone.embeddings_projection.kernel),
            ("bert/encoder/embedding_hidden_mapping_in/bias", backbone.embeddings_projection.bias),
            ("bert/pooler/dense/kernel", backbone.pooled_dense.kernel),
            ("bert/pooler/dense/bias", backbone.pooled_dense.bias)]
    for g in range(backbone.num_groups):
        for i in range(backbone.num_inner_repetitions):
            layer = backbone.get_layer(f"group_{g}_inner_layer_{i}")
            attention = layer._self_attention_layer
            block = f"bert/encoder/transformer/group_{g}/inner_group_{i}/"
            for tf1, dense in (("attention_1/self/query", attention.query_dense),
                               ("attention_1/self/key", attention.key_dense),
                               ("attention_1/self/value", attention.value_dense),
                               ("attention_1/output/dense", attention.output_dense),
                               ("ffn_1/intermediate/dense",
                                layer._feedforward_intermediate_dense),
                               ("ffn_1/intermediate/output/dense",
                                layer._feedforward_output_dense)):
                rows += [(block + tf1 + "/kernel", dense.kernel),
                         (block + tf1 + "/bias", dense.bias)]
            for tf1, norm in (("LayerNorm", layer._self_attention_layer_norm),
                              ("LayerNorm_1", layer._feedforward_layer_norm)):
                rows += [(block + tf1 + "/gamma", norm.gamma), (block + tf1 + "/beta", norm.beta)]
    if mlm_head is not None:
        rows += [("cls/predictions/transform/dense/kernel", mlm_head._intermediate_dense.kernel),
                 ("cls/predictions/transform/dense/bias", mlm_head._intermediate_dense.bias),
                 ("cls/predictions/transform/LayerNorm/gamma",
                  mlm_head._intermediate_layer_norm.gamma),
                 ("cls/predictions/transform/LayerNorm/beta",
                  mlm_head._intermediate_layer_norm.beta),
                 ("cls/predictions/output_bias", mlm_head._bias)]
    if classifier_dense is not None:
        rows += [("output_weights", classifier_dense.kernel),
                 ("output_bias", classifier_dense.bias)]
    return rows


def _to_tf1(name, value, hidden):
    """A KerasHub variable's value in its TF1 layout: attention kernels carry the heads as axes
    in KerasHub ([H, heads, head_size], [heads, head_size, H]); the classifier is transposed."""
    value = np.asarray(value, np.float32)
    if "/attention_1/" in name:
        return value.reshape((hidden,) if name.endswith("/bias") else (hidden, hidden))
    return np.ascontiguousarray(value.T) if name in _TRANSPOSED else value


def read_preset(directory):
    """{TF1 name: array} of a KerasHub ALBERT preset (AlbertConfig reads its config.json): the
    backbone, plus the MLM head of an `AlbertMaskedLM` task or the `output_weights` /
    `output_bias` of an `AlbertTextClassifier`."""
    keras_hub = _keras_hub()
    directory = os.fspath(directory)
    task = os.path.join(directory, "task.json")
    task = _read_json(task).get("class_name") if tf.io.gfile.exists(task) else None
    head = dense = None
    # The stored weights as they are: a task built under a mixed policy compiles a loss-scale
    # optimizer that KerasHub then warns does not match the saved one.
    with float32_policy():
        if task == MASKED_LM:
            model = keras_hub.models.AlbertMaskedLM.from_preset(directory, preprocessor=None)
            backbone, head = model.backbone, model.masked_lm_head
        elif task == CLASSIFIER:
            model = keras_hub.models.AlbertTextClassifier.from_preset(directory,
                                                                      preprocessor=None)
            backbone, dense = model.backbone, model.output_dense
        else:
            backbone = keras_hub.models.AlbertBackbone.from_preset(directory)
    return {name: _to_tf1(name, variable.numpy(), backbone.hidden_dim)
            for name, variable in _mapping(backbone, head, dense)}


def write_preset(arrays, config, directory, vocabulary=None):
    """Writes a preset that `AlbertBackbone.from_preset` loads, and `AlbertMaskedLM.from_preset`
    (`AlbertTextClassifier.from_preset`) too when `arrays` hold the MLM head (a classifier
    head); logs what KerasHub cannot hold.

    vocabulary: a SentencePiece model becomes the preset's AlbertTokenizer. KerasHub's ALBERT
    reads SentencePiece only, and its WordPiece tokenizers case-fold with NFKC (full-width
    punctuation becomes ASCII), so their ids differ from the original's: a WordPiece vocabulary
    is copied into the preset directory as it is, with no KerasHub tokenizer."""
    config.check_google_layout("a KerasHub preset")
    keras_hub = _keras_hub()
    kwargs, changes = _backbone_kwargs(config)
    backbone = keras_hub.models.AlbertBackbone(**kwargs)
    has_mlm = "cls/predictions/output_bias" in arrays
    dropped = sorted(n for n in arrays if n.startswith("cls/seq_relationship/"))
    if dropped:
        changes.append("no SOP head: dropped " + ", ".join(dropped))
    epsilon = config.mlm_layer_norm_eps or config.layer_norm_eps
    if has_mlm and epsilon != KERAS_HUB_MLM_EPSILON:
        changes.append(f"the MLM head's LayerNorm epsilon becomes {KERAS_HUB_MLM_EPSILON:g} "
                       f"(this model's: {epsilon:g})")
    model = head = dense = tokenizer = None
    if vocabulary and vocabulary_kind(vocabulary) == SENTENCEPIECE:
        tokenizer = keras_hub.models.AlbertTokenizer(proto=vocabulary)
    elif vocabulary:
        changes.append(f"no KerasHub tokenizer for the WordPiece vocabulary "
                       f"{os.path.basename(vocabulary)} (copied beside the preset): KerasHub's "
                       f"WordPiece tokenizers give other ids; tokenize with albert_tf's "
                       f"FullTokenizer or its TF-Hub preprocessor export")
    if has_mlm:
        preprocessor = tokenizer and keras_hub.models.AlbertMaskedLMPreprocessor(
            tokenizer, sequence_length=config.max_position_embeddings)
        model = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=preprocessor)
        head = model.masked_lm_head
    elif "output_weights" in arrays:
        preprocessor = tokenizer and keras_hub.models.AlbertTextClassifierPreprocessor(
            tokenizer, sequence_length=config.max_position_embeddings)
        model = keras_hub.models.AlbertTextClassifier(
            backbone, num_classes=int(arrays["output_weights"].shape[0]),
            preprocessor=preprocessor)
        dense = model.output_dense
    for name, variable in _mapping(backbone, head, dense):
        value = np.asarray(arrays[name])
        value = value.T if name in _TRANSPOSED else value
        variable.assign(value.reshape(variable.shape))
    tf.io.gfile.makedirs(directory)
    (model or backbone).save_to_preset(directory)
    if tokenizer is not None and model is None:  # (a task saves it with its preprocessor)
        tokenizer.save_to_preset(directory)
    if vocabulary and tokenizer is None:
        tf.io.gfile.copy(vocabulary, os.path.join(directory, os.path.basename(vocabulary)),
                         overwrite=True)
    for change in changes:
        logging.warning("KerasHub preset %s: %s", directory, change)
    return directory
