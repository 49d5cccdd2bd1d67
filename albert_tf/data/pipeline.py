"""tf.data input pipelines: pretraining TFRecords → batches of model features."""

import tensorflow as tf

from albert_tf.data.records import pretraining_feature_lengths, pretraining_feature_spec

# Record feature names (the original schema) → the model's input names (the TF-Hub names).
RECORD_TO_MODEL = {"input_ids": "input_word_ids", "input_mask": "input_mask",
                   "segment_ids": "input_type_ids", "token_boundary": "token_boundary",
                   "masked_lm_positions": "masked_lm_positions",
                   "masked_lm_ids": "masked_lm_ids", "masked_lm_weights": "masked_lm_weights",
                   "next_sentence_labels": "next_sentence_labels"}


def expand_file_patterns(patterns, flag="input_file"):
    """Comma-separated globs → sorted file list; a clear error when nothing matches."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    files = []
    for pattern in patterns:
        matched = tf.io.gfile.glob(pattern.strip())
        if not matched:
            raise FileNotFoundError(f"--{flag}: no file matches {pattern!r}")
        files.extend(matched)
    if not files:
        raise ValueError(f"--{flag} is empty")
    return sorted(set(files))


def check_record_lengths(path, max_seq_length, max_predictions_per_seq):
    """Reads the first record of `path` and checks its lengths against the flags."""
    expected = pretraining_feature_lengths(max_seq_length, max_predictions_per_seq)
    try:
        raw = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.DataLossError as e:
        raise ValueError(f"{path} is not a TFRecord file ({e.message})") from None
    if raw is None:
        raise ValueError(f"{path} holds no records")
    example = tf.train.Example.FromString(raw.numpy())
    features = example.features.feature
    for name, (_, length) in expected.items():
        if name not in features:
            if name == "token_boundary":
                continue  # older BERT-style records lack it; only dynamic masking needs it
            raise ValueError(f"{path}: records have no feature {name!r}; is it pretraining data "
                             f"from create_pretraining_data?")
        kind = features[name].WhichOneof("kind")
        got = len(getattr(features[name], kind).value)
        if got != length:
            flag = ("--max_seq_length" if length == max_seq_length
                    else "--max_predictions_per_seq")
            raise ValueError(f"{path}: feature {name!r} has length {got} but {flag} implies "
                             f"{length}; pass the values the data was built with")


def pretraining_dataset(input_patterns, batch_size, max_seq_length, max_predictions_per_seq,
                        is_training=True, input_context=None, seed=None, shuffle_buffer=1000,
                        flag="input_file"):
    """Batches of pretraining features under the model's input names, int32 ids.

    Training: files are sharded per input pipeline (worker), shuffled, read interleaved,
    repeated, shuffled again and batched with drop_remainder; eval reads each record once.
    """
    files = expand_file_patterns(input_patterns, flag)
    check_record_lengths(files[0], max_seq_length, max_predictions_per_seq)
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    spec.pop("token_boundary")
    first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(files[0]))).numpy())
    if "token_boundary" in first.features.feature:
        spec["token_boundary"] = pretraining_feature_spec(
            max_seq_length, max_predictions_per_seq)["token_boundary"]

    pipelines = input_context.num_input_pipelines if input_context else 1
    index = input_context.input_pipeline_id if input_context else 0
    ds = tf.data.Dataset.from_tensor_slices(files)
    shard_files = pipelines > 1 and len(files) >= pipelines
    if shard_files:
        ds = ds.shard(pipelines, index)
    if is_training:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=not is_training)
    if pipelines > 1 and not shard_files:
        ds = ds.shard(pipelines, index)
    if is_training:
        ds = ds.shuffle(shuffle_buffer, seed=seed)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        return {RECORD_TO_MODEL[name]: (tf.cast(value, tf.int32) if value.dtype == tf.int64
                                        else value)
                for name, value in parsed.items()}

    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)
