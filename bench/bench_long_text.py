"""One very long text among short ones under --long_text=windows (issue 62, docs/finetuning.md,
"Long texts"): run_classifier on 400 sentences of the bundled novels task plus one
50,000-character text of one novel, from the demo's pretrained checkpoint, with every window of
the long text trained on (--max_windows_per_text=0) and with the default cap, against the 400
sentences alone; dev accuracy on the task's 500 dev sentences.

  bash scripts/demo.sh        # demo_output/pretrained and demo_output/spm.model
  python bench/bench_long_text.py --pretrained=demo_output/pretrained \
      --spm_model_file=demo_output/spm.model --seeds=12345,7,3

Results are appended as JSON lines to --results and printed as a table.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_own_data import ROOT, _sentences, _write  # noqa: E402

# What the data report and the cap write to the log.
DIVISION = re.compile(r"train \(.*?\): (\d+) examples.*read in (\d+) windows in all: ([\d.]+)% "
                      r"of them from the longest 1% of the examples \((\d+)\), at most (\d+)")
CAPPED = re.compile(r"(\d+) of \d+ windows dropped, from \d+ texts?; (\d+) training windows, "
                    r"([\d.]+)%")


def data(work, short, characters, sources, dev_size=500, novels=("emma", "persuasion")):
    """{kind: file}: short, `short` sentences of two pretraining novels (half each, at random);
    long-<source>, the same and one text of `characters` characters labelled as the first novel:
    consecutive sentences of `source` that no other row holds; dev, `dev_size` other
    sentences."""
    rng = random.Random(12345)
    half = (short + dev_size) // 2
    rows, unused = [], {}
    for name in sorted({*novels, *sources}):
        pool = _sentences(name)
        chosen = set(rng.sample(range(len(pool)), half)) if name in novels else set()
        rows += [{"sentence": pool[i], "novel": name} for i in sorted(chosen)]
        unused[name] = [s for i, s in enumerate(pool) if i not in chosen]
    rng.shuffle(rows)
    files = {"short": _write(os.path.join(work, "short.csv"), rows[:short]),
             "dev": _write(os.path.join(work, "dev.csv"), rows[short:])}
    for source in sources:
        text = " ".join(unused[source][:characters // 20])[:characters].rsplit(" ", 1)[0]
        long_text = {"sentence": text, "novel": novels[0]}
        files[f"long-{source}"] = _write(os.path.join(work, f"long-{source}.csv"),
                                         rows[:short] + [long_text])
    return files


def predicted_share(out, label):
    """The share of dev predictions that are `label`, from classification_report.txt's
    confusion matrix."""
    with open(os.path.join(out, "classification_report.txt")) as f:
        lines = f.read().splitlines()
    names = lines[-3].split()
    matrix = [[int(v) for v in line.split()[1:]] for line in lines[-2:]]
    column = names.index(label)
    return sum(row[column] for row in matrix) / sum(map(sum, matrix))


def command(args, out, seed, train, dev, cap):
    return [sys.executable, "-m", "albert_tf.run_classifier",
            f"--init_checkpoint={args.pretrained}", f"--spm_model_file={args.spm_model_file}",
            f"--output_dir={out}", f"--train_file={train}", f"--validation_file={dev}",
            "--text_column_names=sentence", "--label_column_name=novel", "--do_train",
            "--do_eval", "--long_text=windows", f"--max_windows_per_text={cap}",
            f"--max_seq_length={args.max_seq_length}", "--train_batch_size=32",
            "--eval_batch_size=64", "--learning_rate=1e-3",
            f"--train_step={args.train_step}" if args.train_step else
            f"--num_train_epochs={args.epochs}", "--warmup_proportion=0.1",
            "--save_checkpoints_steps=100", "--log_steps=100",
            f"--random_seed={seed}", f"--mixed_precision={args.mixed_precision}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pretrained", default="demo_output/pretrained")
    parser.add_argument("--spm_model_file", default="demo_output/spm.model")
    parser.add_argument("--seeds", default="12345,7,3")
    parser.add_argument("--short", type=int, default=400, help="short training texts")
    parser.add_argument("--characters", type=int, default=50000, help="the long text's length")
    parser.add_argument("--caps", default="0,8", help="--max_windows_per_text values")
    parser.add_argument("--sources", default="emma,pride_and_prejudice",
                        help="the novels the long text (labelled emma) is taken from")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--epochs", type=float, default=8)
    parser.add_argument("--train_step", type=int, help="these steps instead of --epochs")
    parser.add_argument("--mixed_precision", default="auto")
    parser.add_argument("--workdir", default="/tmp/bench_long_text")
    parser.add_argument("--results", default="bench/results/long_text.jsonl")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    sources = args.sources.split(",")
    files = data(args.workdir, args.short, args.characters, sources)
    runs = [("short", 0)] + [(f"long-{source}", int(cap)) for source in sources
                             for cap in args.caps.split(",")]
    rows = []
    for seed in map(int, args.seeds.split(",")):
        for kind, cap in runs:
            out = os.path.join(args.workdir, f"{kind}-{cap}-{seed}")
            subprocess.run(["rm", "-rf", out], check=True)
            proc = subprocess.run(command(args, out, seed, files[kind], files["dev"], cap),
                                  cwd=ROOT, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"{kind} cap {cap} seed {seed} failed:\n{proc.stderr[-3000:]}")
            with open(os.path.join(out, "eval_results.txt")) as f:
                result = {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}
            log = proc.stderr
            with open(os.path.join(out, "log.txt"), "w", encoding="utf-8") as f:
                f.write(log)
            texts, windows, share, longest, most = DIVISION.search(log).groups()
            capped = CAPPED.search(log)
            row = dict(kind=kind, cap=cap, seed=seed, texts=int(texts), windows=int(windows),
                       longest_share=float(share), longest=int(longest), most_windows=int(most),
                       trained_windows=int(capped[2]) if capped else int(windows),
                       trained_longest_share=float(capped[3]) if capped else float(share),
                       max_seq_length=args.max_seq_length, epochs=args.epochs,
                       train_step=args.train_step,
                       mixed_precision=args.mixed_precision,
                       predicted_emma=predicted_share(out, "emma"), **result)
            rows.append(row)
            with open(args.results, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    print("\n| training data | --max_windows_per_text | seed | training windows (longest 1%) "
          "| dev accuracy | dev predicted emma |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kind']} | {r['cap']} | {r['seed']} | {r['trained_windows']} "
              f"({r['trained_longest_share']:.1f}%) | {r['eval_accuracy']:.3f} | "
              f"{r['predicted_emma']:.3f} |")


if __name__ == "__main__":
    main()
