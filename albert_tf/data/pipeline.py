"""tf.data input pipelines: pretraining TFRecords → batches of model features."""

import random
import re

import tensorflow as tf

from albert_tf.data.dynamic_masking import batch_seed, dynamic_mask, restore_original_tokens
from albert_tf.data.pretraining import MaskingOptions
from albert_tf.data.records import (VOCAB_FINGERPRINT, pretraining_feature_lengths,
                                    pretraining_feature_spec, short_tf_message)
from albert_tf.data.service import read_from_service, shard_for_workers

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
            shards = tf.io.gfile.glob(pattern.strip() + "-*-of-*")
            hint = (f" (the builder wrote {len(shards)} shards of it: --{flag}="
                    f"'{pattern.strip()}-*')" if shards else "")
            raise FileNotFoundError(f"--{flag}: no file matches {pattern!r}{hint}")
        if matched != [pattern.strip()]:  # a glob: it must not take half a set
            _check_whole_sets(sorted(matched), pattern.strip(), flag)
        folders = [path for path in matched if tf.io.gfile.isdir(path)]
        if folders:
            raise ValueError(f"--{flag}={pattern.strip()} names the directory {folders[0]}: "
                             f"give its record files ('{folders[0].rstrip('/')}/*', say)")
        files.extend(matched)
    if not files:
        raise ValueError(f"--{flag} is empty")
    return sorted(set(files))


_SHARD = re.compile(r"^(.*)-(\d{5})-of-(\d{5})$")


def _check_whole_sets(matched, pattern, flag):
    """A glob that matches part of a `<name>-NNNNN-of-MMMMM` set (a build that was stopped or
    is still running), the sets of two builds of one name, or a file the builder has not
    finished, is refused."""
    unfinished = [m for m in matched if m.endswith(".incomplete")]
    if unfinished:
        raise ValueError(f"--{flag}={pattern} matches {unfinished[0]}, a record file that "
                         f"create_pretraining_data has not finished: is it still running?")
    sets = {}
    for path in matched:
        m = _SHARD.match(path)
        if m:
            sets.setdefault((m.group(1), int(m.group(3))), set()).add(int(m.group(2)))
    totals = {}
    for stem, total in sets:
        totals.setdefault(stem, []).append(total)
    for stem, counts in sorted(totals.items()):
        if len(counts) > 1:
            raise ValueError(
                f"--{flag}={pattern} matches the shards of {len(counts)} builds of {stem} ("
                f"{', '.join(f'-of-{c:05d}' for c in sorted(counts))}): their text would be "
                f"trained on twice. Remove the older set (create_pretraining_data --overwrite "
                f"replaces it), or name the files to train on")
    for (stem, total), found in sorted(sets.items()):
        missing = sorted(set(range(total)) - found)
        if missing:
            raise ValueError(
                f"--{flag}={pattern} matches {len(found)} of the {total} shards of "
                f"{stem}-?????-of-{total:05d} (missing {', '.join(f'{i:05d}' for i in missing[:5])}"
                f"{', …' if len(missing) > 5 else ''}): was the build stopped? Rebuild the set, "
                f"or name the files to train on")


def check_records(paths, max_seq_length, max_predictions_per_seq, vocab_size=None, flag=None):
    """The first record of every file: its lengths against the flags, its token ids against the
    config's vocab_size (every batch is checked again while training). Returns {path: the
    vocabulary fingerprint its records carry, or None (the original's builder writes none)}."""
    fingerprints = {}
    for path in paths:
        example = check_record_lengths(path, max_seq_length, max_predictions_per_seq)
        top = _top_id(example)
        if vocab_size is not None and top >= vocab_size:
            where = f"--{flag}: " if flag else ""
            raise ValueError(f"{where}{path} holds token id {top} but the config's vocab_size is "
                             f"{vocab_size}: were the records built with another vocabulary?")
        carried = example.features.feature.get(VOCAB_FINGERPRINT)
        fingerprints[path] = carried.int64_list.value[0] if carried is not None else None
    return fingerprints


def records_casing(fingerprints, tokenizer, flag="input_file"):
    """The lower-casing the records were built with, read from the fingerprints
    create_pretraining_data writes (None where they carry none); refuses records built with
    another vocabulary than `tokenizer`'s, or files built with different ones."""
    carried = {path: f for path, f in fingerprints.items() if f is not None}
    if not carried:
        return None
    casing = {tokenizer.fingerprint(lower): lower for lower in (True, False)}
    others = [path for path, f in carried.items() if f not in casing]
    if others:
        raise ValueError(
            f"--{flag}: {others[0]}{f' and {len(others) - 1} more' if len(others) > 1 else ''} "
            f"{'was' if len(others) == 1 else 'were'} built with another vocabulary than "
            f"{tokenizer.asset_file} (create_pretraining_data wrote its fingerprint into the "
            f"records): pretraining would teach this vocabulary's pieces the other's ids. Pass "
            f"the --spm_model_file or --vocab_file the records were built with, or rebuild them")
    found = {casing[f] for f in carried.values()}
    if len(found) > 1:
        cased = sorted(path for path, f in carried.items() if not casing[f])
        raise ValueError(f"--{flag}: the files were built with different --do_lower_case: "
                         f"{', '.join(cased[:3])} cased, the others lower-cased; rebuild them "
                         f"with one setting")
    return found.pop()


def count_records(paths, limit=None):
    """How many records the files hold, counting no further than `limit` (None: all); None
    when a record cannot be read (reading them names the file)."""
    ds = tf.data.TFRecordDataset(paths)
    if limit is not None:
        ds = ds.take(limit)
    try:
        return int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))
    except tf.errors.DataLossError:
        return None


def swapped_share(paths, count):
    """The share of the first `count` records of `paths` whose sentence order is swapped
    (next_sentence_labels 1)."""
    spec = {"next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
    labels = tf.data.TFRecordDataset(paths).take(count).map(
        lambda record: tf.io.parse_single_example(record, spec)["next_sentence_labels"][0])
    return float(labels.reduce(tf.constant(0, tf.int64), lambda total, x: total + x)) / count


def compression_hint(path):
    """A hint when `path` is a compressed file (gzip or zlib) rather than plain TFRecords."""
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b":
        return (": it is gzip-compressed, and pretraining reads plain TFRecords as the builder "
                "and the original write them; decompress it first (gunzip)")
    if len(head) == 2 and head[0] == 0x78 and (head[0] * 256 + head[1]) % 31 == 0:
        return (": it looks zlib-compressed, and pretraining reads plain TFRecords as the "
                "builder and the original write them; decompress it first")
    return ""


def check_record_lengths(path, max_seq_length, max_predictions_per_seq):
    """Reads the first record of `path`, checks its lengths against the flags; returns it."""
    expected = pretraining_feature_lengths(max_seq_length, max_predictions_per_seq)
    try:
        raw = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.DataLossError as e:
        raise ValueError(f"{path} is not a TFRecord file ({short_tf_message(e.message)})"
                         f"{compression_hint(path)}") from None
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
    return example


def pretraining_dataset(input_patterns, batch_size, max_seq_length, max_predictions_per_seq,
                        is_training=True, input_context=None, seed=None, shuffle_buffer=1000,
                        flag="input_file", dynamic_masking=False, vocab_size=None,
                        masked_lm_prob=0.15, ngram=3, favor_shorter_ngram=True, mask_id=4,
                        data_service=None, start_batch=0, data_service_timeout=600):
    """Batches of pretraining features under the model's input names, int32 ids.

    Training: files are sharded per input pipeline (worker), shuffled, read interleaved,
    repeated, shuffled again and batched with drop_remainder; eval reads each record once.
    With `dynamic_masking` every batch gets new masks (the original n-gram rule, keyed by
    `seed`, the worker and the batch index) instead of the records' static ones. With
    `data_service` (a dispatcher's host:port; training only) the parsing and masking run on
    tf.data service workers, starting at batch `start_batch` (see `data.service`), waiting up
    to `data_service_timeout` seconds for the workers.
    """
    if data_service and not is_training:
        raise ValueError("tf.data service feeds training only; evaluation reads in-process")
    files = expand_file_patterns(input_patterns, flag)
    spec = _record_spec(files[0], max_seq_length, max_predictions_per_seq, dynamic_masking)
    if dynamic_masking:
        options = _masking_options(vocab_size, mask_id, masked_lm_prob, max_predictions_per_seq,
                                   ngram, favor_shorter_ngram)
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)

    pipelines = input_context.num_input_pipelines if input_context else 1
    index = input_context.input_pipeline_id if input_context else 0
    ds = tf.data.Dataset.from_tensor_slices(files)
    shard_files = pipelines > 1 and len(files) >= pipelines
    if shard_files:
        ds = ds.shard(pipelines, index)
    if is_training:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    # Deterministic order (tf.data's default), so that a resumed run reads what the killed one
    # would have read (bench/bench_resume.py measures the cost).
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)),
                       num_parallel_calls=tf.data.AUTOTUNE)
    if pipelines > 1 and not shard_files:
        ds = ds.shard(pipelines, index)
    if is_training:
        ds = ds.shuffle(shuffle_buffer, seed=seed)

    @tf.autograph.experimental.do_not_convert
    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        if vocab_size:
            _assert_in_vocabulary(parsed, vocab_size)
        return {RECORD_TO_MODEL[name]: (tf.cast(value, tf.int32) if value.dtype == tf.int64
                                        else value)
                for name, value in parsed.items()}

    @tf.autograph.experimental.do_not_convert
    def parse_and_mask(step, serialized):
        batch = restore_original_tokens(parse(serialized))
        return dynamic_mask(batch, batch_seed(seed, index, step), options)

    ds = ds.batch(batch_size, drop_remainder=True)
    if data_service:
        ds = shard_for_workers(ds.enumerate().skip(start_batch))
        make = parse_and_mask if dynamic_masking else (lambda step, serialized: parse(serialized))
        ds = ds.map(tf.autograph.experimental.do_not_convert(
            lambda step, serialized: (step, make(step, serialized))),
            num_parallel_calls=tf.data.AUTOTUNE)
        return read_from_service(ds, data_service, start_batch, data_service_timeout)
    if start_batch:
        raise ValueError("start_batch needs data_service (in-process inputs resume from their "
                         "saved position)")
    if dynamic_masking:
        ds = ds.enumerate().map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


# In the error a batch with a token id >= vocab_size raises (the trainer then names the file).
OUT_OF_VOCABULARY = "records hold token ids at or above the vocab_size of the config"


def _assert_in_vocabulary(parsed, vocab_size):
    top = tf.maximum(tf.reduce_max(parsed["input_ids"]), tf.reduce_max(parsed["masked_lm_ids"]))
    tf.debugging.assert_less(top, tf.constant(vocab_size, top.dtype), message=OUT_OF_VOCABULARY)


def find_out_of_vocabulary(paths, vocab_size):
    """(path, record index, token id) of the first record with an id >= vocab_size, else None.
    Reads every file: for error reports."""
    for path in paths:
        for index, raw in enumerate(tf.data.TFRecordDataset(path)):
            top = _top_id(tf.train.Example.FromString(raw.numpy()))
            if top >= vocab_size:
                return path, index, top
    return None


def _top_id(example):
    """The largest token id of a pretraining record (its inputs and MLM labels)."""
    features = example.features.feature
    return max(max(features[n].int64_list.value, default=0)
               for n in ("input_ids", "masked_lm_ids") if n in features)


def _record_spec(first_file, max_seq_length, max_predictions_per_seq, dynamic_masking):
    """The parsing spec; `token_boundary` only where the records have it (dynamic masking
    needs it)."""
    check_record_lengths(first_file, max_seq_length, max_predictions_per_seq)
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    boundary = spec.pop("token_boundary")
    first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(first_file))).numpy())
    if "token_boundary" in first.features.feature:
        spec["token_boundary"] = boundary
    elif dynamic_masking:
        raise ValueError(f"{first_file}: records have no 'token_boundary', which "
                         f"--dynamic_masking needs; build them with "
                         f"albert_tf.create_pretraining_data")
    return spec


def _masking_options(vocab_size, mask_id, masked_lm_prob, max_predictions_per_seq, ngram,
                     favor_shorter_ngram):
    if not vocab_size:
        raise ValueError("dynamic masking needs vocab_size (the config's vocab_size)")
    if ngram < 1 or not 0 <= masked_lm_prob <= 1 or not 0 <= mask_id < vocab_size:
        raise ValueError(f"dynamic masking: need --ngram >= 1 (got {ngram}), "
                         f"0 <= --masked_lm_prob <= 1 (got {masked_lm_prob}) and "
                         f"0 <= --mask_token_id < vocab_size (got {mask_id}, {vocab_size})")
    return MaskingOptions(vocab_size=vocab_size, mask_id=mask_id, masked_lm_prob=masked_lm_prob,
                          max_predictions_per_seq=max_predictions_per_seq, ngram=ngram,
                          favor_shorter_ngram=favor_shorter_ngram)
