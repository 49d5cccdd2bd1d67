"""Text → pretraining TFRecords (MLM + SOP): corpus reading, shards built in parallel.

Input: one sentence per line, blank lines between documents. Each input file is one shard,
processed on its own (memory bounded by one shard) into its own output file, written atomically.
"""

import contextlib
import ctypes
import dataclasses
import glob
import multiprocessing
import os
import random
import signal
import threading
import time

import numpy as np
from absl import logging

from albert_tf.outputs import DISK_FULL_ERRNOS, DiskFull, OutputRefused, check_output_files
from albert_tf.tokenization.loader import tokenizer_from_flags

PR_SET_PDEATHSIG = 1  # prctl(2)
BATCH_SIZE = 2048  # instances masked and serialized together; fixed so output never depends on it


class InputError(ValueError):
    """A user mistake in the inputs or flags, reported without a traceback."""


def expand_globs(patterns):
    """Files matching comma-separated globs, sorted per pattern, without duplicates."""
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files = []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        matches = sorted(m for m in glob.glob(pattern) if os.path.isfile(m))
        if not matches and os.path.isdir(pattern):
            raise InputError(f"--input_file={pattern} is a directory: give its files "
                             f"({os.path.join(pattern, '*.txt')!r}, say)")
        if not matches:
            raise InputError(f"No input file matches {pattern!r}")
        files.extend(m for m in matches if m not in files)
    if not files:
        raise InputError("No input files given")
    return files


def output_paths(input_files, output_file):
    """Output file(s) per input shard: a list of lists, aligned with `input_files`.

    One output name and one input: that name. One output name and N inputs:
    `<name>-00000-of-0000N` per input. N names and N inputs: one each. One input and M names:
    instances round-robin across the M files, as in the original.
    """
    names = [o.strip() for o in output_file.split(",") if o.strip()]
    n = len(input_files)
    if not names:
        raise InputError("--output_file is empty")
    if n == 1:
        return [names]
    if len(names) == 1:
        return [[f"{names[0]}-{i:05d}-of-{n:05d}"] for i in range(n)]
    if len(names) == n:
        return [[name] for name in names]
    raise InputError(f"{n} input files and {len(names)} output files: give one output name "
                     f"(shards are suffixed -NNNNN-of-{n:05d}) or exactly one per input file")


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    spm_model_file: str = None  # SentencePiece; or
    vocab_file: str = None      # WordPiece (the original's rules for each)
    do_lower_case: bool = True
    do_whole_word_mask: bool = True
    do_permutation: bool = False
    favor_shorter_ngram: bool = True
    random_next_sentence: bool = False
    sop_random_negatives: bool = True
    max_seq_length: int = 512
    ngram: int = 3
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 40
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1

    def validate(self):
        if self.max_seq_length < 5:
            raise InputError(f"--max_seq_length={self.max_seq_length} is too small: an instance "
                             "needs [CLS], [SEP], [SEP] and at least one token per segment (>= 5)")
        if self.max_predictions_per_seq < 1:
            raise InputError(
                f"--max_predictions_per_seq={self.max_predictions_per_seq} must be >= 1")
        if self.ngram < 1:
            raise InputError(f"--ngram={self.ngram} must be >= 1")
        if self.dupe_factor < 1:
            raise InputError(f"--dupe_factor={self.dupe_factor} must be >= 1")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise InputError(f"--short_seq_prob={self.short_seq_prob} must be within [0, 1]")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise InputError(f"--masked_lm_prob={self.masked_lm_prob} must be within (0, 1]"
                             + (": 0 masks no token, so the records would teach no MLM"
                                if self.masked_lm_prob == 0 else ""))


def _seed(*parts):
    """A 64-bit seed derived from the run's seed and a shard/dupe/purpose index."""
    return np.random.SeedSequence([p & 0xFFFFFFFFFFFFFFFF for p in parts])


def empty_input(path, blank=False):
    return (f"Input file {path} {'holds only blank lines' if blank else 'is empty'}: remove it, "
            f"or give --input_file the files that hold text (a comma-separated list of files or "
            f"globs)")


GZIP_MAGIC = b"\x1f\x8b"


def gzip_input(path):
    return (f"Input file {path} is gzip-compressed; the inputs are plain UTF-8 text: decompress "
            f"it first (gunzip)")


def check_input_files(paths):
    """Before anything is built from them: no local input is empty or gzip-compressed (the
    text itself is checked as it is read: read_lines)."""
    for path in (p for p in paths if "://" not in p):
        if os.path.getsize(path) == 0:
            raise InputError(empty_input(path))
        with open(path, "rb") as f:
            if f.read(len(GZIP_MAGIC)) == GZIP_MAGIC:
                raise InputError(gzip_input(path))


def read_lines(path):
    """Lines of a UTF-8 text file (universal newlines); clear errors if empty or not UTF-8."""
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise InputError(empty_input(path, blank=bool(raw)))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path}:{line}: not valid UTF-8 ({e.reason}, byte "
                         f"{raw[e.start:e.start + 1]!r} at offset {e.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def read_corpus(path, tokenizer, chunk_lines=20000):
    """Tokenizes one text file into a `Corpus` (documents split at blank lines) with a
    `FullTokenizer`, reading lines as the original builder does for its kind."""
    from albert_tf.data.pretraining import Corpus

    lines = read_lines(path)
    token_chunks, sentence_lengths, doc_sizes = [], [], [0]
    for first in range(0, len(lines), chunk_lines):  # bounded lists of Python ints
        chunk = [tokenizer.prepare_line(line) for line in lines[first:first + chunk_lines]]
        ids = iter(tokenizer.encode_lines([line for line in chunk if line]))
        flat = []
        for line in chunk:
            if not line:
                if doc_sizes[-1]:
                    doc_sizes.append(0)
                continue
            line_ids = next(ids)
            if line_ids:
                flat.extend(line_ids)
                sentence_lengths.append(len(line_ids))
                doc_sizes[-1] += 1
        token_chunks.append(np.array(flat, dtype=np.int32))
    del lines
    doc_sizes = [d for d in doc_sizes if d]
    if not doc_sizes:
        raise InputError(f"Input file {path} has no text that tokenizes to any piece")
    tokens = np.concatenate(token_chunks)
    return Corpus(tokens, tokenizer.start_table[tokens],
                  np.concatenate([[0], np.cumsum(sentence_lengths)]).astype(np.int64),
                  np.concatenate([[0], np.cumsum(doc_sizes)]).astype(np.int64))


def tokenizer_and_special_ids(options):
    """(FullTokenizer, special ids) for --spm_model_file or --vocab_file."""
    try:
        tokenizer = tokenizer_from_flags(options.spm_model_file, options.vocab_file,
                                         options.do_lower_case)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(str(e)) from None
    return tokenizer, tokenizer.special_ids()


def build_shard(shard_index, input_path, outputs, options):
    """Writes the records of one input file; returns (instances, text bytes, seconds)."""
    from albert_tf.data import pretraining, records

    start = time.time()
    tokenizer, ids = tokenizer_and_special_ids(options)
    corpus = read_corpus(input_path, tokenizer)
    text_bytes = os.path.getsize(input_path)
    logging.info("Shard %d: %s, %d documents, %d sentences, %d tokens (%.1f s)", shard_index,
                 input_path, corpus.num_documents, len(corpus.sentence_offsets) - 1,
                 len(corpus.tokens), time.time() - start)
    _warn_of_long_lines(shard_index, input_path, corpus, options.max_seq_length)
    _warn_of_unknown_pieces(shard_index, input_path, corpus, ids["<unk>"], tokenizer)

    document_order = list(range(corpus.num_documents))
    random.Random(int(_seed(options.random_seed, shard_index, 0).generate_state(1)[0])).shuffle(
        document_order)
    masking = pretraining.MaskingOptions(
        vocab_size=len(tokenizer), mask_id=ids["[MASK]"],
        masked_lm_prob=options.masked_lm_prob,
        max_predictions_per_seq=options.max_predictions_per_seq, ngram=options.ngram,
        favor_shorter_ngram=options.favor_shorter_ngram,
        do_whole_word_mask=options.do_whole_word_mask, do_permutation=options.do_permutation)
    serializer = records.ExampleSerializer({
        **records.pretraining_feature_lengths(options.max_seq_length,
                                              options.max_predictions_per_seq,
                                              options.do_permutation),
        records.VOCAB_FINGERPRINT: ("int64", 1)})
    fingerprint = tokenizer.fingerprint()

    writers, total = [], 0
    try:
        writers = [records.AtomicTFRecordWriter(p) for p in outputs]
        for dupe in range(options.dupe_factor):
            for features in _dupe_batches(corpus, document_order, options, shard_index, dupe,
                                          ids, masking):
                features[records.VOCAB_FINGERPRINT] = np.full(
                    (len(features["input_ids"]), 1), fingerprint, np.int64)
                if shard_index == 0 and total == 0:
                    _log_example(tokenizer, features)
                total = _write_batch(writers, serializer.serialize_batch(features), total)
            logging.info("Shard %d: dupe %d/%d, %d instances so far, %.2f MB/s of text copies",
                         shard_index, dupe + 1, options.dupe_factor, total,
                         text_bytes * (dupe + 1) / 1e6 / (time.time() - start))
        for writer in writers:
            writer.close()
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    seconds = time.time() - start
    logging.info("Shard %d: wrote %d instances to %s in %.2f s", shard_index, total,
                 ",".join(outputs), seconds)
    return total, text_bytes, seconds


def _warn_of_long_lines(shard_index, input_path, corpus, max_seq_length):
    """A line longer than a sequence holds is one segment, cut to fit (as the original did):
    a corpus of a paragraph or a document a line loses most of its text, said here when that
    is more than 1% of the shard's tokens."""
    room = max_seq_length - 3  # [CLS] and two [SEP]
    past = np.diff(np.asarray(corpus.sentence_offsets)) - room
    lost, total = int(past[past > 0].sum()), len(corpus.tokens)
    if total and lost > 0.01 * total:
        logging.warning("Shard %d: %s has %d lines longer than a sequence holds (%d tokens: "
                        "--max_seq_length less 3): at most that much of each reaches a record, "
                        "%d of its %d tokens (%.1f%%) none; the builder reads a sentence a line "
                        "(a blank line between documents): split longer lines into sentences, "
                        "or give a longer --max_seq_length",
                        shard_index, input_path, int((past > 0).sum()), room, lost, total,
                        100 * lost / total)


def _warn_of_unknown_pieces(shard_index, input_path, corpus, unk_id, tokenizer):
    """More than 1% of a shard's tokens unknown: a vocabulary made for other text (another
    language or script, or one that lacks this text's punctuation)."""
    unknown, total = int(np.count_nonzero(np.asarray(corpus.tokens) == unk_id)), len(corpus.tokens)
    if total and unknown > 0.01 * total:
        cased = not tokenizer.do_lower_case and tokenizer.uncased
        logging.warning("Shard %d: %d of the %d tokens of %s (%.1f%%) are the unknown piece %s "
                        "of %s: the vocabulary lacks characters this text has, and every one "
                        "of them trains as that one piece; %s", shard_index, unknown, total,
                        input_path, 100 * unknown / total,
                        tokenizer.convert_ids_to_tokens([unk_id])[0], tokenizer.asset_file,
                        "it has no capital letter, and --do_lower_case=False keeps the text's"
                        if cased else "is it the vocabulary for this text?")


def _dupe_batches(corpus, document_order, options, shard_index, dupe, ids, masking):
    """Feature batches (BATCH_SIZE instances) of one pass over a shard, with its own masks."""
    from albert_tf.data import pretraining

    seeds = _seed(options.random_seed, shard_index, dupe + 1)
    rng = random.Random(int(seeds.generate_state(1)[0]))
    np_rng = np.random.default_rng(seeds)
    a0, a1, b0, b1, label = pretraining.segment_pairs(
        corpus, document_order, options.max_seq_length, options.short_seq_prob, rng,
        options.random_next_sentence, options.sop_random_negatives)
    a_start, a_len, b_start, b_len = pretraining.truncate_pairs(
        a0, a1, b0, b1, options.max_seq_length - 3, np_rng)
    order = np_rng.permutation(len(label))
    for s in range(0, len(order), BATCH_SIZE):
        idx = order[s:s + BATCH_SIZE]
        yield pretraining.build_features(
            corpus, (a_start[idx], a_len[idx], b_start[idx], b_len[idx], label[idx]),
            options.max_seq_length, ids["[CLS]"], ids["[SEP]"], masking, np_rng)


def _write_batch(writers, batch, total):
    """Writes serialized records (round-robin across several outputs, as the original);
    returns the new total."""
    for w, writer in enumerate(writers):
        if len(writers) == 1:
            writer.write_batch(batch)
        else:
            first = (w - total) % len(writers)
            writer.write_batch(batch.take(np.arange(first, len(batch), len(writers))))
    return total + len(batch)


def _log_example(tokenizer, features):
    pieces = tokenizer.convert_ids_to_tokens(
        [i for i, m in zip(features["input_ids"][0], features["input_mask"][0]) if m])
    logging.info("Example instance: %s", " ".join(pieces))
    for name, values in features.items():
        logging.info("  %s: %s", name, " ".join(str(v) for v in values[0].tolist()))


def _build_shard_star(args):
    return build_shard(*args)


class Stopped(Exception):
    """The build was stopped by SIGINT or SIGTERM; the exit status is 128 + the signal."""

    def __init__(self, message, exit_status):
        super().__init__(message)
        self.exit_status = exit_status
        self.signal_name = message


def _raise_stopped(signum, frame):
    raise Stopped(signal.Signals(signum).name, 128 + signum)


@contextlib.contextmanager
def _signals_stop():
    """SIGINT and SIGTERM raise Stopped in the main process. Its workers ignore SIGINT (Ctrl-C
    reaches the whole process group): the main process terminates them itself."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _worker_start(parent):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # how the main process ends a worker
    _die_with(parent)


def _die_with(parent):
    """On Linux, a worker is killed when the main process dies, even by a SIGKILL it could not
    answer: left running, it would finish and publish its shard beside a rerun's."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the main process's handlers stop them
        return
    if os.getppid() != parent:  # it died before the request was made
        os._exit(1)


def _run_jobs(jobs, workers):
    """build_shard for every job, in `workers` processes; when the main process stops, its
    workers are terminated at once rather than left to finish their shards."""
    if workers == 1:
        return [build_shard(*job) for job in jobs]
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_worker_start,
                                                    initargs=(os.getpid(),))
    try:
        results = pool.map_async(_build_shard_star, jobs, chunksize=1).get()
        pool.close()
        return results
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _remove_outputs(outputs, start):
    """Removes every output file of the build and its temporary file; returns how many
    shards had been finished since `start`."""
    done = sum(all(os.path.exists(o) and os.path.getmtime(o) >= start for o in outs)
               for outs in outputs)
    for path in (o for outs in outputs for o in outs):
        for name in (path, path + ".incomplete"):
            if os.path.exists(name):
                os.remove(name)
    return done


def _remote_open(remote_fs):
    """Opens a URL for reading with `remote_fs` (Beam's filesystems) or tf.io.gfile."""
    if remote_fs is not None:
        return remote_fs.open
    import tensorflow as tf  # only for URLs, as in outputs._fs: local builds stay free of it
    return lambda path: tf.io.gfile.GFile(path, "rb")


def earlier_build(output_file, outputs):
    """The local record files of an earlier build under the same --output_file names that this
    build does not write (another count's `<name>-NNNNN-of-MMMMM` shards, or `<name>` beside new
    shards): a glob over the name would read them with this build's."""
    new = {o for outs in outputs for o in outs}
    digits = "[0-9]" * 5
    found = []
    for name in (o.strip() for o in output_file.split(",") if o.strip() and "://" not in o):
        found += sorted(glob.glob(f"{glob.escape(name)}-{digits}-of-{digits}"))
        found += [name] if os.path.isfile(name) else []
    return [path for path in found if path not in new]


def remove_earlier_build(stale):
    for path in stale:
        os.remove(path)
    if stale:
        logging.info("Removed the %d record files of an earlier build (%s%s), which this one "
                     "replaces (--overwrite)", len(stale), ", ".join(stale[:3]),
                     ", ..." if len(stale) > 3 else "")


def check_build(input_file, output_file, options, overwrite=False, match=expand_globs,
                remote_fs=None):
    """The checks before any shard is built (flags, vocabulary, inputs, outputs); returns the
    input files and their output files. Existing outputs are replaced only with `overwrite`,
    and only when they are TFRecord files. `match` expands --input_file and
    `remote_fs` looks at URLs (Beam's filesystems; default tf.io.gfile)."""
    from albert_tf.data.records import is_tfrecord_file

    options.validate()
    tokenizer_and_special_ids(options)
    inputs = match(input_file)
    check_input_files(inputs)
    outputs = output_paths(inputs, output_file)
    check_output_files([o for outs in outputs for o in outs], "output_file",
                       what="a TFRecord file", overwrite=overwrite, remote_fs=remote_fs,
                       is_kind=lambda path: is_tfrecord_file(
                           path, _remote_open(remote_fs) if "://" in path else None),
                       inputs={"input_file": inputs, "spm_model_file": options.spm_model_file,
                               "vocab_file": options.vocab_file})
    stale = earlier_build(output_file, outputs)
    if stale and not overwrite:
        raise OutputRefused(
            f"--output_file={output_file}: {len(stale)} record files of an earlier build of it are "
            f"there ({', '.join(stale[:3])}{', ...' if len(stale) > 3 else ''}), which a glob "
            f"over it would read with this build's: pass --overwrite to replace that build, or "
            f"give --output_file a new name")
    check_output_files(stale, "output_file", what="a TFRecord file", overwrite=True,
                       is_kind=is_tfrecord_file)
    return inputs, outputs


def build(input_file, output_file, options, num_workers=1, overwrite=False):
    """Checks the inputs, then builds every shard (in parallel with `num_workers` processes)."""
    inputs, outputs = check_build(input_file, output_file, options, overwrite)
    if num_workers < 1:
        raise InputError(f"--num_workers={num_workers} must be >= 1")
    remove_earlier_build(earlier_build(output_file, outputs))
    jobs = [(i, path, outs, options) for i, (path, outs) in enumerate(zip(inputs, outputs))]
    workers = min(num_workers, len(jobs))
    logging.info("Building %d shard(s) with %d worker(s)", len(jobs), workers)
    start = time.time()
    try:
        with _signals_stop():
            results = _run_jobs(jobs, workers)
    except Stopped as stop:
        done = _remove_outputs(outputs, start)
        raise Stopped(f"stopped: {stop.signal_name} after {done} of {len(jobs)} shards; removed "
                      f"this build's output files, so that no partial set is left. Rerun the "
                      f"same command to build them", stop.exit_status) from None
    except InputError as e:
        done = _remove_outputs(outputs, start)
        raise InputError(f"{e}; removed this build's output files ({done} of {len(jobs)} shards "
                         f"were written), so that no partial set is left") from None
    except OSError as e:
        if e.errno not in DISK_FULL_ERRNOS:
            raise
        _remove_outputs(outputs, start)
        raise DiskFull(f"no space left on the device while writing {e.filename or 'the records'};"
                       f" removed this build's output files, so that no partial set is left. "
                       f"Free space, then rerun the same command") from None
    seconds = time.time() - start
    instances = sum(r[0] for r in results)
    text_mb = sum(r[1] for r in results) / 1e6
    logging.info("Wrote %d instances from %.2f MB of text (x%d copies) in %.2f s: %.2f MB/s of "
                 "text copies", instances, text_mb, options.dupe_factor, seconds,
                 text_mb * options.dupe_factor / max(seconds, 1e-9))
    return [o for outs in outputs for o in outs]
