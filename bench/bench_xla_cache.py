"""How much sooner an XLA run starts again with TensorFlow's persistent compilation cache
(TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR).

    python bench/bench_xla_cache.py --config=configs/albert_base_v2.json --repeats=2

Builds pretraining records from the bundled corpus (as bench_input.py), then times a whole
`python -m albert_tf.run_pretraining` of `--steps` steps with --jit_compile, three ways in each
round: without the cache, filling an empty one, and from the one just filled. Prints each run's
wall seconds and the lines of stderr the tool let through (the cache's own log lines are
dropped by the tools: albert_tf/startup.py)."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from bench_input import build_records  # noqa: E402


def timed_run(args, files, out, cache):
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, TF_XLA_FLAGS=f"--tf_xla_persistent_cache_directory={cache}"
               if cache else "")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_pretraining", f"--albert_config_file={args.config}",
         f"--input_file={files}", f"--output_dir={out}", f"--max_seq_length={args.seq_length}",
         f"--max_predictions_per_seq={args.predictions}",
         f"--train_batch_size={args.batch_size}", f"--num_train_steps={args.steps}",
         "--num_warmup_steps=1", f"--save_checkpoints_steps={args.steps}",
         f"--mixed_precision={args.mixed_precision}", "--jit_compile=true"],
        cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    return seconds, len(proc.stderr.splitlines())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "albert_base_v2.json"))
    parser.add_argument("--corpus", default=os.path.join(ROOT, "data", "corpus", "*.txt"))
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--mixed_precision", default="bfloat16")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        files = ",".join(build_records(work, args.corpus, args.seq_length, args.predictions,
                                       8000, 1)[0])
        cache, out = os.path.join(work, "cache"), os.path.join(work, "run")
        print(f"{os.path.basename(args.config)}, {args.steps} steps of {args.batch_size} x "
              f"{args.seq_length}, {args.mixed_precision}, --jit_compile: whole run, seconds")
        for round_ in range(1, args.repeats + 1):
            shutil.rmtree(cache, ignore_errors=True)
            for name, directory in (("no cache", None), ("filling it", cache),
                                    ("from it", cache)):
                seconds, lines = timed_run(args, files, out, directory)
                print(f"round {round_}  {name:<10}  {seconds:6.2f} s  ({lines} stderr lines)",
                      flush=True)


if __name__ == "__main__":
    main()
