"""Speed (and output statistics) of the pretraining data builder on a generated corpus.

    python bench/bench_data.py --mb=2 --dupe_factor=5 --max_seq_length=128 --vocab_size=8000
    python bench/bench_data.py ... --original_script=/path/to/original/create_pretraining_data.py
    python bench/bench_data.py --language=zh --mb=1 ...   # Chinese text, WordPiece vocabulary

English (default): an English-like corpus and a SentencePiece model trained on it. Chinese:
a Chinese-like corpus (Zipfian CJK characters, some English words and numbers, full-width
punctuation) and a WordPiece vocabulary laid out as the Chinese releases' vocab_chinese.txt
(--vocab_file). Times `albert_tf.create_pretraining_data` with one worker on one file and with
two workers on two half files, and, when given a copy of the original script (it needs its
`tokenization.py` beside it), times it on the same corpus and compares the statistics of both
outputs. Timings exclude interpreter start-up (they are read from each run's log) and are also
reported wall-clock.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

WORDS = (
    "the of and to a in that is was he for it with as his on be at by i this had not are but "
    "from or have an they which one you were her all she there would their we him been has when "
    "who will more no if out so said what up its about into than them can only other new some "
    "could time these two may then do first any my now such like our over man me even most made "
    "after also did many before must through back years where much your way well down should "
    "because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take three house himself "
    "few around place again without thought went say however number part small every found "
    "general night left among city power order public water morning letter friend family "
    "government business question country children history system several interest important "
    "experience whether perhaps something nothing everything although certainly immediately "
    "particularly understanding conversation acquaintance disappointment recollection "
    "satisfaction consideration circumstances neighbourhood agreeable excellent").split()
LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
LETTER_WEIGHTS = [12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4,
                  2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1]


def generate_corpus(path, megabytes, seed=12345):
    """Writes an English-like corpus: Zipfian common words, Zipfian made-up words, numbers with
    commas and decimals, sentences of 4-40 words, documents of 2-60 sentences."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    rare = ["".join(rng.choices(LETTERS, LETTER_WEIGHTS, k=rng.randint(3, 12)))
            for _ in range(30000)]
    rare_weights = [1.0 / (i + 1) ** 0.8 for i in range(len(rare))]
    target = int(megabytes * 1_000_000)
    size = 0
    with open(path, "w", encoding="utf-8") as f:
        while size < target:
            lines = []
            for _ in range(rng.randint(2, 60)):
                n = rng.randint(4, 40)
                words = rng.choices(WORDS, weights, k=n)
                for k in range(n):
                    r = rng.random()
                    if r < 0.25:
                        words[k] = rng.choices(rare, rare_weights)[0]
                    elif r < 0.10:
                        words[k] = f"{rng.randint(1, 2000)}.{rng.randint(0, 9)},"
                    elif r < 0.16:
                        words[k] += ","
                words[0] = words[0].capitalize()
                lines.append(" ".join(words) + rng.choice(".....?!"))
            text = "\n".join(lines) + "\n\n"
            f.write(text)
            size += len(text.encode())
    return path


CJK_FIRST = 0x4E00
ZH_PUNCT = "，。！？、：；“”（）《》"
ZH_WORDS = ("ALBERT", "BERT", "Google", "TensorFlow", "GPU", "model", "data", "learning")


def generate_chinese_corpus(path, megabytes, seed=12345, characters=3500):
    """Writes a Chinese-like corpus: Zipfian characters, clauses split by full-width commas,
    some English words and numbers, sentences of 8-60 characters, documents of 2-40 sentences."""
    rng = random.Random(seed)
    chars = [chr(CJK_FIRST + i) for i in range(characters)]
    weights = [1.0 / (i + 1) ** 0.9 for i in range(characters)]
    target = int(megabytes * 1_000_000)
    size = 0
    with open(path, "w", encoding="utf-8") as f:
        while size < target:
            lines = []
            for _ in range(rng.randint(2, 40)):
                clauses = []
                for _ in range(rng.randint(1, 4)):
                    clause = "".join(rng.choices(chars, weights, k=rng.randint(4, 16)))
                    r = rng.random()
                    if r < 0.15:
                        clause += rng.choice(ZH_WORDS)
                    elif r < 0.25:
                        clause += str(rng.randint(1, 2020))
                    clauses.append(clause)
                lines.append("，".join(clauses) + rng.choice("。。。！？"))
            text = "\n".join(lines) + "\n\n"
            f.write(text)
            size += len(text.encode())
    return path


def write_chinese_vocab(path, characters=3500):
    """A WordPiece vocabulary in the Chinese releases' layout: [PAD], [unused*], [UNK], [CLS],
    [SEP], [MASK], punctuation, digits, letters, characters and their ## forms, some words."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)]
    tokens += ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list(ZH_PUNCT)
    tokens += list("0123456789") + list(letters) + ["##" + c for c in "0123456789" + letters]
    chars = [chr(CJK_FIRST + i) for i in range(characters)]
    tokens += chars + ["##" + c for c in chars]
    tokens += ["albert", "bert", "google", "tensor", "##flow", "gp", "##u", "model", "data",
               "learn", "##ing"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return path, tokens.index("[MASK]")


def _run(cmd, log_pattern):
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.time() - start
    if proc.returncode:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")
    m = re.findall(log_pattern, proc.stderr)
    return wall, (float(m[-1]) if m else None), proc.stderr


def vocabulary_flags(vocabulary):
    """The builder's flags for a SentencePiece model or a WordPiece vocabulary (ours and the
    original's take the same)."""
    if vocabulary.endswith(".model"):
        return [f"--spm_model_file={vocabulary}", "--vocab_file=unused"]
    return [f"--vocab_file={vocabulary}", "--spm_model_file="]


def run_ours(inputs, output, model, args, workers):
    cmd = [sys.executable, "-m", "albert_tf.create_pretraining_data",
           f"--input_file={','.join(inputs)}", f"--output_file={output}",
           *vocabulary_flags(model)[:1], f"--max_seq_length={args.max_seq_length}",
           f"--dupe_factor={args.dupe_factor}", f"--num_workers={workers}", "--overwrite"]
    return _run(cmd, r"Wrote \d+ instances from .* in ([\d.]+) s")


def run_original(script, inputs, output, model, args):
    """The original script, timed from inside by a driver that wraps its `main`."""
    driver = (
        "import sys, time, absl.logging as L; sys.path.insert(0, sys.argv[1]); "
        "sys.argv = sys.argv[1:]; import create_pretraining_data as c; m = c.main\n"
        "def timed(a):\n t = time.time(); m(a); L.info('ORIGINAL_SECONDS %.3f', time.time() - t)\n"
        "c.main = timed; c.flags.mark_flag_as_required('input_file'); c.tf.app.run(timed)")
    cmd = [sys.executable, "-c", driver, os.path.dirname(os.path.abspath(script)),
           f"--input_file={','.join(inputs)}", f"--output_file={output}",
           *vocabulary_flags(model),
           f"--max_seq_length={args.max_seq_length}", f"--dupe_factor={args.dupe_factor}"]
    return _run(cmd, r"ORIGINAL_SECONDS ([\d.]+)")


def record_stats(paths, max_seq_length, max_predictions, mask_id=4):
    """Statistics of pretraining records: counts, lengths, masking, spans, labels."""
    import tensorflow as tf

    from albert_tf.data.records import pretraining_feature_spec

    spec = pretraining_feature_spec(max_seq_length, max_predictions)
    ds = tf.data.TFRecordDataset(paths).batch(1024).map(
        lambda x: tf.io.parse_example(x, spec))
    cols = {k: [] for k in spec}
    for batch in ds:
        for k in spec:
            cols[k].append(batch[k].numpy())
    f = {k: np.concatenate(v) for k, v in cols.items()}
    n = len(f["input_ids"])
    lengths = f["input_mask"].sum(1)
    w = f["masked_lm_weights"] > 0
    rows = np.nonzero(w)[0]
    pos = f["masked_lm_positions"][w]
    labels = f["masked_lm_ids"][w]
    shown = f["input_ids"][rows, pos]
    is_mask = shown == mask_id
    kept = (shown == labels) & ~is_mask
    # Spans: runs of consecutive masked words (words start where token_boundary is 1).
    runs = []
    for i in range(min(n, 20000)):
        length = int(lengths[i])
        tb = f["token_boundary"][i, :length].copy()
        ids = f["input_ids"][i, :length]
        special = np.zeros(length, bool)
        special[0] = True
        special[np.nonzero(f["segment_ids"][i, :length] == 1)[0][[0, -1]] - [1, 0]] = True
        masked = np.zeros(length, bool)
        masked[f["masked_lm_positions"][i][f["masked_lm_weights"][i] > 0]] = True
        text = np.nonzero(~special)[0]
        word_start = tb[text] == 1
        word_start[0] = True
        word_ids = np.cumsum(word_start) - 1
        word_masked = np.zeros(word_ids[-1] + 1, bool)
        word_masked[word_ids[masked[text]]] = True
        run = 0
        for m in word_masked:
            if m:
                run += 1
            elif run:
                runs.append(run)
                run = 0
        if run:
            runs.append(run)
        del ids
    runs = np.array(runs)
    span_hist = [float(np.mean(runs == k)) for k in (1, 2, 3)] + [float(np.mean(runs > 3))]
    return {
        "instances": n,
        "mean_tokens": float(lengths.mean()),
        "short_fraction(<half)": float(np.mean(lengths < max_seq_length // 2)),
        "masked_per_instance": float(w.sum(1).mean()),
        "masked_fraction_of_tokens": float(w.sum() / lengths.sum()),
        "mask_ratio": float(is_mask.mean()),
        "kept_ratio": float(kept.mean()),
        "random_ratio": float(1 - is_mask.mean() - kept.mean()),
        "masked_word_runs_1_2_3_more": span_hist,
        "mean_pieces_per_masked_run": float(w.sum() / max(len(runs), 1)) if n <= 20000 else None,
        "sop_label_1": float(f["next_sentence_labels"].mean()),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=2.0, help="corpus size in MB")
    p.add_argument("--corpus", help="use this text file instead of a generated corpus")
    p.add_argument("--language", choices=["en", "zh"], default="en",
                   help="en: SentencePiece on English-like text; zh: WordPiece on Chinese-like "
                        "text")
    p.add_argument("--dupe_factor", type=int, default=5)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--vocab_size", type=int, default=8000)
    p.add_argument("--original_script", help="path to a copy of the original script")
    p.add_argument("--stats", action="store_true", help="also compare output statistics")
    p.add_argument("--workdir", default=None)
    args = p.parse_args()

    work = args.workdir or tempfile.mkdtemp(prefix="bench_data_")
    os.makedirs(work, exist_ok=True)
    generate = generate_chinese_corpus if args.language == "zh" else generate_corpus
    corpus = args.corpus or generate(os.path.join(work, "corpus.txt"), args.mb)
    with open(corpus, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    half = len(lines) // 2
    while half < len(lines) and lines[half]:
        half += 1  # split at a document boundary
    halves = [os.path.join(work, "half0.txt"), os.path.join(work, "half1.txt")]
    for path, part in zip(halves, (lines[:half], lines[half:])):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(part))
    mb = os.path.getsize(corpus) / 1e6

    if args.language == "zh":
        model, mask_id = write_chinese_vocab(os.path.join(work, "vocab_chinese.txt"))
        vocab_size = sum(1 for _ in open(model, encoding="utf-8"))
    else:
        from albert_tf.data.vocab import train_sentencepiece
        model = train_sentencepiece(corpus, os.path.join(work, "spm"), args.vocab_size,
                                    num_threads=os.cpu_count() or 1)
        mask_id, vocab_size = 4, args.vocab_size

    results = {"language": args.language, "corpus_mb": round(mb, 3),
               "dupe_factor": args.dupe_factor,
               "max_seq_length": args.max_seq_length, "vocab_size": vocab_size,
               "cpus": os.cpu_count(), "python": sys.version.split()[0]}
    wall, inner, _ = run_ours([corpus], os.path.join(work, "ours.tfrecord"), model, args, 1)
    results["ours_1_worker_s"] = inner
    results["ours_1_worker_wall_s"] = round(wall, 2)
    results["ours_1_worker_mb_copies_per_s"] = round(mb * args.dupe_factor / inner, 2)
    wall, inner, _ = run_ours(halves, os.path.join(work, "ours2.tfrecord"), model, args, 1)
    results["ours_2_shards_1_worker_s"] = inner
    wall, inner, _ = run_ours(halves, os.path.join(work, "ours2.tfrecord"), model, args, 2)
    results["ours_2_shards_2_workers_s"] = inner
    results["ours_2_workers_wall_s"] = round(wall, 2)
    results["ours_2_workers_mb_copies_per_s"] = round(mb * args.dupe_factor / inner, 2)
    if args.original_script:
        wall, inner, _ = run_original(args.original_script, [corpus],
                                      os.path.join(work, "original.tfrecord"), model, args)
        results["original_s"] = inner
        results["original_wall_s"] = round(wall, 2)
        results["original_mb_copies_per_s"] = round(mb * args.dupe_factor / inner, 3)
        results["speedup_1_worker"] = round(inner / results["ours_1_worker_s"], 1)
        results["speedup_2_workers"] = round(inner / results["ours_2_shards_2_workers_s"], 1)
    print(json.dumps(results, indent=1))
    if args.stats:
        stats = {"ours": record_stats([os.path.join(work, "ours.tfrecord")],
                                      args.max_seq_length, 20, mask_id)}
        if args.original_script:
            stats["original"] = record_stats([os.path.join(work, "original.tfrecord")],
                                             args.max_seq_length, 20, mask_id)
        print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
