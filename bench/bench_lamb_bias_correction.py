"""Pretraining with LAMB with and without Adam's bias correction: held-out MLM and SOP accuracy
at a fixed step on the bundled corpus, several seeds (the evidence for run_pretraining's
--bias_correction default).

Builds (once) a SentencePiece vocabulary and records from the three training novels and the
held-out Persuasion, then runs run_pretraining for each seed and setting:

  python bench/bench_lamb_bias_correction.py --work_dir=/tmp/lamb_bc --steps=2000 --seeds=1,2,3
"""

import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = [os.path.join(ROOT, "data/corpus", f"{name}.txt")
          for name in ("pride_and_prejudice", "sense_and_sensibility", "emma")]
HELD_OUT = os.path.join(ROOT, "data/corpus/persuasion.txt")


def tool(name, *flags):
    subprocess.run([sys.executable, "-m", f"albert_tf.{name}", *flags], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def read_results(path):
    with open(path) as f:
        return {k: float(v) for k, v in (line.strip().split(" = ") for line in f if "=" in line)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--learning_rate", type=float, default=1e-2)
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args()
    w = args.work_dir
    os.makedirs(w, exist_ok=True)
    spm = os.path.join(w, "spm.model")
    if not os.path.exists(spm):
        tool("train_vocab", f"--input_file={','.join(CORPUS)}",
             f"--model_prefix={os.path.join(w, 'spm')}", "--vocab_size=8000")
    for name, files, dupe in (("train", ",".join(CORPUS), 4), ("eval", HELD_OUT, 1)):
        if not os.path.exists(os.path.join(w, f"{name}.done")):
            tool("create_pretraining_data", f"--input_file={files}",
                 f"--output_file={os.path.join(w, name, name + '.tfrecord')}",
                 f"--spm_model_file={spm}", f"--max_seq_length={args.seq}",
                 "--max_predictions_per_seq=10", f"--dupe_factor={dupe}", "--overwrite")
            open(os.path.join(w, f"{name}.done"), "w").close()
    rows = {}
    for correction in (False, True):
        for seed in args.seeds.split(","):
            out = os.path.join(w, f"bc{int(correction)}_seed{seed}")
            tool("run_pretraining", "--albert_config_file=configs/albert_demo.json",
                 f"--input_file={os.path.join(w, 'train', 'train.tfrecord*')}",
                 f"--eval_input_file={os.path.join(w, 'eval', 'eval.tfrecord')}",
                 f"--output_dir={out}", f"--max_seq_length={args.seq}",
                 "--max_predictions_per_seq=10", "--train_batch_size=32",
                 f"--num_train_steps={args.steps}", f"--num_warmup_steps={args.steps // 10}",
                 f"--learning_rate={args.learning_rate}", "--dynamic_masking", "--ngram=1",
                 f"--save_checkpoints_steps={args.steps}", "--do_eval",
                 "--eval_batch_size=64", "--max_eval_steps=20", f"--random_seed={seed}",
                 "--bias_correction" if correction else "--nobias_correction")
            result = read_results(os.path.join(out, "eval_results.txt"))
            rows.setdefault(correction, []).append(result)
            print(f"bias_correction={correction} seed {seed}: masked_lm_accuracy "
                  f"{result['masked_lm_accuracy']:.4f} sentence_order_accuracy "
                  f"{result['sentence_order_accuracy']:.4f}", flush=True)
    print("| --bias_correction | seeds | held-out MLM accuracy | held-out SOP accuracy |")
    print("|---|---|---|---|")
    for correction, results in rows.items():
        cells = []
        for key in ("masked_lm_accuracy", "sentence_order_accuracy"):
            values = [r[key] for r in results]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.mean(values):.4f} ± {spread:.4f}")
        print(f"| {str(correction).lower()} | {len(results)} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
