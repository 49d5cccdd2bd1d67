"""What exact resume costs: the deterministic input order, and saving / restoring the input
position beside each checkpoint.

    python bench/bench_resume.py --seq_length=512 --batch_size=64 --files=4 --seconds=3

Builds pretraining records from the bundled corpus (as bench_input.py), split into `--files`
files; times `pretraining_dataset` in training mode with tf.data's deterministic order (ours)
and with `deterministic=False` (the order the pipeline had before exact resume), alternating,
`--repeats` times each; then the size and the write / read time of the input state (the
iterator checkpoint) after some batches, for pretraining (static and dynamic masks) and for a
fine-tuning data set of `--examples` in-memory examples.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench_input import build_records, sequences_per_second  # noqa: E402


def split_records(files, workdir, parts, seq_length):
    records = [r.numpy() for f in files for r in tf.data.TFRecordDataset(f)]
    out = []
    for i in range(parts):
        path = os.path.join(workdir, f"split-{seq_length}-{i}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for record in records[i::parts]:
                writer.write(record)
        out.append(path)
    return out, len(records)


def pretraining(files, args, dynamic=False, deterministic=True):
    from albert_tf.data.pipeline import pretraining_dataset
    ds = pretraining_dataset(files, args.batch_size, args.seq_length, args.predictions,
                             is_training=True, seed=1, dynamic_masking=dynamic,
                             vocab_size=args.vocab_size)
    options = tf.data.Options()
    options.deterministic = deterministic
    return ds.with_options(options)


def state_cost(dataset, workdir, name, batches=20, repeats=3):
    """(MB on disk, write ms, read ms) of the iterator state after `batches` batches."""
    it = iter(dataset)
    for _ in range(batches):
        next(it)
    checkpoint = tf.train.Checkpoint(iterator=it)
    prefix = os.path.join(workdir, name)
    writes, reads = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        checkpoint.write(prefix)
        writes.append(time.perf_counter() - start)
        fresh = tf.train.Checkpoint(iterator=iter(dataset))
        start = time.perf_counter()
        fresh.read(prefix).assert_consumed()
        reads.append(time.perf_counter() - start)
    size = sum(os.path.getsize(os.path.join(workdir, f)) for f in os.listdir(workdir)
               if f.startswith(name + "."))
    return size / 2**20, 1000 * min(writes), 1000 * min(reads)


def finetuning_dataset(args):
    from albert_tf.data.features import make_dataset
    rng = np.random.default_rng(0)
    lengths = rng.integers(20, args.finetune_seq_length + 1, args.examples).astype(np.int32)
    features = {"input_word_ids": rng.integers(5, 30000, int(lengths.sum())).astype(np.int32),
                "input_type_ids": np.zeros(int(lengths.sum()), np.int8), "lengths": lengths,
                "label_ids": (np.arange(args.examples) % 2).astype(np.int32)}
    return make_dataset(features, 32, args.finetune_seq_length, is_training=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.path.join(ROOT, "data", "corpus", "*.txt"))
    parser.add_argument("--seq_length", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--examples", type=int, default=100000)
    parser.add_argument("--finetune_seq_length", type=int, default=128)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; tf {tf.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as workdir:
        built, _ = build_records(workdir, args.corpus, args.seq_length, args.predictions,
                                 args.vocab_size, 1)
        files, count = split_records(built, workdir, args.files, args.seq_length)
        print(f"{count} records of seq {args.seq_length} in {len(files)} files; batch "
              f"{args.batch_size}", flush=True)
        for dynamic in (False, True):
            rates = {True: [], False: []}
            for _ in range(args.repeats):
                for deterministic in (True, False):
                    rates[deterministic].append(sequences_per_second(pretraining(
                        files, args, dynamic, deterministic), args.batch_size, args.seconds))
            mode = "dynamic" if dynamic else "static"
            det, non = np.median(rates[True]), np.median(rates[False])
            print(f"pipeline {mode:7s}: deterministic {det:8.0f} seq/s, non-deterministic "
                  f"{non:8.0f} seq/s (medians of {args.repeats}); ratio {det / non:.3f}",
                  flush=True)
        for name, dataset in (("static", pretraining(files, args)),
                              ("dynamic", pretraining(files, args, dynamic=True)),
                              ("finetuning", finetuning_dataset(args))):
            size, write, read = state_cost(dataset, workdir, f"state-{name}")
            print(f"input state {name:10s}: {size:7.2f} MB, write {write:6.1f} ms, "
                  f"restore {read:6.1f} ms", flush=True)


if __name__ == "__main__":
    main()
