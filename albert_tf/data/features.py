"""Fine-tuning features: the on-disk feature cache and length-bucketed tf.data input.

Features are a dict of numpy arrays: flat token arrays (SEQUENCE_KEYS) cut into examples by
`lengths`, plus one value per example (`label_ids`, ...; string arrays stay on the host).
Multiple choice: `lengths` [examples, choices] cuts each example into that many sequences,
which reach the model as [batch, choices, length].
Keys starting with `host_` (any shape, e.g. per-token maps for post-processing) also stay on
the host: they are cached but never fed to the model.
"""

import hashlib
import io
import json
import math
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.files import writing

SEQUENCE_KEYS = ("input_word_ids", "input_type_ids", "p_mask", "tag_ids", "tag_mask")
HOST_PREFIX = "host_"
CACHE_VERSION = 1
PADDINGS = ("bucket", "batch", "max_length")


def cache_key(**settings):
    """A short hash of every setting that changes the features."""
    text = json.dumps({"version": CACHE_VERSION, **settings}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


SETTINGS_KEY = "__settings__"


class FeatureFileError(ValueError):
    """A feature file that was built with other settings, or is not one of ours."""


def _read_npz(path):
    with tf.io.gfile.GFile(path, "rb") as f:
        with np.load(io.BytesIO(f.read()), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}


def _check_settings(path, flag, stored, settings):
    """Refuses features built with other settings; a setting given as None (the raw data file's
    digest when that file is gone) is not compared."""
    if stored is None:
        raise FeatureFileError(f"--{flag}={path} holds no record of the settings it was built "
                               f"with: delete it (it is rebuilt) or point --{flag} elsewhere")
    stored = json.loads(str(stored))
    current = json.loads(json.dumps(settings, default=str))  # as stored: tuples become lists
    differ = [f"{k}: file {stored.get(k)!r}, now {v!r}" for k, v in sorted(current.items())
              if v is not None and stored.get(k) != v]
    if differ:
        raise FeatureFileError(f"--{flag}={path} was built with other settings ("
                               + "; ".join(differ) + f"): delete it or point --{flag} elsewhere")


def cached_features(cache_dir, stem, settings, build_fn, path=None, flag=None):
    """Features from `cache_dir/<stem>-<hash of settings>.npz`, built with build_fn() on a miss.

    With `path` (a feature-file flag such as --train_feature_file, named by `flag`), the
    features live in that file instead: written there on the first run, read back on the next
    after checking that every setting matches (FeatureFileError names the file and the
    settings that differ). A setting given as None is not compared.
    """
    explicit = path is not None
    path = path or os.path.join(cache_dir, f"{stem}-{cache_key(**settings)}.npz")
    if tf.io.gfile.exists(path):
        try:
            features = _read_npz(path)
        except (ValueError, OSError) as e:
            if not explicit:
                raise
            raise FeatureFileError(f"--{flag}={path} is not a feature file written by albert_tf "
                                   f"({type(e).__name__}): delete it or point --{flag} "
                                   f"elsewhere") from None
        stored = features.pop(SETTINGS_KEY, None)
        if explicit:
            _check_settings(path, flag, stored, settings)
        logging.info("Features from %s", path)
        return features
    if None in settings.values():
        missing = [k for k, v in settings.items() if v is None]
        raise FileNotFoundError(f"no features at {path} and no data to build them from "
                                f"({', '.join(missing)} missing)")
    features = build_fn()
    tf.io.gfile.makedirs(os.path.dirname(path) or ".")
    tmp = f"{path}.tmp-{os.getpid()}"
    buffer = io.BytesIO()
    np.savez(buffer, **features, **{SETTINGS_KEY: np.array(json.dumps(
        {"version": CACHE_VERSION, **settings}, sort_keys=True, default=str))})
    with writing(f"the feature {'file' if explicit else 'cache'}", path, [tmp]):
        with tf.io.gfile.GFile(tmp, "wb") as f:
            f.write(buffer.getvalue())
        tf.io.gfile.rename(tmp, path, overwrite=True)
    owners = next((features[k] for k in ("host_example", "host_question") if k in features), ())
    examples = len(np.unique(owners))
    logging.info("Wrote %d features%s to feature %s %s", len(features["lengths"]),
                 f" ({examples} examples, long ones in windows: one feature per window)"
                 if 0 < examples < len(features["lengths"]) else "",
                 "file" if explicit else "cache", path)
    return features


def num_examples(features):
    return len(features["lengths"])


def select_examples(features, rows):
    """The features of the examples at `rows` (increasing indices): their sequences, and every
    other array's values at `rows` (one value per example, host_ arrays included)."""
    rows = np.asarray(rows, np.int64)
    lengths = features["lengths"]
    keep = np.zeros(len(lengths), bool)
    keep[rows] = True
    tokens = np.repeat(keep, lengths.reshape(len(lengths), -1).sum(1))
    return {k: v[tokens] if k in SEQUENCE_KEYS else v[rows] for k, v in features.items()}


def _columns(features, pad_to=None):
    """(ragged sequences, per-example values) with example_index and is_real_example added;
    `pad_to` appends weight-0 copies of example 0 up to that many examples."""
    n = num_examples(features)
    lengths = features["lengths"].astype(np.int64)  # [n] or [n, choices]
    per_example = {k: v for k, v in features.items()
                   if k not in SEQUENCE_KEYS and k != "lengths" and v.dtype.kind not in "US"
                   and not k.startswith(HOST_PREFIX)}
    per_example["example_index"] = np.arange(n, dtype=np.int32)
    per_example["is_real_example"] = np.ones(n, np.float32)
    sequences = {k: features[k] for k in SEQUENCE_KEYS if k in features}
    extra = (pad_to or n) - n
    if extra > 0:
        first = int(lengths[0].sum())
        sequences = {k: np.concatenate([v, np.tile(v[:first], extra)])
                     for k, v in sequences.items()}
        lengths = np.concatenate([lengths, np.repeat(lengths[:1], extra, axis=0)])
        per_example = {k: np.concatenate([v, np.repeat(v[:1], extra, axis=0)])
                       for k, v in per_example.items()}
        per_example["example_index"][n:] = -1
        per_example["is_real_example"][n:] = 0.0
    ragged = {k: tf.RaggedTensor.from_row_lengths(v.astype(np.int32), lengths.reshape(-1))
              for k, v in sequences.items()}
    if lengths.ndim == 2:
        ragged = {k: tf.RaggedTensor.from_uniform_row_length(v, lengths.shape[1])
                  for k, v in ragged.items()}
    return ragged, per_example


def _shuffled_epochs(columns, n, seed, pipelines, pipeline_id):
    """This pipeline's share of the examples, endlessly, each epoch in a new order drawn from
    (seed, epoch). Examples are gathered by index, so an iterator checkpoint holds positions,
    not a shuffle buffer of the whole data set."""
    share = tf.range(pipeline_id, n, pipelines, dtype=tf.int64)

    @tf.autograph.experimental.do_not_convert
    def epoch(e):
        key = tf.stack([tf.constant(seed, tf.int64), e])
        return tf.data.Dataset.from_tensor_slices(
            tf.random.experimental.stateless_shuffle(share, key))

    @tf.autograph.experimental.do_not_convert
    def example(i):
        return tf.nest.map_structure(lambda column: tf.gather(column, i), columns)

    return tf.data.Dataset.range(2**62).flat_map(epoch).map(example)


@tf.autograph.experimental.do_not_convert
def _merge(sequences, per_example):
    out = dict(per_example)
    mask = tf.ones_like(sequences["input_word_ids"])
    if isinstance(mask, tf.RaggedTensor):  # choices: pad each example to its longest choice
        sequences = {k: v.to_tensor() for k, v in sequences.items()}
        mask = mask.to_tensor()
    out.update(sequences)
    out["input_mask"] = mask
    return out


def _round_up_fn(multiple, max_seq_length):
    """Pads a batch's sequence axis up to a multiple (capped at max_seq_length) with zeros."""
    @tf.autograph.experimental.do_not_convert
    def fn(batch):
        length = tf.shape(batch["input_word_ids"])[-1]
        target = tf.minimum((length + multiple - 1) // multiple * multiple, max_seq_length)
        out = {}
        for k, v in batch.items():
            if k in SEQUENCE_KEYS or k == "input_mask":
                v = tf.pad(v, [[0, 0]] * (v.shape.rank - 1) + [[0, target - length]])
            out[k] = v
        return out
    return fn


def make_dataset(features, global_batch_size, max_seq_length, *, is_training,
                 input_context=None, padding="bucket", pad_to_multiple_of=16, seed=12345):
    """Per-replica batches for Trainer.train / predict.

    Training: shuffled, repeated, full batches; with padding="bucket" grouped by length.
    Eval/predict: every example once, in order, the last batches filled with weight-0 copies.
    Sequences are padded per batch (rounded up to `pad_to_multiple_of`), or to max_seq_length
    with padding="max_length".
    """
    if padding not in PADDINGS:
        raise ValueError(f"--padding={padding!r}: use one of {', '.join(PADDINGS)}")
    if int(features["lengths"].max()) > max_seq_length:
        raise ValueError(f"features hold sequences of {int(features['lengths'].max())} tokens, "
                         f"longer than max_seq_length={max_seq_length}")
    replicas = input_context.num_replicas_in_sync if input_context else 1
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    batch = global_batch_size // replicas
    n = num_examples(features)
    pad_to = None if is_training else math.ceil(n / global_batch_size) * global_batch_size
    columns = _columns(features, pad_to)
    if is_training:
        dataset = _shuffled_epochs(columns, n, seed, pipelines, pipeline_id).map(_merge)
    else:
        dataset = tf.data.Dataset.from_tensor_slices(columns).map(_merge)
    padded_length = max_seq_length if padding == "max_length" else None
    shapes = {k: spec.shape[:-1].as_list() + [padded_length]
              if k in SEQUENCE_KEYS or k == "input_mask" else spec.shape.as_list()
              for k, spec in dataset.element_spec.items()}
    if is_training:
        if padding == "bucket":
            m = pad_to_multiple_of
            boundaries = list(range(m + 1, max_seq_length + 1, m))
            dataset = dataset.bucket_by_sequence_length(
                lambda f: tf.shape(f["input_word_ids"])[-1], boundaries,
                [batch] * (len(boundaries) + 1), padded_shapes=shapes, drop_remainder=True)
        else:
            dataset = dataset.padded_batch(batch, padded_shapes=shapes, drop_remainder=True)
    else:
        dataset = dataset.padded_batch(batch, padded_shapes=shapes, drop_remainder=True)
        if pipelines > 1:
            dataset = dataset.shard(pipelines, pipeline_id)
    if padding != "max_length":
        dataset = dataset.map(_round_up_fn(pad_to_multiple_of, max_seq_length))
    return dataset.prefetch(tf.data.AUTOTUNE)


def real_outputs(outputs):
    """Trainer.predict outputs without the filler examples, sorted by example_index."""
    keep = outputs["is_real_example"] > 0
    order = np.argsort(outputs["example_index"][keep], kind="stable")
    return {k: v[keep][order] for k, v in outputs.items()}
