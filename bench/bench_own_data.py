"""Your own data on real text (docs/finetuning.md, "Your own data, measured"): run_classifier
on CSV / JSON Lines / TSV files built from the bundled Austen novels, from the demo's
pretrained checkpoint, over several seeds.

  novels      single-label CSV: the bundled SST-2 task (which held-out novel a sentence is
              from) with the novels' names as labels, against the same rows in the GLUE
              layout (--task_name=sst-2).
  punctuation multi-label JSON Lines: sentences of the pretraining novels with ? ! and "
              removed; labels: question (it ended in ?), exclamation (it held !), speech (it
              held a quotation mark). Trivial baselines: all-negative (F1 0) and all-positive.
  year        regression TSV (--problem_type=regression: the years are integers): a
              sentence's novel's year of publication (1811, 1813, 1815, 1817). Trivial
              baseline: the training mean (MSE = the dev set's spread around it, Pearson 0).

  bash scripts/demo.sh        # demo_output/pretrained and demo_output/spm.model
  python bench/bench_own_data.py --pretrained=demo_output/pretrained \
      --spm_model_file=demo_output/spm.model --seeds=12345,7,3

Results are appended as JSON lines to --results and printed as a table.
"""

import argparse
import csv
import json
import os
import random
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOVELS = {"0": "Northanger Abbey", "1": "Mansfield Park"}  # data/README.md, glue/SST-2
YEARS = {"sense_and_sensibility": 1811, "pride_and_prejudice": 1813, "emma": 1815,
         "persuasion": 1817}
PUNCTUATION = re.compile(r'[?!"]')


def _write(path, rows, delimiter=","):
    if path.endswith(".jsonl"):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        return path
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def novels(work):
    """The bundled SST-2 rows with the novels' names (sorted: Mansfield Park first)."""
    files = {}
    for split in ("train", "dev"):
        with open(os.path.join(ROOT, "data/glue/SST-2", f"{split}.tsv"), encoding="utf-8") as f:
            rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        files[split] = _write(os.path.join(work, f"novels_{split}.csv"), [
            {"id": f"{split}-{i}", "sentence": r["sentence"], "novel": NOVELS[r["label"]]}
            for i, r in enumerate(rows)])
    return files


def _sentences(name):
    with open(os.path.join(ROOT, "data/corpus", f"{name}.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if 4 <= len(line.split()) <= 40]


def punctuation(work, rng, n_train=3000, n_dev=500):
    """A third questions, a third exclamations, a third neither, from the pretraining novels."""
    pool = [s for name in YEARS for s in _sentences(name)]
    rng.shuffle(pool)
    groups = [[s for s in pool if "?" in s], [s for s in pool if "!" in s and "?" not in s],
              [s for s in pool if "?" not in s and "!" not in s]]
    per = (n_train + n_dev) // 3
    chosen = [s for g in groups for s in g[:per]]
    rng.shuffle(chosen)

    def row(i, s):
        labels = [name for name, hit in (("exclamation", "!" in s), ("question", "?" in s),
                                          ("speech", '"' in s)) if hit]
        text = " ".join(PUNCTUATION.sub("", s).split())
        return {"id": i, "text": text, "labels": labels}
    rows = [row(i, s) for i, s in enumerate(chosen)]
    return {"train": _write(os.path.join(work, "punctuation_train.jsonl"), rows[n_dev:]),
            "dev": _write(os.path.join(work, "punctuation_dev.jsonl"), rows[:n_dev])}


def year(work, rng, n_train=3000, n_dev=500):
    per = (n_train + n_dev) // len(YEARS)
    rows = []
    for name, published in YEARS.items():
        sentences = _sentences(name)
        rng.shuffle(sentences)
        rows += [{"sentence": s, "year": published} for s in sentences[:per]]
    rng.shuffle(rows)
    rows = [{"id": i, **r} for i, r in enumerate(rows)]
    return {"train": _write(os.path.join(work, "year_train.tsv"), rows[n_dev:], "\t"),
            "dev": _write(os.path.join(work, "year_dev.tsv"), rows[:n_dev], "\t")}


def baselines(kind, files):
    """The trivial predictions' dev scores."""
    if kind == "punctuation":
        def read(split):
            names = ("exclamation", "question", "speech")
            with open(files[split]) as f:
                return np.array([[n in json.loads(line)["labels"] for n in names] for line in f])
        dev = read("dev")
        p = dev.mean()
        return {"all_negative_micro_f1": 0.0, "all_positive_micro_f1": 2 * p / (1 + p),
                "positives": dev.mean(0).round(3).tolist()}
    if kind == "year":
        def read(split):
            with open(files[split]) as f:
                return np.array([float(r["year"]) for r in csv.DictReader(f, delimiter="\t")])
        dev = read("dev")
        return {"mean_MSE": float(np.mean((dev - read("train").mean()) ** 2)), "mean_pearson": 0.0}
    return {}


def command(args, out, seed, kind, files):
    common = [sys.executable, "-m", "albert_tf.run_classifier",
              f"--init_checkpoint={args.pretrained}", f"--output_dir={out}", "--do_train",
              f"--spm_model_file={args.spm_model_file}",
              "--do_eval", "--max_seq_length=32", "--train_batch_size=32",
              "--eval_batch_size=64", "--learning_rate=1e-3", "--optimizer=adamw",
              f"--num_train_epochs={args.epochs}", "--warmup_proportion=0.1",
              "--save_checkpoints_steps=100", "--log_steps=100", f"--random_seed={seed}",
              f"--mixed_precision={args.mixed_precision}"]
    if kind == "glue":
        return common + ["--task_name=sst-2", f"--data_dir={os.path.join(ROOT, 'data/glue')}"]
    own = [f"--train_file={files['train']}", f"--validation_file={files['dev']}"]
    return common + own + {
        "novels": ["--text_column_names=sentence", "--label_column_name=novel"],
        "punctuation": ["--text_column_names=text", "--label_column_name=labels"],
        "year": ["--text_column_names=sentence", "--label_column_name=year",
                 "--problem_type=regression"]}[kind]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pretrained", default="demo_output/pretrained")
    parser.add_argument("--spm_model_file", default="demo_output/spm.model")
    parser.add_argument("--seeds", default="12345,7,3")
    parser.add_argument("--kinds", default="glue,novels,punctuation,year")
    parser.add_argument("--epochs", type=float, default=8)
    parser.add_argument("--mixed_precision", default="auto")
    parser.add_argument("--workdir", default="/tmp/bench_own_data")
    parser.add_argument("--results", default="bench/results/own_data.jsonl")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = random.Random(12345)
    data = {"glue": {}, "novels": novels(args.workdir),
            "punctuation": punctuation(args.workdir, rng), "year": year(args.workdir, rng)}
    rows = []
    for kind in args.kinds.split(","):
        base = baselines(kind, data[kind])
        for seed in map(int, args.seeds.split(",")):
            out = os.path.join(args.workdir, f"{kind}-{seed}")
            subprocess.run(["rm", "-rf", out], check=True)
            proc = subprocess.run(command(args, out, seed, kind, data[kind]), cwd=ROOT,
                                  capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"{kind} seed {seed} failed:\n{proc.stderr[-3000:]}")
            with open(os.path.join(out, "eval_results.txt")) as f:
                result = {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}
            row = dict(kind=kind, seed=seed, mixed_precision=args.mixed_precision,
                       epochs=args.epochs, **result, **base)
            rows.append(row)
            with open(args.results, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    print("\n| task | seed | dev result | trivial baseline |\n|---|---|---|---|")
    for r in rows:
        if r["kind"] in ("glue", "novels"):
            shown, base = f"accuracy {r['eval_accuracy']:.3f}", "majority 0.500"
        elif r["kind"] == "punctuation":
            shown = f"micro-F1 {r['micro_f1']:.3f}, macro-F1 {r['macro_f1']:.3f}"
            base = f"all-positive micro-F1 {r['all_positive_micro_f1']:.3f}, all-negative 0"
        else:
            shown = f"MSE {r['MSE']:.3f}, Pearson {r['pearson']:.3f}"
            base = f"mean: MSE {r['mean_MSE']:.3f}, Pearson 0"
        print(f"| {r['kind']} | {r['seed']} | {shown} | {base} |")


if __name__ == "__main__":
    main()
