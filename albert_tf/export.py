"""SavedModel exports: the TF-Hub text encoder (optionally with pretraining heads), the
preprocessor, a raw-string serving wrapper for any Keras model, and TFLite conversion.

The layouts follow the TF-Hub "Transformer encoders" API (see docs/export.md).
"""

import os
import tempfile

import tensorflow as tf
from absl import logging

from albert_tf.modeling import kernels
from albert_tf.tokenization import InGraphTokenizer, load_sp_model

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
_Trackable = tf.__internal__.tracking.AutoTrackable  # tf.Module's `variables` is read-only


def encoder_input_specs(names=ENCODER_INPUTS, seq_length=None, batch_size=None):
    return {k: tf.TensorSpec([batch_size, seq_length], tf.int32, name=k) for k in names}


# ---- packing -------------------------------------------------------------------------------


def pack_inputs(segments, seq_length, cls_id, sep_id, pad_id=0, first_segment_length=None):
    """`[CLS] A [SEP] (B [SEP])` + zero padding from 1 or 2 ragged [batch, (tokens)] id tensors.

    Segments are trimmed round-robin to fit `seq_length` (one token at a time from each
    segment that still has tokens), which keeps the same tokens as the original
    `_truncate_seq_pair` (pop from the longer, ties from B) and plain cut for one segment.
    With `first_segment_length` (SQuAD's max_query_length), A is cut to that many tokens and
    B gets all the places left (the original SQuAD layout's first window) instead.
    Returns int32 [batch, seq_length] `input_word_ids`, `input_mask`, `input_type_ids`.
    """
    import tensorflow_text as tf_text

    segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    segments = [tf.cast(s, tf.int32) for s in segments]
    seq_length = tf.cast(seq_length, tf.int32)
    budget = tf.maximum(seq_length - (len(segments) + 1), 0)
    if first_segment_length is None:
        trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
    else:
        segments[0] = segments[0][:, :first_segment_length]
        trimmed = tf_text.WaterfallTrimmer(max_seq_length=budget).trim(segments)
    ids, type_ids = tf_text.combine_segments(trimmed, start_of_sequence_id=cls_id,
                                             end_of_segment_id=sep_id)
    word_ids, mask = tf_text.pad_model_inputs(ids, max_seq_length=seq_length, pad_value=pad_id)
    type_ids, _ = tf_text.pad_model_inputs(type_ids, max_seq_length=seq_length, pad_value=0)
    return {"input_word_ids": tf.cast(word_ids, tf.int32), "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32)}


# ---- saving --------------------------------------------------------------------------------


def _save_atomically(root, export_dir, signatures):
    """Saves to a temporary sibling directory, then renames it over `export_dir` (local paths;
    a gs:// path is written in place)."""
    export_dir = os.fspath(export_dir).rstrip("/")
    parent = os.path.dirname(os.path.abspath(export_dir))
    tf.io.gfile.makedirs(parent)
    if "://" in export_dir:  # object stores cannot rename directories
        tf.saved_model.save(root, export_dir, signatures=signatures)
        return export_dir
    tmp = f"{export_dir}.tmp-{os.getpid()}"
    if tf.io.gfile.exists(tmp):
        tf.io.gfile.rmtree(tmp)
    tf.saved_model.save(root, tmp, signatures=signatures)
    old = None
    if tf.io.gfile.exists(export_dir):
        old = f"{export_dir}.old-{os.getpid()}"
        tf.io.gfile.rename(export_dir, old)
    tf.io.gfile.rename(tmp, export_dir)
    if old:
        tf.io.gfile.rmtree(old)
    return export_dir


def _stage_assets(stage_dir, spm_model_file, config=None):
    """Copies the SentencePiece model (named *.model) and albert_config.json into `stage_dir`."""
    spm_model_file = os.fspath(spm_model_file)
    if not tf.io.gfile.exists(spm_model_file):
        raise FileNotFoundError(f"SentencePiece model not found: {spm_model_file}")
    with tf.io.gfile.GFile(spm_model_file, "rb") as f:
        pieces = load_sp_model(f.read()).get_piece_size()  # fails early on a bad file
    if config is not None and pieces != config.vocab_size:
        logging.warning("%s has %d pieces but the model's vocab_size is %d: is it the model's "
                        "vocabulary?", spm_model_file, pieces, config.vocab_size)
    name = os.path.basename(spm_model_file)
    if not name.endswith(".model"):
        name += ".model"
    spm_copy = os.path.join(stage_dir, name)
    tf.io.gfile.copy(spm_model_file, spm_copy, overwrite=True)
    config_copy = None
    if config is not None:
        config_copy = os.path.join(stage_dir, "albert_config.json")
        config.to_json_file(config_copy)
    return spm_copy, config_copy


def _attach_tokenizer_info(root, spm_copy, do_lower_case, vocab_size, config_copy=None):
    root.sp_model_file = tf.saved_model.Asset(spm_copy)
    if config_copy:
        root.albert_config_file = tf.saved_model.Asset(config_copy)
    root.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")
    root.vocab_size = tf.Variable(int(vocab_size), dtype=tf.int32, trainable=False,
                                  name="vocab_size")

    @tf.function(input_signature=[])
    def tokenization_info():
        return {"vocab_file": root.sp_model_file.asset_path,
                "do_lower_case": tf.identity(root.do_lower_case)}
    root.tokenization_info = tokenization_info
    return tokenization_info


def _tf_variables(variables):
    """The tf.Variables behind Keras 3 variables: listing the Keras wrappers instead saves
    variables that TF1-style loaders (`saved_model_cli run`, sessions) cannot find."""
    return [getattr(v, "value", v) for v in variables]


# ---- encoder -------------------------------------------------------------------------------


class _Callable(_Trackable):
    """A reusable-SavedModel object: `obj(inputs, training=bool)`, variables, no reg. losses."""

    def __init__(self, fn, input_names, variables, trainable_variables):
        super().__init__()
        self._fn = fn
        self.variables = _tf_variables(variables)
        self.trainable_variables = _tf_variables(trainable_variables)
        self.regularization_losses = []
        specs = encoder_input_specs(input_names)
        for training in (True, False):
            self.__call__.get_concrete_function(specs, training=training)

    @tf.function
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
def export_encoder(model_or_encoder, export_dir, spm_model_file, do_lower_case=True,
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
    @tf.function(input_signature=[encoder_input_specs()])
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

        @tf.function(input_signature=[encoder_input_specs(
            ENCODER_INPUTS + ("masked_lm_positions",))])
        def mlm(inputs):
            out = mlm_fn(inputs, False)
            out.pop("encoder_outputs")
            return out
        signatures["mlm"] = mlm

    with tempfile.TemporaryDirectory() as stage:
        spm_copy, config_copy = _stage_assets(stage, spm_model_file, config)
        signatures["tokenization_info"] = _attach_tokenizer_info(
            root, spm_copy, do_lower_case, config.vocab_size, config_copy)
        return _save_atomically(root, export_dir, signatures)


# ---- preprocessor --------------------------------------------------------------------------


class _Tokenize(_Trackable):
    """`.tokenize(sentences)` → int32 RaggedTensor [batch, (tokens)]; special ids on request."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, sentences):
        return self.tokenizer.tokenize(sentences)

    @tf.function(input_signature=[])
    def get_special_tokens_dict(self):
        t = self.tokenizer
        values = {"vocab_size": t.vocab_size, "padding_id": t.pad_id,
                  "start_of_sequence_id": t.cls_id, "end_of_segment_id": t.sep_id,
                  "mask_id": t.mask_id}
        return {k: tf.constant(v, tf.int32) for k, v in values.items()}


class _BertPackInputs(_Trackable):
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

    @tf.function
    def __call__(self, inputs, seq_length=None):
        cls_id, sep_id, pad_id = self._ids
        if seq_length is None:
            out = pack_inputs(list(inputs), self._default, cls_id, sep_id, pad_id)
            return {k: tf.ensure_shape(v, [None, self._default]) for k, v in out.items()}
        return pack_inputs(list(inputs), seq_length, cls_id, sep_id, pad_id)


class _Preprocessor(_Trackable):
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

    @tf.function
    def __call__(self, sentences, seq_length=None):
        return self.bert_pack_inputs([self.tokenize(sentences)], seq_length)


def export_preprocessor(export_dir, spm_model_file, do_lower_case=True, default_seq_length=128):
    """Writes the preprocessor SavedModel (tensorflow-text ops; ids equal `FullTokenizer`'s)."""
    if default_seq_length < 3:
        raise ValueError(f"default_seq_length={default_seq_length} leaves no room for text")
    with tempfile.TemporaryDirectory() as stage:
        spm_copy, _ = _stage_assets(stage, spm_model_file)
        tokenizer = InGraphTokenizer(spm_copy, do_lower_case=do_lower_case)
        root = _Preprocessor(tokenizer, default_seq_length)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
        def serving_default(sentences):
            return root(sentences)
        signatures = {"serving_default": serving_default,
                      "tokenization_info": _attach_tokenizer_info(
                          root, spm_copy, do_lower_case, tokenizer.vocab_size)}
        return _save_atomically(root, export_dir, signatures)


# ---- serving any Keras model on raw strings ------------------------------------------------


def _default_outputs(outputs):
    if isinstance(outputs, dict):
        return {k: v for k, v in outputs.items() if not isinstance(v, (list, tuple))}
    return {"outputs": outputs}


def export_text_serving(model, export_dir, spm_model_file, do_lower_case=True, seq_length=128,
                        signatures=None, output_fn=None, first_segment_length=None):
    """A serving SavedModel: raw strings → in-graph tokenizer + packing → `model(...)`.

    model: any Keras model called as `model(input dict, training=False)` on the encoder
      inputs (int32 [batch, seq_length]).
    signatures: {signature name: tuple of 1 or 2 string input names}, each a packed segment;
      default {"serving_default": ("text_a",)}. Each is also an attribute taking a dict.
    output_fn: maps the model's outputs to the signature's dict of tensors; by default a dict
      output without its lists (or {"outputs": tensor}).
    first_segment_length: see `pack_inputs` (question + context packing).
    """
    signatures = signatures or {"serving_default": ("text_a",)}
    output_fn = output_fn or _default_outputs
    with tempfile.TemporaryDirectory() as stage:
        spm_copy, config_copy = _stage_assets(stage, spm_model_file, getattr(model, "config", None))
        tokenizer = InGraphTokenizer(spm_copy, do_lower_case=do_lower_case)
        root = _Trackable()
        root.tokenizer = tokenizer
        root.variables = _tf_variables(model.variables)
        root.trainable_variables = _tf_variables(model.trainable_variables)
        root.regularization_losses = []
        functions = {"tokenization_info": _attach_tokenizer_info(
            root, spm_copy, do_lower_case, tokenizer.vocab_size, config_copy)}
        for name, keys in signatures.items():
            functions[name] = _text_signature(model, tokenizer, tuple(keys), seq_length,
                                              output_fn, first_segment_length)
            setattr(root, name, functions[name])  # also callable on a dict (TFSMLayer endpoint)
        return _save_atomically(root, export_dir, functions)


def _text_signature(model, tokenizer, keys, seq_length, output_fn, first_segment_length=None):
    if not 1 <= len(keys) <= 2:
        raise ValueError(f"a text signature takes 1 or 2 segments, got {keys}")
    specs = {k: tf.TensorSpec([None], tf.string, name=k) for k in keys}

    @tf.function(input_signature=[specs])  # a dict argument: the signature's inputs keep its keys
    def serve(texts):
        segments = [tokenizer.tokenize(texts[k]) for k in keys]
        inputs = pack_inputs(segments, seq_length, tokenizer.cls_id, tokenizer.sep_id,
                             tokenizer.pad_id, first_segment_length)
        return dict(output_fn(model(inputs, training=False)))
    return serve


# ---- TFLite --------------------------------------------------------------------------------


def convert_to_tflite(saved_model_dir, seq_length, batch_size=1,
                      output_keys=("pooled_output", "sequence_output"), input_names=None):
    """TFLite flatbuffer bytes of an exported encoder's `__call__` at a fixed input shape."""
    loaded = tf.saved_model.load(os.fspath(saved_model_dir))
    specs = encoder_input_specs(input_names or ENCODER_INPUTS, seq_length, batch_size)

    @tf.function(input_signature=[specs])
    def fn(inputs):
        out = loaded(inputs, training=False)
        return {k: out[k] for k in output_keys}
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [fn.get_concrete_function()], loaded)
    return converter.convert()


# ---- fine-tuned task models ------------------------------------------------------------------


def model_to_tflite(model, seq_length, output_fn=None, batch_size=1):
    """TFLite flatbuffer bytes of an ids-level Keras model (`model(encoder inputs,
    training=False)`) at a fixed int32 [batch_size, seq_length] input; `output_fn` picks the
    outputs (numeric tensors only; default: the model's dict outputs)."""
    output_fn = output_fn or _default_outputs
    specs = encoder_input_specs(ENCODER_INPUTS, seq_length, batch_size)

    @tf.function(input_signature=[specs])
    def serving_default(inputs):
        return dict(output_fn(model(inputs, training=False)))
    # Through a SavedModel so that the flatbuffer keeps a `serving_default` signature with
    # named inputs/outputs (Interpreter.get_signature_runner()).
    root = _Trackable()
    root.variables = _tf_variables(model.variables)
    root.serving_default = serving_default
    with tempfile.TemporaryDirectory() as stage:
        tf.saved_model.save(root, stage, signatures={"serving_default": serving_default})
        return tf.lite.TFLiteConverter.from_saved_model(stage).convert()


def export_finetuned(model, export_dir, spm_model_file, do_lower_case, seq_length, text_keys,
                     output_fn, tflite_name=None, tflite_output_fn=None,
                     first_segment_length=None):
    """A fine-tuned model's exports (run_classifier / run_squad --export_dir):
    `export_dir/` the raw-string serving SavedModel (`serving_default` on `text_keys`, outputs
    from `output_fn`), and with `tflite_name` also `export_dir/<tflite_name>`, the ids-level
    model at [1, seq_length] (outputs from `tflite_output_fn`, default `output_fn`).
    Returns (export_dir, tflite path or None)."""
    export_text_serving(model, export_dir, spm_model_file, do_lower_case, seq_length,
                        signatures={"serving_default": tuple(text_keys)}, output_fn=output_fn,
                        first_segment_length=first_segment_length)
    logging.info("Wrote the serving SavedModel %s (inputs %s)", export_dir, ", ".join(text_keys))
    if not tflite_name:
        return export_dir, None
    path = os.path.join(os.fspath(export_dir), tflite_name)
    flatbuffer = model_to_tflite(model, seq_length, tflite_output_fn or output_fn)
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(flatbuffer)
    logging.info("Wrote %s (%d bytes)", path, len(flatbuffer))
    return export_dir, path
