"""Input pipeline throughput (sequences/s), static and dynamic masking, against a training step.

    python bench/bench_input.py --seq_lengths=128,512 --batch_sizes=8,64 --seconds=3

Trains a SentencePiece model on the bundled corpus (data/corpus), builds records with
`albert_tf.create_pretraining_data` at each sequence length, reads them with
`pretraining_dataset` (training mode: shuffle, repeat, batch, prefetch) and counts the
sequences delivered per second. Then times ALBERT-base training steps (MLM + SOP, LAMB,
fp32 and bf16) at the same shapes, and prints pipeline / training ratios.
"""

import argparse
import glob
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import tensorflow as tf  # noqa: E402


def build_records(workdir, corpus, seq_length, predictions, vocab_size, dupe_factor):
    from albert_tf.data import build_records as cpd
    from albert_tf.data.vocab import train_sentencepiece

    model = os.path.join(workdir, "spm.model")
    if not os.path.exists(model):
        train_sentencepiece(corpus, os.path.join(workdir, "spm"), vocab_size)
    out = os.path.join(workdir, f"train-{seq_length}.tfrecord")
    cpd.build(corpus, out, cpd.BuildOptions(
        spm_model_file=model, max_seq_length=seq_length, max_predictions_per_seq=predictions,
        dupe_factor=dupe_factor))
    files = sorted(glob.glob(os.path.join(workdir, f"train-{seq_length}*")))
    count = sum(1 for f in files for _ in tf.data.TFRecordDataset(f))
    return files, count


def pipeline_rate(files, batch, seq_length, predictions, dynamic, seconds, vocab_size):
    from albert_tf.data.pipeline import pretraining_dataset

    ds = pretraining_dataset(files, batch, seq_length, predictions, is_training=True, seed=1,
                             dynamic_masking=dynamic, vocab_size=vocab_size)
    return sequences_per_second(ds, batch, seconds)


def sequences_per_second(dataset, batch, seconds):
    """Batches drawn for `seconds` after three warm-up batches, as sequences/s."""
    it = iter(dataset)
    for _ in range(3):
        next(it)
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        next(it)["input_word_ids"].numpy()
        n += 1
    return n * batch / (time.perf_counter() - start)


def training_rate(batch, seq_length, predictions, precision, steps):
    import bench_pretraining as bp

    step = bp.ours(bp.make_batch(batch, seq_length, predictions), precision)
    step()
    return batch / bp.time_steps(step, steps)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.path.join(ROOT, "data", "corpus", "*.txt"))
    parser.add_argument("--seq_lengths", default="128,512")
    parser.add_argument("--batch_sizes", default="8,64")
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--vocab_size", type=int, default=30000,
                        help="of the random tokens and the SentencePiece model (capped by it)")
    parser.add_argument("--dupe_factor", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed per configuration")
    parser.add_argument("--train_batch_size", type=int, default=8)
    parser.add_argument("--train_steps", type=int, default=2, help="0 skips the training step")
    parser.add_argument("--precisions", default="fp32,bf16")
    args = parser.parse_args()
    seqs = [int(s) for s in args.seq_lengths.split(",")]
    batches = [int(b) for b in args.batch_sizes.split(",")]
    print(f"{os.cpu_count()} cores; tf {tf.__version__}; corpus {args.corpus}", flush=True)
    results = {"pipeline": {}, "training": {}}
    with tempfile.TemporaryDirectory() as workdir:
        for seq in seqs:
            start = time.perf_counter()
            files, count = build_records(workdir, args.corpus, seq, args.predictions,
                                         min(args.vocab_size, 8000), args.dupe_factor)
            print(f"seq {seq}: {count} records built in {time.perf_counter() - start:.1f} s",
                  flush=True)
            for batch in batches:
                for dynamic in (False, True):
                    rate = pipeline_rate(files, batch, seq, args.predictions, dynamic,
                                         args.seconds, args.vocab_size)
                    mode = "dynamic" if dynamic else "static"
                    results["pipeline"][f"{seq}/{batch}/{mode}"] = rate
                    print(f"  pipeline seq {seq} batch {batch:3d} {mode:7s}: "
                          f"{rate:9.0f} seq/s", flush=True)
    if args.train_steps:
        for seq in seqs:
            for precision in args.precisions.split(","):
                rate = training_rate(args.train_batch_size, seq, args.predictions, precision,
                                     args.train_steps)
                results["training"][f"{seq}/{precision}"] = rate
                print(f"  training ALBERT-base seq {seq} batch {args.train_batch_size} "
                      f"{precision}: {rate:.2f} seq/s", flush=True)
        print("\npipeline / fastest training step, per sequence length (slowest pipeline "
              "configuration):")
        for seq in seqs:
            train = max(r for k, r in results["training"].items() if k.startswith(f"{seq}/"))
            for mode in ("static", "dynamic"):
                slowest = min(r for k, r in results["pipeline"].items()
                              if k.startswith(f"{seq}/") and k.endswith(mode))
                print(f"  seq {seq} {mode:7s}: {slowest:.0f} / {train:.2f} = "
                      f"{slowest / train:.0f}x", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
