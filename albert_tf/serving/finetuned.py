"""Exports of fine-tuned models: a raw-string serving SavedModel around any Keras model (in-graph
tokenizer + packing) and TFLite flatbuffers."""

import json
import os
import tempfile

import tensorflow as tf
from absl import logging

from albert_tf.data.conll import write_labels
from albert_tf.files import atomic_write_bytes
from albert_tf.serving import lite, lite_metadata
from albert_tf.serving.saved_model import (ENCODER_INPUTS, Trackable, attach_tokenizer_info,
                                           encoder_input_specs, float32_model, pack_texts,
                                           pack_windows, save_atomically, stage_assets,
                                           tf_variables)
from albert_tf.tokenization import in_graph_tokenizer
from albert_tf.tracing import graph_function


def _default_outputs(outputs):
    if isinstance(outputs, dict):
        return {k: v for k, v in outputs.items() if not isinstance(v, (list, tuple))}
    return {"outputs": outputs}


def export_text_serving(model, export_dir, vocabulary, do_lower_case=True, seq_length=128,
                        signatures=None, output_fn=None, first_segment_length=None,
                        pad_to_longest=False, offsets=False, windows=None,
                        more_signatures=None):
    """A serving SavedModel: raw strings → in-graph tokenizer + packing → `model(...)`.

    vocabulary: the SentencePiece model or WordPiece vocabulary file (copied as an asset).

    model: any Keras model called as `model(input dict, training=False)` on the encoder
      inputs (int32 [batch, seq_length]).
    signatures: {signature name: tuple of 1 or 2 string input names}, each a packed segment;
      default {"serving_default": ("text_a",)}. Each is also an attribute taking a dict.
    output_fn: maps the model's outputs to the signature's dict of tensors; by default a dict
      output without its lists (or {"outputs": tensor}).
    first_segment_length: see `pack_inputs` (question + context packing).
    pad_to_longest: pad each call's batch to its longest text (at most `seq_length`) rather
      than to `seq_length`: the same outputs for much less work on short texts. Only for
      outputs that do not depend on the padded length. (Rounding the length up to a multiple
      of 8 measured slower, not faster.)
    offsets: each signature also returns `<its last input>_offsets`, the token-to-character
      map (`saved_model.pack_texts`'s `offsets`).
    windows: (stride, pool) reads one-text signatures' long texts in overlapping windows
      (`saved_model.pack_windows`); `pool(outputs, window's text, texts)` gives each text's
      outputs from its windows'.
    more_signatures: {name: make(in-graph tokenizer) → tf.function}, signatures of other
      inputs or outputs (SQuAD's `answer`).
    """
    signatures = signatures or {"serving_default": ("text_a",)}
    output_fn = output_fn or _default_outputs
    return save_serving(model, export_dir, vocabulary, do_lower_case, lambda tokenizer: {
        **{name: _text_signature(model, tokenizer, tuple(keys), seq_length, output_fn,
                                 first_segment_length, pad_to_longest, offsets, windows)
           for name, keys in signatures.items()},
        **{name: make(tokenizer) for name, make in (more_signatures or {}).items()}})


def save_serving(model, export_dir, vocabulary, do_lower_case, make_signatures,
                 attributes=None):
    """A serving SavedModel of `model` with the vocabulary (and the model's config) as assets,
    `tokenization_info`, and the signatures `make_signatures(in-graph tokenizer)` returns
    ({name: tf.function}; each is also an attribute, callable on a dict: a TFSMLayer endpoint).
    `attributes`: more trackables to keep on the root (e.g. label names)."""
    with tempfile.TemporaryDirectory() as stage:
        vocab_copy, config_copy = stage_assets(stage, vocabulary, getattr(model, "config", None))
        tokenizer = in_graph_tokenizer(vocab_copy, do_lower_case=do_lower_case)
        root = Trackable()
        root.tokenizer = tokenizer
        root.variables = tf_variables(model.variables)
        root.trainable_variables = tf_variables(model.trainable_variables)
        root.regularization_losses = []
        for name, value in (attributes or {}).items():
            setattr(root, name, value)
        functions = {"tokenization_info": attach_tokenizer_info(
            root, vocab_copy, do_lower_case, tokenizer.vocab_size, config_copy)}
        for name, function in make_signatures(tokenizer).items():
            functions[name] = function
            setattr(root, name, function)
        return save_atomically(root, export_dir, functions)


def _text_signature(model, tokenizer, keys, seq_length, output_fn, first_segment_length=None,
                    pad_to_longest=False, offsets=False, windows=None):
    if not 1 <= len(keys) <= 2 or windows and len(keys) != 1:
        raise ValueError(f"a text signature takes 1 or 2 segments (1 with windows), got {keys}")
    specs = {k: tf.TensorSpec([None], tf.string, name=k) for k in keys}

    # A dict argument: the signature's inputs keep its keys.
    @graph_function(input_signature=[specs])
    def serve(texts):
        if windows:
            stride, pool = windows
            text = texts[keys[0]]
            inputs, example = pack_windows(tokenizer, text, seq_length, stride)
            return dict(output_fn(pool(model(inputs, training=False), example,
                                       tf.shape(text)[0])))
        segments = [texts[k] for k in keys]
        if len(keys) == 2:  # (TensorFlow's own message names an AddN deep in the graph)
            with tf.control_dependencies([tf.debugging.assert_equal(
                    tf.size(segments[0]), tf.size(segments[1]),
                    message=f"{keys[0]} and {keys[1]} must hold as many texts")]):
                segments = [tf.identity(s) for s in segments]
        packed = pack_texts(tokenizer, segments, seq_length, pad_to_longest,
                            first_segment_length, offsets)
        if not offsets:
            return dict(output_fn(model(packed, training=False)))
        inputs, ranges = packed
        return dict(output_fn(model(inputs, training=False)), **{f"{keys[-1]}_offsets": ranges})
    return serve


def convert_to_tflite(saved_model_dir, seq_length, batch_size=1,
                      output_keys=("pooled_output", "sequence_output"), input_names=None):
    """TFLite flatbuffer bytes of an exported encoder's `__call__` at a fixed input shape."""
    loaded = tf.saved_model.load(os.fspath(saved_model_dir))
    specs = encoder_input_specs(input_names or ENCODER_INPUTS, seq_length, batch_size)

    @graph_function(input_signature=[specs])
    def fn(inputs):
        out = loaded(inputs, training=False)
        return {k: out[k] for k in output_keys}
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [fn.get_concrete_function()], loaded)
    return converter.convert()


def model_to_tflite(model, seq_length, output_fn=None, batch_size=1, quantization="none",
                    calibration=None):
    """TFLite flatbuffer bytes of an ids-level Keras model (`model(encoder inputs,
    training=False)`) at a fixed int32 [batch_size, seq_length] input; `output_fn` picks the
    outputs (numeric tensors only; default: the model's dict outputs); `quantization`: one of
    `lite.QUANTIZATIONS` (int8 calibrated on `calibration()`'s input dicts)."""
    output_fn = output_fn or _default_outputs
    model = float32_model(model)
    specs = encoder_input_specs(ENCODER_INPUTS, seq_length, batch_size)

    @graph_function(input_signature=[specs])
    def serving_default(inputs):
        return dict(output_fn(model(inputs, training=False)))
    return lite.convert(serving_default, quantization, calibration and (
        lambda: ({k: v[k] for k in ENCODER_INPUTS} for v in calibration())),
        variables=tf_variables(model.variables))


def export_finetuned(model, export_dir, vocabulary, do_lower_case, seq_length, text_keys,
                     output_fn, tflite_name=None, tflite_output_fn=None,
                     first_segment_length=None, pad_to_longest=False, text_output_fn=None,
                     lite_options=None, labels=None, task_library=None, text_offsets=False,
                     windows=None, more_signatures=None):
    """A fine-tuned model's exports (run_classifier / run_squad --export_dir):
    `export_dir/` the raw-string serving SavedModel (`serving_default` on `text_keys`, outputs
    from `output_fn`), and with `tflite_name` also two LiteRT models: `export_dir/<tflite_name>`,
    the ids-level model at [1, seq_length] (outputs from `tflite_output_fn`, default
    `output_fn`), and `<its stem>_text.tflite`, taking the strings `text_keys` (shape [1]) with
    the tokenizer inside (outputs from `text_output_fn`, default `tflite_output_fn`; with
    `pad_to_longest`, unpadded: [1, tokens] inside); which of
    them, quantized how, and the report of their sizes and scores: `lite_options`
    (`lite.LiteOptions`); `labels` (class names) go beside them in labels.txt, one per line.
    `text_offsets`: the SavedModel and the string-in file also return `<last text key>_offsets`,
    the token-to-character map (`saved_model.pack_texts`'s `offsets`).
    `windows`: see `export_text_serving` (the SavedModel and the string-in .tflite; the
    ids-level .tflite takes one window, cut by its caller: `albert_tf.predict` cuts them).
    `more_signatures`: see `export_text_serving` (the SavedModel only).
    `task_library` ({ids-level output: the TFLite Task Library's name for it}): with the
    ids-level file, also `<its stem>_task_library.tflite`, the same model with only those
    outputs and the Task Library's metadata (tokenizer and labels packed in).
    Returns (export_dir, ids-level tflite path or None). A model under a mixed policy is
    exported in float32 (`saved_model.float32_model`)."""
    model = float32_model(model)
    options = lite_options or lite.LiteOptions()
    export_text_serving(model, export_dir, vocabulary, do_lower_case, seq_length,
                        signatures={"serving_default": tuple(text_keys)}, output_fn=output_fn,
                        first_segment_length=first_segment_length,
                        pad_to_longest=pad_to_longest, offsets=text_offsets, windows=windows,
                        more_signatures=more_signatures)
    logging.info("Wrote the serving SavedModel %s (inputs %s)", export_dir, ", ".join(text_keys))
    if not tflite_name or options.files == "none":
        return export_dir, None
    tflite_output_fn = tflite_output_fn or output_fn
    quantization = options.quantization
    path = os.path.join(os.fspath(export_dir), tflite_name)
    text_path = os.path.splitext(path)[0] + "_text.tflite"

    def ids_model(q):
        return model_to_tflite(model, seq_length, tflite_output_fn, quantization=q,
                               calibration=options.calibration)
    writers = {"ids": (path, lambda: ids_model(quantization)),
               "text": (text_path, lambda: lite.text_model_to_tflite(
                   model, vocabulary, do_lower_case, seq_length, tuple(text_keys),
                   text_output_fn or tflite_output_fn, first_segment_length,
                   quantization=quantization, calibration=options.calibration,
                   pad_to_seq_length=not pad_to_longest, offsets=text_offsets,
                   windows=windows))}
    written = {}
    for kind in (("ids", "text") if options.files == "both" else (options.files,)):
        target, convert = writers[kind]
        written[kind] = convert()
        atomic_write_bytes(target, written[kind])
        logging.info("Wrote %s (%s, %d bytes)", target, quantization, len(written[kind]))
    files = {os.path.basename(p): len(written[k]) for k, p in
             (("ids", path), ("text", text_path)) if k in written}
    if task_library and "ids" in written:
        target = os.path.splitext(path)[0] + "_task_library.tflite"
        data = lite_metadata.task_library_model(written["ids"], vocabulary, task_library, labels)
        atomic_write_bytes(target, data)
        files[os.path.basename(target)] = len(data)
        logging.info("Wrote %s (%s, %d bytes; for the TFLite Task Library)", target,
                     quantization, len(data))
    if labels:
        write_labels(export_dir, labels)
    if options.score:
        ids = written.get("ids") or ids_model(quantization)
        scores = options.score(ids)
        if scores is not None:
            if quantization == "none":  # the float32 model itself: scored once
                reference = (len(ids), scores)
            else:
                float32 = ids_model("none")
                reference = (len(float32), options.score(float32))
            write_lite_report(export_dir, quantization, files, (len(ids), scores), reference,
                              options.metric)
    return export_dir, path if "ids" in written else None


def _figure(value):
    """A score as a log shows it: a count (SQuAD v2's `total`) as a whole number."""
    return str(int(value)) if float(value).is_integer() else f"{value:.4f}"


def write_lite_report(export_dir, quantization, files, scored, float32, metric=None):
    """`export_dir/tflite_report.json` and log lines: the files written (name: bytes), and the
    ids-in model's size and dev scores (`scored`: (bytes, {metric: value})) beside the float32
    one's (`float32`, the same); a warning when the quantized model is more than
    `lite.MAX_DROP` worse on `metric` ((name, higher is better))."""
    report = {"quantization": quantization, "files": files,
              "ids_model": {"bytes": scored[0], "dev": scored[1]},
              "float32_ids_model": {"bytes": float32[0], "dev": float32[1]}}
    atomic_write_bytes(os.path.join(os.fspath(export_dir), "tflite_report.json"),
                       (json.dumps(report, indent=2, sort_keys=True) + "\n").encode())
    models = ([("ids-in model (none, float32)", scored)] if quantization == "none" else
              [(f"ids-in model ({quantization})", scored), ("float32 ids-in model", float32)])
    for name, (size, scores) in models:
        logging.info("%s: %.2f MB; dev %s", name, size / 2**20,
                     ", ".join(f"{k} {_figure(v)}" for k, v in sorted(scores.items())))
    name, higher = metric or (None, True)
    if name in scored[1] and name in float32[1]:
        drop = (float32[1][name] - scored[1][name]) * (1 if higher else -1)
        if drop > lite.MAX_DROP:
            logging.warning(
                "The %s .tflite files lose %.4f of dev %s against float32 (%.4f against %.4f): "
                "%s", quantization, drop, name, scored[1][name], float32[1][name],
                "use --tflite_quantization=dynamic_int8 (int8 weights, float activations)"
                if quantization == "int8" else "check the float32 files instead")
