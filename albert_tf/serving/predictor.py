"""What the predictors (fill-mask, classify, embed) share: the model source and its tokenizer,
and packing texts into encoder inputs the way the original classifier did."""

import numpy as np
from absl import logging

from albert_tf.formats.resolve import SourceError
from albert_tf.formats.sources import ModelSource
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.training.checkpoint_files import foreign_model, recorded_settings

DEFAULT_MAX_SEQ_LENGTH = 128
# The exports that take raw strings and tokenize and cut them in their graph.
RAW_STRING_KINDS = ("text_classifier", "text_tagger", "text_squad", "tflite_text")
# One error for a bad model, tokenizer, text or labels: the CLI prints its message.
PredictError = SourceError


def inference_function(model):
    """`model(inputs, training=False)` as one TensorFlow graph, not op by op from Python
    (bench/bench_serving.py: 4.8x faster at batch 1). With reduce_retracing a second batch
    shape makes the trace shape-generic, so there are at most two traces."""
    from albert_tf.tracing import graph_function
    return graph_function(lambda inputs: model(inputs, training=False), reduce_retracing=True)


def pack(a, b, max_seq_length, cls_id, sep_id):
    """[CLS] A [SEP] (B [SEP]) ids and type ids, truncated as the original classifier:
    one segment cut at the end, two by `_truncate_seq_pair` (from the end of the longer)."""
    from albert_tf.data.glue import truncate_pair
    a = list(a)
    if b is None:
        a = a[:max(max_seq_length - 2, 0)]
        return [cls_id] + a + [sep_id], [0] * (len(a) + 2)
    b = list(b)
    truncate_pair(a, b, max(max_seq_length - 3, 0))
    return [cls_id] + a + [sep_id] + b + [sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1)


def pad_batch(rows, extra=None):
    """Int32 encoder inputs padded to the longest row of the batch (outputs at real positions
    do not depend on the padding length)."""
    length = max(len(ids) for ids, _ in rows)
    ids = np.zeros([len(rows), length], np.int32)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, (row, row_types) in enumerate(rows):
        ids[i, :len(row)] = row
        types[i, :len(row)] = row_types
        mask[i, :len(row)] = 1
    out = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    out.update(extra or {})
    return out


def batches(n, batch_size):
    for start in range(0, n, max(int(batch_size), 1)):
        yield slice(start, min(start + batch_size, n))


def check_pairs(texts, texts_b):
    texts = [texts] if isinstance(texts, str) else list(texts)
    if texts_b is None:
        return texts, [None] * len(texts)
    texts_b = [texts_b] if isinstance(texts_b, str) else list(texts_b)
    if len(texts_b) != len(texts):
        raise PredictError(f"{len(texts)} texts but {len(texts_b)} second texts")
    return texts, texts_b


class Predictor:
    """What the predictors share: the model source, its tokenizer (loaded on first use), and
    packing texts into encoder inputs."""

    def __init__(self, model, spm_model_file=None, do_lower_case=None, max_seq_length=None,
                 batch_size=32, albert_config_file=None, vocab_file=None):
        self.source = model if isinstance(model, ModelSource) else ModelSource(
            model, albert_config_file)
        config = self.source.config
        # A fine-tuning run's settings (run.json), where the model is its checkpoint: it reads
        # texts as the run did (a pretraining run's length is no guide to a text's).
        self.run_settings = (recorded_settings(self.source.directory, kind="fine-tuning")
                             if self.source.kind == "checkpoint" else {})
        own = foreign_model(self.source.directory) if self.source.kind == "checkpoint" else None
        if own:
            raise PredictError(f"{self.source.path} is a checkpoint of {own} (run.json), a "
                               f"model of your own, which predict would read as its stock "
                               f"one: predict with the run's export (--export_dir), or load it "
                               f"with its class")
        trained = self.run_settings.get("max_seq_length")
        if max_seq_length is None and trained:
            max_seq_length = trained
            logging.info("max_seq_length %d, as the run in %s trained (run.json)",
                         max_seq_length, self.source.directory)
        elif max_seq_length is not None and self.source.kind in RAW_STRING_KINDS:
            logging.warning("--max_seq_length=%d is not used: %s reads texts at the length it was "
                            "exported with", max_seq_length, self.source.path)
        elif max_seq_length is not None and trained and max_seq_length != trained:
            logging.warning("--max_seq_length=%d, but the run in %s trained at %d (run.json): "
                            "long texts are cut otherwise than in its evaluation",
                            max_seq_length, self.source.directory, trained)
        vocabulary = spm_model_file or vocab_file
        if vocabulary and self.source.kind in RAW_STRING_KINDS:
            logging.warning("--%s=%s is not used: %s tokenizes texts in its graph, with the "
                            "vocabulary it was exported with", "spm_model_file" if spm_model_file
                            else "vocab_file", vocabulary, self.source.path)
        if do_lower_case is not None and self.source.kind in RAW_STRING_KINDS:
            logging.warning("--do_lower_case=%s is not used: %s tokenizes texts in its graph, "
                            "cased as it was exported", bool(do_lower_case), self.source.path)
        if max_seq_length is None:  # 128, or less when the model has fewer positions
            max_seq_length = min(DEFAULT_MAX_SEQ_LENGTH, config.max_position_embeddings
                                 if config is not None else DEFAULT_MAX_SEQ_LENGTH)
        self.max_seq_length = int(max_seq_length)
        self.batch_size = int(batch_size)
        self._tokenizer_args = (spm_model_file, do_lower_case, vocab_file)
        self._tokenizer = None
        if config is not None and self.max_seq_length > config.max_position_embeddings:
            raise PredictError(f"--max_seq_length={self.max_seq_length} exceeds the model's "
                               f"max_position_embeddings={config.max_position_embeddings}")
        if self.max_seq_length < 3:
            raise PredictError(f"--max_seq_length={self.max_seq_length} leaves no room for text")

    @property
    def text_columns(self):
        """The text columns the model's training run read (the default columns of a table
        input), () where the model does not say."""
        return ()

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            spm_model_file, do_lower_case, vocab_file = self._tokenizer_args
            config = self.source.config
            self._tokenizer = load_tokenizer(spm_model_file, do_lower_case, model=self.source,
                                             vocab_size=config.vocab_size if config else None,
                                             vocab_file=vocab_file)
            ids = self._tokenizer.special_ids()
            self.cls_id, self.sep_id, self.mask_id = ids["[CLS]"], ids["[SEP]"], ids["[MASK]"]
        return self._tokenizer

    def _encode(self, a, b):
        tokenizer = self.tokenizer
        return pack(tokenizer.encode(a), None if b is None else tokenizer.encode(b),
                    self.max_seq_length, self.cls_id, self.sep_id)

    def _encoder_outputs(self, inputs):
        """pooled_output and sequence_output (numpy) from the checkpoint encoder or export."""
        import tensorflow as tf
        feed = {k: tf.constant(inputs[k]) for k in ("input_word_ids", "input_mask",
                                                     "input_type_ids")}
        out = self._encoder(feed, training=False)
        return {k: np.asarray(out[k]) for k in ("pooled_output", "sequence_output")}

    def _load_encoder(self, what):
        kind = self.source.kind
        if kind == "checkpoint":
            from albert_tf.modeling.encoder import AlbertEncoder
            call = inference_function(self.source.build(AlbertEncoder))
            self._encoder = lambda inputs, training=False: call(inputs)
        elif kind in ("encoder", "pretrainer"):
            self._encoder = self.source.loaded
        else:
            raise PredictError(f"{self.source.path} is a {kind} export: {what} needs a checkpoint "
                               f"or an encoder/pretrainer export")
