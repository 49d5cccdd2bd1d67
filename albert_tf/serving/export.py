"""TF-Hub exports: the text encoder (optionally with the MLM/SOP heads as `.mlm`/`.sop`) and
the text preprocessor, in the layouts of the TF-Hub "Transformer encoders" API
(see docs/export.md)."""

import os
import tempfile

import tensorflow as tf
from absl import logging

from albert_tf.files import atomic_write_bytes
from albert_tf.modeling import kernels
from albert_tf.serving import lite
from albert_tf.serving.saved_model import (ENCODER_INPUTS, Trackable, attach_tokenizer_info,
                                           check_export_dir, encoder_input_specs, pack_inputs,
                                           save_atomically, stage_assets, tf_variables)
from albert_tf.tokenization import in_graph_tokenizer, vocabulary_file
from albert_tf.tracing import graph_function

EXPORT_TYPES = ("encoder", "pretrainer", "preprocessor")
__all__ = ["ENCODER_INPUTS", "export_encoder", "export_from_checkpoint", "export_preprocessor",
           "pack_inputs"]


class _Callable(Trackable):
    """A reusable-SavedModel object: `obj(inputs, training=bool)`, variables, no reg. losses."""

    def __init__(self, fn, input_names, variables, trainable_variables):
        super().__init__()
        self._fn = fn
        self.variables = tf_variables(variables)
        self.trainable_variables = tf_variables(trainable_variables)
        self.regularization_losses = []
        specs = encoder_input_specs(input_names)
        for training in (True, False):
            self.__call__.get_concrete_function(specs, training=training)

    @graph_function
    def __call__(self, inputs, training=False):
        return self._fn(inputs, training)


def _encoder_outputs(encoder, inputs, training):
    out = encoder({k: inputs[k] for k in ENCODER_INPUTS}, training=training)
    return {"pooled_output": out["pooled_output"], "sequence_output": out["sequence_output"],
            "encoder_outputs": list(out["encoder_outputs"]), "default": out["pooled_output"]}


def _flat(outputs):
    """Signature outputs: lists become `<name>_<i>` keys (SignatureDefs hold tensors only)."""
    flat = {}
    for key, value in outputs.items():
        if isinstance(value, (list, tuple)):
            flat.update({f"{key}_{i}": v for i, v in enumerate(value)})
        else:
            flat[key] = value
    return flat


def _split_model(model, with_pretrainer_heads):
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    if with_pretrainer_heads:
        if not isinstance(model, AlbertPretrainer):
            raise TypeError("with_pretrainer_heads=True needs an AlbertPretrainer, got "
                            f"{type(model).__name__}")
        return model.encoder, model
    if isinstance(model, AlbertEncoder):
        return model, None
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, AlbertEncoder):
        raise TypeError(f"cannot find an AlbertEncoder in {type(model).__name__}")
    return encoder, None


@kernels.unfused()  # the plain ops: a portable graph, no XLA functions inside
def export_encoder(model_or_encoder, export_dir, vocabulary, do_lower_case=True,
                   with_pretrainer_heads=False):
    """Writes a TF-Hub text-encoder SavedModel; with the pretrainer's heads it adds `.mlm`/`.sop`.

    `model_or_encoder`: an AlbertEncoder, or any model with one as `.encoder` (an
    AlbertPretrainer; required when `with_pretrainer_heads`). Returns `export_dir`.
    """
    encoder, pretrainer = _split_model(model_or_encoder, with_pretrainer_heads)
    config = encoder.config
    root = _Callable(lambda inputs, training: _encoder_outputs(encoder, inputs, training),
                     ENCODER_INPUTS, encoder.variables, encoder.trainable_variables)

    # One dict argument: the attributes take a dict (keras.layers.TFSMLayer calls `serve`, its
    # default endpoint, so), the SignatureDef takes the dict's keys as named inputs.
    @graph_function(input_signature=[encoder_input_specs()])
    def serving_default(inputs):
        return _flat(_encoder_outputs(encoder, inputs, False))
    root.serve = root.serving_default = serving_default
    signatures = {"serving_default": serving_default}

    if pretrainer is not None:
        def mlm_fn(inputs, training):
            out = _encoder_outputs(encoder, inputs, training)
            out["mlm_logits"] = pretrainer.masked_lm(out["sequence_output"],
                                                     inputs["masked_lm_positions"])
            out["sop_logits"] = pretrainer.sentence_order(out["pooled_output"])
            return out

        def sop_fn(inputs, training):
            out = _encoder_outputs(encoder, inputs, training)
            out["sop_logits"] = pretrainer.sentence_order(out["pooled_output"])
            return out

        mlm_vars = encoder.variables + pretrainer.masked_lm.variables
        sop_vars = encoder.variables + pretrainer.sentence_order.variables
        # Sub-objects hold their own lists: the root's variables stay the encoder's alone.
        root.mlm = _Callable(mlm_fn, ENCODER_INPUTS + ("masked_lm_positions",), mlm_vars,
                             [v for v in mlm_vars if v.trainable])
        root.sop = _Callable(sop_fn, ENCODER_INPUTS, sop_vars,
                             [v for v in sop_vars if v.trainable])

        @graph_function(input_signature=[encoder_input_specs(
            ENCODER_INPUTS + ("masked_lm_positions",))])
        def mlm(inputs):
            out = mlm_fn(inputs, False)
            out.pop("encoder_outputs")
            return out
        signatures["mlm"] = mlm

    with tempfile.TemporaryDirectory() as stage:
        vocab_copy, config_copy = stage_assets(stage, vocabulary, config)
        signatures["tokenization_info"] = attach_tokenizer_info(
            root, vocab_copy, do_lower_case, config.vocab_size, config_copy)
        return save_atomically(root, export_dir, signatures)


class _Tokenize(Trackable):
    """`.tokenize(sentences)` → int32 RaggedTensor [batch, (tokens)]; special ids on request."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @graph_function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, sentences):
        return self.tokenizer.tokenize(sentences)

    @graph_function(input_signature=[])
    def get_special_tokens_dict(self):
        t = self.tokenizer
        values = {"vocab_size": t.vocab_size, "padding_id": t.pad_id,
                  "start_of_sequence_id": t.cls_id, "end_of_segment_id": t.sep_id,
                  "mask_id": t.mask_id}
        return {k: tf.constant(v, tf.int32) for k, v in values.items()}


class _BertPackInputs(Trackable):
    """`.bert_pack_inputs([a] or [a, b], seq_length=default)` → the encoder's input dict."""

    def __init__(self, cls_id, sep_id, pad_id, default_seq_length):
        super().__init__()
        self._ids = (cls_id, sep_id, pad_id)
        self._default = int(default_seq_length)
        length = tf.TensorSpec([], tf.int32)
        for ragged_rank in (1, 2):
            spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank)
            for n in (1, 2):
                self.__call__.get_concrete_function([spec] * n)
                self.__call__.get_concrete_function([spec] * n, length)

    @graph_function
    def __call__(self, inputs, seq_length=None):
        cls_id, sep_id, pad_id = self._ids
        if seq_length is None:
            out = pack_inputs(list(inputs), self._default, cls_id, sep_id, pad_id)
            return {k: tf.ensure_shape(v, [None, self._default]) for k, v in out.items()}
        least = 2 * len(inputs) + 1  # [CLS], and a token and a [SEP] for each segment
        with tf.control_dependencies([tf.debugging.assert_greater_equal(
                tf.cast(seq_length, tf.int32), least,
                message=f"seq_length leaves no room for text: {len(inputs)} segment(s) need "
                        f"at least {least}")]):
            seq_length = tf.identity(seq_length)
        return pack_inputs(list(inputs), seq_length, cls_id, sep_id, pad_id)


class _Preprocessor(Trackable):
    """Root of the preprocessor: `obj(sentences[, seq_length])` packs one segment."""

    def __init__(self, tokenizer, default_seq_length):
        super().__init__()
        self.tokenize = _Tokenize(tokenizer)
        self.bert_pack_inputs = _BertPackInputs(tokenizer.cls_id, tokenizer.sep_id,
                                                tokenizer.pad_id, default_seq_length)
        self.variables, self.trainable_variables, self.regularization_losses = [], [], []
        strings = tf.TensorSpec([None], tf.string)
        self.__call__.get_concrete_function(strings)
        self.__call__.get_concrete_function(strings, tf.TensorSpec([], tf.int32))

    @graph_function
    def __call__(self, sentences, seq_length=None):
        return self.bert_pack_inputs([self.tokenize(sentences)], seq_length)


def export_preprocessor(export_dir, vocabulary, do_lower_case=True, default_seq_length=128):
    """Writes the preprocessor SavedModel (tensorflow-text ops; ids equal `FullTokenizer`'s)
    for a SentencePiece model or a WordPiece vocabulary file, and in it `preprocessor.tflite`
    (LiteRT: a string `sentences` [1] → the encoder inputs [1, default_seq_length])."""
    if default_seq_length < 3:
        raise ValueError(f"default_seq_length={default_seq_length} leaves no room for text")
    with tempfile.TemporaryDirectory() as stage:
        vocab_copy, _ = stage_assets(stage, vocabulary)
        tokenizer = in_graph_tokenizer(vocab_copy, do_lower_case=do_lower_case)
        root = _Preprocessor(tokenizer, default_seq_length)

        @graph_function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
        def serving_default(sentences):
            return root(sentences)
        signatures = {"serving_default": serving_default,
                      "tokenization_info": attach_tokenizer_info(
                          root, vocab_copy, do_lower_case, tokenizer.vocab_size)}
        save_atomically(root, export_dir, signatures)
    path = os.path.join(os.fspath(export_dir), "preprocessor.tflite")
    atomic_write_bytes(path, lite.text_model_to_tflite(None, vocabulary, do_lower_case,
                                                       default_seq_length, ("sentences",), None))
    logging.info("Wrote %s", path)
    return export_dir


def export_from_checkpoint(export_type, export_path, init_checkpoint=None,
                           albert_config_file=None, spm_model_file=None, do_lower_case=None,
                           default_seq_length=128, overwrite=False, inputs=None,
                           vocab_file=None):
    """export_type "encoder" or "pretrainer": the model from a checkpoint in any format, written
    as a TF-Hub SavedModel; "preprocessor": the text preprocessor. Returns `export_path`.

    An existing export at `export_path` is replaced only with `overwrite`; anything else there
    (an input, a run directory, a file) stops the export before it starts. `inputs`
    ({flag: path}) names the inputs in that message; by default the arguments'. do_lower_case
    None: the setting the checkpoint carries (a Hugging Face tokenizer_config.json), else true."""
    from albert_tf.formats.tokenizers import load_tokenizer

    if export_type not in EXPORT_TYPES:
        raise ValueError(f"--export_type={export_type!r}; use one of {', '.join(EXPORT_TYPES)}")
    if not export_path:
        raise ValueError("--export_path is required")
    check_export_dir(export_path, "export_path", overwrite, inputs or {
        "init_checkpoint": init_checkpoint, "spm_model_file": spm_model_file,
        "vocab_file": vocab_file,
        "albert_config_file": albert_config_file})
    if export_type != "preprocessor" and not init_checkpoint:
        raise ValueError(f"--export_type={export_type} needs --init_checkpoint (or "
                         f"--albert_directory)")
    vocabulary = vocabulary_file(spm_model_file, vocab_file)
    if init_checkpoint:  # the model's vocabulary, or a flag's checked against it
        tokenizer = load_tokenizer(spm_model_file, do_lower_case, model=init_checkpoint,
                                   vocab_file=vocab_file)
        vocabulary, do_lower_case = tokenizer.asset_file, tokenizer.do_lower_case
    elif vocabulary is None:
        raise ValueError("--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is "
                         "required")
    elif not os.path.exists(vocabulary) and "://" not in vocabulary:
        flag = "spm_model_file" if vocabulary == spm_model_file else "vocab_file"
        raise FileNotFoundError(f"--{flag}={vocabulary} does not exist")
    do_lower_case = True if do_lower_case is None else bool(do_lower_case)

    if export_type == "preprocessor":
        return export_preprocessor(export_path, vocabulary, do_lower_case, default_seq_length)
    if export_type == "pretrainer":
        from albert_tf.modeling.pretrainer import AlbertPretrainer as cls
    else:
        from albert_tf.modeling.encoder import AlbertEncoder as cls
    model = cls.from_pretrained(init_checkpoint, config=albert_config_file)
    logging.info("Loaded %s from %s", cls.__name__, init_checkpoint)
    return export_encoder(model, export_path, vocabulary, do_lower_case,
                          with_pretrainer_heads=export_type == "pretrainer")
