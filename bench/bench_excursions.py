"""Loss excursions at the demo's scale: seeds × precisions × peak rates, with and without the
recovery (training.excursions).

Each run is the demo's pretraining command (scripts/demo.sh, stage 3) on a demo folder's
vocabulary and records, with --on_loss_spike=warn (the guard reports, the run goes on: the run
as it was before recoveries existed) or =recover (the default). A recover run is made only where
the warn run of the same cell had an excursion or stopped (a non-finite loss): before its first
excursion a recover run is the warn run step for step.

  bash scripts/demo.sh                      # makes demo_output/ (vocabulary and records)
  python bench/bench_excursions.py --demo_dir=demo_output --steps=15480 \
      --precisions=none,bfloat16,float16 --seeds=12345,7,3 --learning_rates=1e-2

Results are appended as JSON lines to --results (a rerun skips the runs already there), then
printed as a table: excursions seen (kind@step), held-out MLM accuracy at the end and at the best
checkpoint, training MLM loss at the end.
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCURSION = re.compile(r"Loss excursion: (a loss spike at step (\d+)|the smoothed training loss "
                       r"rose to \S+ at step (\d+)|the held-out loss rose at \d+ evaluations in "
                       r"a row, to \S+ at step (\d+)|the loss became \S+ at step (\d+))")
EVAL = re.compile(r"Eval at step (\d+): .*masked_lm_accuracy (\S+)")
PROGRESS = re.compile(r"step (\d+)/\d+  masked_lm_loss (\S+)")
HEADROOM = re.compile(r"Loss guard: the largest step loss was (\S+) standard deviations .*"
                      r"smoothed loss at most (\S+)% above its best")


def command(args, out, precision, seed, rate, mode):
    demo = args.demo_dir
    steps = args.steps
    return [sys.executable, "-m", "albert_tf.run_pretraining",
            "--albert_config_file=configs/albert_demo.json",
            f"--input_file={demo}/pretrain/train.tfrecord*",
            f"--eval_input_file={demo}/pretrain/eval.tfrecord", f"--output_dir={out}",
            "--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=32",
            f"--num_train_steps={steps}", f"--num_warmup_steps={steps // 10}",
            f"--learning_rate={rate}", "--dynamic_masking", "--ngram=1",
            f"--save_checkpoints_steps={steps // args.checkpoints}",
            f"--log_steps={steps // 10}", "--do_eval",
            "--eval_batch_size=64", "--max_eval_steps=10", f"--mixed_precision={precision}",
            f"--random_seed={seed}", f"--on_loss_spike={mode}"]


def parse(log):
    excursions = []
    for m in EXCURSION.finditer(log):
        kind = ("spike" if m.group(2) else "rise" if m.group(3) else "held-out" if m.group(4)
                else "non-finite")
        excursions.append(f"{kind}@{m.group(2) or m.group(3) or m.group(4) or m.group(5)}")
    evals = [(int(s), float(a)) for s, a in EVAL.findall(log)]
    losses = [(int(s), float(v)) for s, v in PROGRESS.findall(log)]
    headroom = HEADROOM.findall(log)
    return {"excursions": excursions, "held_out_end": evals[-1][1] if evals else None,
            "max_sigmas": float(headroom[-1][0]) if headroom else None,
            "max_rise_percent": float(headroom[-1][1]) if headroom else None,
            "held_out_best": max(a for _, a in evals) if evals else None,
            "train_mlm_loss_end": losses[-1][1] if losses else None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo_dir", default="demo_output")
    parser.add_argument("--steps", type=int, default=15480)
    parser.add_argument("--checkpoints", type=int, default=8,
                        help="checkpoints (and held-out evaluations) per run: the demo's 8")
    parser.add_argument("--precisions", default="none,bfloat16,float16")
    parser.add_argument("--seeds", default="12345,7,3")
    parser.add_argument("--learning_rates", default="1e-2")
    parser.add_argument("--workdir", default="/tmp/bench_excursions")
    parser.add_argument("--results", default="bench/results/excursions.jsonl")
    args = parser.parse_args()
    done = {}
    if os.path.exists(args.results):
        with open(args.results) as f:
            for line in f:
                row = json.loads(line)
                done[(row["precision"], row["seed"], row["learning_rate"], row["mode"],
                      row["steps"], row.get("checkpoints", 4))] = row
    for rate in args.learning_rates.split(","):
        for precision in args.precisions.split(","):
            for seed in map(int, args.seeds.split(",")):
                for mode in ("warn", "recover"):
                    key = (precision, seed, rate, mode, args.steps, args.checkpoints)
                    if key in done:
                        continue
                    if mode == "recover":
                        warned = done[key[:3] + ("warn",) + key[4:]]
                        if not warned["excursions"] and not warned["status"]:
                            continue
                    out = os.path.join(args.workdir, "-".join(map(str, key)))
                    subprocess.run(["rm", "-rf", out], check=True)
                    proc = subprocess.run(command(args, out, precision, seed, rate, mode),
                                          cwd=ROOT, capture_output=True, text=True)
                    with open(out + ".log", "w") as f:
                        f.write(proc.stderr)
                    row = dict(precision=precision, seed=seed, learning_rate=rate, mode=mode,
                               steps=args.steps, checkpoints=args.checkpoints,
                               status=proc.returncode, **parse(proc.stderr))
                    done[key] = row
                    os.makedirs(os.path.dirname(args.results) or ".", exist_ok=True)
                    with open(args.results, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
    print("\n| rate | precision | seed | excursions (warn) | held-out end / best (warn) | "
          "recovered: held-out end / best |\n|---|---|---|---|---|---|")
    for (precision, seed, rate, mode, steps, checkpoints), row in sorted(done.items()):
        if mode != "warn" or (steps, checkpoints) != (args.steps, args.checkpoints):
            continue
        rec = done.get((precision, seed, rate, "recover", steps, checkpoints))
        fmt = (lambda r: f"{r['held_out_end']:.3f} / {r['held_out_best']:.3f}")
        seen = row["excursions"]
        seen = ", ".join(seen[:3]) + (f" (+{len(seen) - 3})" if len(seen) > 3 else "")
        print(f"| {rate} | {precision} | {seed} | {seen or 'none'} | "
              f"{fmt(row)} | {fmt(rec) + ' (' + ', '.join(rec['excursions']) + ')' if rec else '-'} |")


if __name__ == "__main__":
    main()
