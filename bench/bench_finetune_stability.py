"""Fine-tuning stability: ours against transformers from the same checkpoint, seeds × rates.

Two real-text tasks made from the bundled held-out novels (data/glue/SST-2's sentences):
  classify  which novel a sentence comes from (data/glue/SST-2, 3000 train / 500 dev, balanced)
  tag       punctuation restoration: each word of the sentence, stripped of punctuation, is
            tagged with the mark that followed it (B-COMMA for , ; :, B-PERIOD, B-QUESTION,
            B-EXCLAIM) or O; scored by conlleval entity F1 (all O scores 0)
Each run fine-tunes the same pretrained checkpoint with the same schedule (steps, warmup, batch,
peak rate) and is scored by the same code on the same dev features:
  ours:<precision>[:<variant>]  run_finetuning with run_classifier's / run_ner's defaults, or
                                named variants joined by + (VARIANTS: the original's update,
                                single changes to it, length buckets on or off;
                                HEAD_INITIALIZERS: the task head drawn from a normal, as
                                transformers'), e.g. ours:none:original+no_bucket
  transformers                  AlbertForSequence/TokenClassification from the checkpoint
                                converted with convert_checkpoint --format=hf, torch AdamW
                                (eps 1e-8, weight decay 0.01 except bias and LayerNorm), linear
                                warmup then linear decay, global-norm clipping at 1.0
Each run also records how far it moved each word-embedding row ("rows": per bin of how often
the row's piece occurs in the task's training features, the bin's row count and the mean and
median L2 norm of the row's change), to see which rows an update rule leaves behind.
A run is "stuck" when it ends at the constant prediction: classification accuracy within one
example of the dev majority rate, tagging F1 below 0.01.

  python bench/bench_finetune_stability.py --init_checkpoint=demo_output/pretrained \
      --spm_model_file=demo_output/spm.model --tasks=classify,tag \
      --learning_rates=1e-4,5e-4,2e-3 --seeds=1,2,3,4,5 \
      --runs=ours:bfloat16,ours:none,ours:float16,ours:bfloat16:original,transformers

Results are appended as JSON lines to --results (a rerun skips the runs already there), then
summarised per task, learning rate and run as mean ± standard deviation and stuck count.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import triton_first  # noqa: E402,F401  (before TensorFlow: bench/triton_first.py)
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import logging  # noqa: E402

from albert_tf.data import glue  # noqa: E402
from albert_tf.data.features import num_examples  # noqa: E402
from albert_tf.formats.tokenizers import load_tokenizer  # noqa: E402
from albert_tf.formats.resolve import run_checkpoint  # noqa: E402
from albert_tf.tasks import GlueTask, NerTask, finetuning_options, run_finetuning  # noqa: E402
from albert_tf.tasks.ner import run_labels  # noqa: E402
from albert_tf.run_ner import NER_DEFAULTS  # noqa: E402
from albert_tf.tasks.flags import UPDATE_FLAGS  # noqa: E402
from albert_tf.modeling.optimizers import ORIGINAL_UPDATE  # noqa: E402

# The original's update and single changes to it, to measure one at a time, as flag values.
ORIGINAL = {UPDATE_FLAGS[k]: v for k, v in ORIGINAL_UPDATE.items()}
VARIANTS = {
    "original": ORIGINAL,
    "bias_correction": dict(ORIGINAL, bias_correction=True),
    "bc_decay": dict(ORIGINAL, bias_correction=True, decay_after_warmup=True),
    "bc_decay_eps8": dict(ORIGINAL, bias_correction=True, decay_after_warmup=True,
                          adam_epsilon=1e-8),
    "eps6": dict(adam_epsilon=1e-6),
    "eps8": dict(adam_epsilon=1e-8),
    "bucket": dict(padding="bucket"),
    "no_bucket": dict(padding="batch"),
}
# Variants that are not flags: the task head's initializer (ours: the original's truncated
# normal; transformers: a normal), both with standard deviation 0.02.
HEAD_INITIALIZERS = {"normal_head": keras.initializers.RandomNormal}
PUNCTUATION = {",": "COMMA", ";": "COMMA", ":": "COMMA", ".": "PERIOD", "?": "QUESTION",
               "!": "EXCLAIM"}


def punctuation_tags(sentence):
    """(words, tags) of a sentence: words without punctuation, each tagged with the mark that
    followed it (the last of ?!. or ,;: in its trailing punctuation), else O."""
    words, tags = [], []
    for raw in sentence.split():
        word = re.sub(r"^\W+|\W+$", "", raw)
        if not word:
            continue
        trailing = raw[raw.rfind(word[-1]) + 1:]
        marks = [PUNCTUATION[c] for c in trailing if c in PUNCTUATION]
        words.append(word)
        tags.append("B-" + marks[-1] if marks else "O")
    return words, tags


def write_tagging_data(directory):
    """train.txt / dev.txt / test.txt (CoNLL) from SST-2's train / dev / test sentences."""
    os.makedirs(directory, exist_ok=True)
    for split in ("train", "dev", "test"):
        with open(os.path.join(ROOT, "data/glue/SST-2", f"{split}.tsv")) as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        text_column = 1 if split == "test" else 0
        lines = []
        for row in rows:
            words, tags = punctuation_tags(row[text_column])
            lines.extend(f"{w} {t}\n" for w, t in zip(words, tags))
            lines.append("\n")
        with open(os.path.join(directory, f"{split}.txt"), "w") as f:
            f.writelines(lines)
    return directory


def make_task(name, args, tokenizer, output_dir):
    cache = os.path.join(args.work_dir, f"cache_{name}")
    if name == "classify":
        return GlueTask(glue.get_task("sst-2"), os.path.join(ROOT, "data/glue"), tokenizer,
                        args.max_seq_length, cache)
    data = write_tagging_data(os.path.join(args.work_dir, "punctuation"))
    return NerTask(data, tokenizer, args.max_seq_length, cache,
                   run_labels(output_dir, data, needed=True))


def stuck(task, features, value):
    """Whether a dev score is the constant prediction's: F1 below 0.01 (tagging), accuracy
    within one example of the majority rate (classification)."""
    if isinstance(task, NerTask):
        return value < 0.01
    labels = features["label_ids"]
    majority = np.bincount(labels).max() / len(labels)
    return abs(value - majority) <= 1.0 / len(labels) + 1e-9


# Bins of how often a piece occurs in the training features: [low, high).
ROW_BINS = [(0, 1), (1, 2), (2, 10), (10, 100), (100, 1000), (1000, None)]


def row_updates(before, after, features):
    """Per bin of occurrence count in the training features: [bin, rows, mean, median] of the
    L2 norms of the embedding rows' changes."""
    counts = np.bincount(features["input_word_ids"].astype(np.int64), minlength=len(before))
    norms = np.linalg.norm(np.asarray(after, np.float64) - np.asarray(before, np.float64),
                           axis=1)
    out = []
    for low, high in ROW_BINS:
        rows = (counts >= low) & (counts < high if high else True)
        name = f"{low}" if high == low + 1 else f"{low}-{high - 1 if high else ''}"
        if rows.any():
            out.append([name, int(rows.sum()), float(norms[rows].mean()),
                        float(np.median(norms[rows]))])
    return out


def word_embeddings(checkpoint):
    """The word-embedding table of a checkpoint (ours: pretrained or fine-tuned), as a
    fine-tuning run reads it (a run directory: its best checkpoint, else its newest)."""
    if os.path.isdir(checkpoint):
        checkpoint = run_checkpoint(checkpoint)[0]
    reader = tf.train.load_checkpoint(checkpoint)
    names = [n for n in reader.get_variable_to_shape_map()
             if "word_embeddings" in n and n.endswith("VARIABLE_VALUE")
             and "OPTIMIZER_SLOT" not in n]
    if len(names) != 1:
        raise ValueError(f"{checkpoint}: not one word-embedding table: {names}")
    return reader.get_tensor(names[0])


def run_ours(task_name, lr, seed, precision, variant, args, tokenizer):
    names = variant.split("+") if variant else []
    unknown = [name for name in names if name not in VARIANTS and name not in HEAD_INITIALIZERS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}: use {sorted(VARIANTS)} or "
                         f"{sorted(HEAD_INITIALIZERS)}, joined by +")
    out = tempfile.mkdtemp(dir=args.work_dir)
    try:
        task = make_task(task_name, args, tokenizer, out)
        options = finetuning_options(
            output_dir=out, init_checkpoint=args.init_checkpoint,
            spm_model_file=args.spm_model_file, vocab_file=args.vocab_file, do_train=True,
            do_eval=True,
            max_seq_length=args.max_seq_length, train_batch_size=args.batch_size,
            eval_batch_size=100, learning_rate=lr, train_step=args.steps,
            warmup_step=args.warmup, save_checkpoints_steps=args.steps,
            log_steps=args.steps // 4, random_seed=seed, mixed_precision=precision,
            **{"padding": NER_DEFAULTS["padding"] if task_name == "tag" else "bucket",
               **{k: v for name in names for k, v in VARIANTS.get(name, {}).items()}})
        truncated = keras.initializers.TruncatedNormal
        keras.initializers.TruncatedNormal = next(
            (HEAD_INITIALIZERS[name] for name in names if name in HEAD_INITIALIZERS), truncated)
        try:
            value = run_finetuning(task, options)[task.best_metric]
        finally:
            keras.initializers.TruncatedNormal = truncated
        rows = row_updates(word_embeddings(args.init_checkpoint),
                           word_embeddings(tf.train.latest_checkpoint(out)),
                           task.train_features())
        return value, stuck(task, task.eval_sets()[0][1], value), rows
    finally:
        shutil.rmtree(out, ignore_errors=True)
        keras.backend.clear_session()
        keras.mixed_precision.set_global_policy("float32")


def hf_checkpoint(args):
    path = os.path.join(args.work_dir, "hf")
    if not os.path.exists(os.path.join(path, "config.json")):
        subprocess.run([sys.executable, "-m", "albert_tf.convert_checkpoint",
                        f"--input={args.init_checkpoint}", f"--output_dir={path}",
                        "--format=hf"], check=True, cwd=ROOT)
    return path


def _examples(features, keys):
    bounds = np.cumsum(features["lengths"])[:-1]
    return {k: np.split(features[k].astype(np.int64), bounds) for k in keys}


def _batch(torch, columns, index, pad_values):
    length = max(len(columns["input_word_ids"][i]) for i in index)
    out = {}
    for key, pad in pad_values.items():
        rows = [np.pad(columns[key][i], (0, length - len(columns[key][i])),
                       constant_values=pad) for i in index]
        out[key] = torch.tensor(np.stack(rows))
    return out


def run_transformers(task_name, lr, seed, args, tokenizer):
    import torch
    import transformers

    out = tempfile.mkdtemp(dir=args.work_dir)
    try:
        task = make_task(task_name, args, tokenizer, out)
        tagging = isinstance(task, NerTask)
        torch.manual_seed(seed)
        torch.set_num_threads(args.threads)
        path = hf_checkpoint(args)
        if tagging:
            model = transformers.AlbertForTokenClassification.from_pretrained(
                path, num_labels=len(task.labels))
        else:
            model = transformers.AlbertForSequenceClassification.from_pretrained(
                path, num_labels=task.task.num_labels)
        # As transformers' Trainer: no decay for biases and LayerNorm modules (by type: ALBERT's
        # full_layer_layer_norm has no "LayerNorm" in its name).
        norms = {id(p) for m in model.modules() if isinstance(m, torch.nn.LayerNorm)
                 for p in m.parameters()}
        no_decay = [p for n, p in model.named_parameters() if "bias" in n or id(p) in norms]
        decay = [p for n, p in model.named_parameters()
                 if not ("bias" in n or id(p) in norms)]
        table = model.albert.embeddings.word_embeddings.weight
        before = table.detach().numpy().copy()
        optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                       {"params": no_decay, "weight_decay": 0.0}],
                                      lr=lr, eps=1e-8)
        schedule = transformers.get_linear_schedule_with_warmup(optimizer, args.warmup,
                                                                args.steps)
        train = task.train_features()
        keys = ["input_word_ids", "input_type_ids"] + (["tag_ids", "tag_mask"] if tagging
                                                       else [])
        columns = _examples(train, keys)
        columns["attention_mask"] = [np.ones_like(x) for x in columns["input_word_ids"]]
        if tagging:
            columns["labels"] = [np.where(m > 0, t - 1, -100)
                                 for t, m in zip(columns["tag_ids"], columns["tag_mask"])]
            pads = {"input_word_ids": 0, "input_type_ids": 0, "attention_mask": 0,
                    "labels": -100}
        else:
            pads = {"input_word_ids": 0, "input_type_ids": 0, "attention_mask": 0}
        rng = np.random.default_rng(seed)
        n = num_examples(train)
        order, at = rng.permutation(n), 0
        model.train()
        for _ in range(args.steps):
            if at + args.batch_size > n:
                order, at = rng.permutation(n), 0
            index = order[at:at + args.batch_size]
            at += args.batch_size
            batch = _batch(torch, columns, index, pads)
            inputs = dict(input_ids=batch["input_word_ids"], token_type_ids=batch[
                "input_type_ids"], attention_mask=batch["attention_mask"])
            labels = (batch["labels"] if tagging else
                      torch.tensor(train["label_ids"][index].astype(np.int64)))
            loss = model(**inputs, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
        model.eval()
        dev = task.eval_sets()[0][1]
        dev_columns = _examples(dev, ["input_word_ids", "input_type_ids"])
        dev_columns["attention_mask"] = [np.ones_like(x) for x in dev_columns["input_word_ids"]]
        logits = []
        with torch.no_grad():
            for start in range(0, num_examples(dev), 100):
                index = range(start, min(start + 100, num_examples(dev)))
                batch = _batch(torch, dev_columns, index,
                               {"input_word_ids": 0, "input_type_ids": 0, "attention_mask": 0})
                out_logits = model(input_ids=batch["input_word_ids"],
                                   token_type_ids=batch["input_type_ids"],
                                   attention_mask=batch["attention_mask"]).logits.numpy()
                if tagging:
                    out_logits = np.pad(out_logits, [(0, 0), (0, args.max_seq_length
                                                              - out_logits.shape[1]), (0, 0)])
                logits.extend(out_logits)
        logits = np.stack(logits)
        if tagging:
            outputs = {"tag_ids": logits.argmax(-1), "loss_sum": np.zeros(1),
                       "token_count": np.ones(1)}
        else:
            outputs = {"logits": logits, "per_example_loss": np.zeros(len(logits))}
        value = task.eval_metrics("dev", dev, outputs)[task.best_metric]
        return value, stuck(task, dev, value), row_updates(before, table.detach().numpy(), train)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def summarise(results):
    rows = {}
    for r in results:
        rows.setdefault((r["task"], r["learning_rate"], r["run"]), []).append(r)
    lines = ["| task | learning rate | run | runs | mean | std | min | stuck |",
             "|---|---|---|---|---|---|---|---|"]
    for (task, lr, run), rs in sorted(rows.items()):
        values = np.array([r["score"] for r in rs])
        lines.append(f"| {task} | {lr:g} | {run} | {len(rs)} | {values.mean():.3f} | "
                     f"{values.std(ddof=1) if len(values) > 1 else 0:.3f} | "
                     f"{values.min():.3f} | {sum(r['stuck'] for r in rs)} |")
    return "\n".join(lines)


def scores(results):
    """{(task, learning rate, run): [score of each seed]}."""
    cells = {}
    for r in results:
        cells.setdefault((r["task"], r["learning_rate"], r["run"]), []).append(r["score"])
    return cells


def wide_table(results):
    """One row a run, one column a task and rate: mean ± standard deviation (docs' layout)."""
    cells = scores(results)
    columns = sorted({(task, lr) for task, lr, _ in cells})
    lines = ["| run | " + " | ".join(f"{t} {lr:g}" for t, lr in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for run in sorted({run for _, _, run in cells}):
        values = [cells.get((t, lr, run), []) for t, lr in columns]
        lines.append(f"| {run} | " + " | ".join(
            f"{np.mean(v):.3f} ± {np.std(v, ddof=1):.3f}" if len(v) > 1 else ""
            for v in values) + " |")
    return "\n".join(lines)


def against_peer(results, peer="transformers"):
    """Each run's mean minus the peer's in every (task, rate) cell, in the peer's standard
    deviations: the rule that picks a default is never below -1 in any cell."""
    cells = scores(results)
    lines = ["| task | learning rate | run | minus peer | in peer std |", "|---|---|---|---|---|"]
    for task, lr, run in sorted(cells):
        base = cells.get((task, lr, peer), [])
        if run == peer or len(base) < 2:
            continue
        diff = np.mean(cells[task, lr, run]) - np.mean(base)
        lines.append(f"| {task} | {lr:g} | {run} | {diff:+.3f} | "
                     f"{diff / np.std(base, ddof=1):+.2f} |")
    return "\n".join(lines)


def summarise_rows(results):
    """Mean over seeds of each bin's mean row change, per task, learning rate and run."""
    rows, names = {}, []
    for r in results:
        for name, _, mean, _ in r.get("rows") or []:
            rows.setdefault((r["task"], r["learning_rate"], r["run"]), {}).setdefault(
                name, []).append(mean)
            if name not in names:
                names.append(name)
    if not rows:
        return ""
    lines = ["| task | learning rate | run | " + " | ".join(f"rows seen {n}x" for n in names)
             + " |", "|---|---|---|" + "---|" * len(names)]
    for (task, lr, run), bins in sorted(rows.items()):
        lines.append(f"| {task} | {lr:g} | {run} | " + " | ".join(
            f"{np.mean(bins[n]):.2e}" if n in bins else "" for n in names) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--init_checkpoint", required=True)
    parser.add_argument("--spm_model_file", default=None)
    parser.add_argument("--vocab_file", default=None, help="a WordPiece vocab.txt instead")
    parser.add_argument("--tasks", default="classify,tag")
    parser.add_argument("--learning_rates", default="1e-4,5e-4,2e-3")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--runs", default="ours:bfloat16,ours:none,ours:float16,transformers")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                           "finetune_stability"))
    parser.add_argument("--results", default=None,
                        help="JSON lines, appended (default <work_dir>/results.jsonl)")
    parser.add_argument("--summary_only", action="store_true")
    args = parser.parse_args()
    logging.set_verbosity(logging.WARNING)
    os.makedirs(args.work_dir, exist_ok=True)
    path = args.results or os.path.join(args.work_dir, "results.jsonl")
    results = []
    if os.path.exists(path):
        with open(path) as f:
            results = [json.loads(line) for line in f if line.strip()]
    done = {(r["task"], r["learning_rate"], r["run"], r["seed"]) for r in results}
    tokenizer = load_tokenizer(args.spm_model_file, vocab_file=args.vocab_file)
    if not args.summary_only:
        # Seeds outermost: an interrupted run has every cell at its first seeds.
        for seed in [int(x) for x in args.seeds.split(",")]:
            for task in args.tasks.split(","):
                for lr in [float(x) for x in args.learning_rates.split(",")]:
                    for run in args.runs.split(","):
                        if (task, lr, run, seed) in done:
                            continue
                        start = time.perf_counter()
                        if run == "transformers":
                            value, stuck, rows = run_transformers(task, lr, seed, args,
                                                                  tokenizer)
                        else:
                            _, precision, *variant = run.split(":")
                            value, stuck, rows = run_ours(task, lr, seed, precision,
                                                    variant[0] if variant else None, args,
                                                    tokenizer)
                        record = dict(task=task, learning_rate=lr, run=run, seed=seed,
                                      init_checkpoint=os.path.abspath(args.init_checkpoint),
                                      score=value, stuck=bool(stuck),
                                      seconds=round(time.perf_counter() - start, 1),
                                      steps=args.steps, warmup=args.warmup,
                                      batch_size=args.batch_size,
                                      max_seq_length=args.max_seq_length, rows=rows)
                        print(json.dumps(record), flush=True)
                        with open(path, "a") as f:
                            f.write(json.dumps(record) + "\n")
                        results.append(record)
    print(summarise(results))
    print(wide_table(results))
    print(against_peer(results))
    print(summarise_rows(results))


if __name__ == "__main__":
    main()
