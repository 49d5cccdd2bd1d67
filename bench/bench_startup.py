"""What a run pays before and around its steps: each tool's first run in a fresh process, with
our traced functions as they are now (AutoGraph off, albert_tf/tracing.py) and with AutoGraph
converting them, as tf.function does by default (what the package did before).

    python bench/bench_startup.py --repeats=3
    python bench/bench_startup.py --config=configs/albert_base_v2.json --tools=pretraining

Builds a SentencePiece model and pretraining records from the bundled corpus (bench_input.py),
then alternates the two modes, `--repeats` times each: `run_pretraining` (dynamic masking,
evaluation) for `--steps` steps, then `run_classifier` on the bundled SST-2 from that
checkpoint for `--steps` steps with evaluation, prediction and `--export_dir` (SavedModel and
LiteRT files). Each run is a process of its own; the figures are its wall time from start to
exit and the tool's `run()` within it. Last, the two modes' pretraining checkpoints are
compared tensor by tensor: the same seed gives the same weights either way.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

MODES = ("autograph_off", "autograph_on")


def child(args):
    """One tool run in this process; prints how long its imports and its run() took."""
    start = time.monotonic()
    import albert_tf.tracing as tracing
    if args.child_mode == "autograph_on":  # before any albert_tf module binds these
        tracing.graph_function = tf.function
        tf.autograph.experimental.do_not_convert = lambda fn: fn
    import albert_tf.run_classifier as run_classifier
    import albert_tf.run_pretraining as run_pretraining
    imported = time.monotonic()
    w, out = args.workdir, os.path.join(args.workdir, args.child_mode)
    common = [f"--max_seq_length={args.seq_length}", f"--mixed_precision={args.precision}",
              "--learning_rate=1e-4", f"--save_checkpoints_steps={args.steps}"]
    if args.child == "pretraining":
        tool, argv = run_pretraining, [
            "run_pretraining", f"--albert_config_file={args.config}",
            f"--input_file={w}/train-{args.seq_length}*",
            f"--eval_input_file={w}/train-{args.seq_length}*", f"--output_dir={out}/pretrained",
            f"--max_predictions_per_seq={args.predictions}", f"--train_batch_size={args.batch}",
            f"--num_train_steps={args.steps}", "--num_warmup_steps=0", "--dynamic_masking",
            "--do_eval", "--max_eval_steps=2", f"--eval_batch_size={args.batch}", *common]
    else:
        tool, argv = run_classifier, [
            "run_classifier", "--task_name=sst-2", f"--data_dir={ROOT}/data/glue",
            f"--init_checkpoint={out}/pretrained", f"--spm_model_file={w}/spm.model",
            f"--output_dir={out}/finetuned", "--do_train", "--do_eval", "--do_predict",
            f"--export_dir={out}/export", "--overwrite_export", f"--train_step={args.steps}",
            f"--train_batch_size={args.batch}", "--eval_batch_size=64",
            "--predict_batch_size=64", *common]
    try:
        tool.run(argv)
    except SystemExit as e:  # absl's app.run exits, 0 included
        if e.code:
            raise
    print(json.dumps({"albert_tf_import_s": imported - start,
                      "run_s": time.monotonic() - imported}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "albert_demo.json"))
    p.add_argument("--seq_length", type=int, default=128)
    p.add_argument("--predictions", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--precision", default="none")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tools", default="pretraining,classifier",
                   help="which runs, in order (classifier starts from pretraining's checkpoint)")
    p.add_argument("--vocab_size", type=int, default=5000)
    p.add_argument("--workdir", help=argparse.SUPPRESS)  # the children's; the parent makes its own
    p.add_argument("--child", choices=("pretraining", "classifier"), help=argparse.SUPPRESS)
    p.add_argument("--child_mode", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)

    from bench_input import build_records
    workdir = tempfile.mkdtemp(prefix="bench_startup_")
    corpus = os.path.join(ROOT, "data", "corpus", "persuasion.txt")
    build_records(workdir, corpus, args.seq_length, args.predictions, args.vocab_size, 1)
    tools = args.tools.split(",")
    times = {(mode, tool): [] for mode in MODES for tool in tools}
    for repeat in range(args.repeats):
        for mode in MODES if repeat % 2 == 0 else MODES[::-1]:
            shutil.rmtree(os.path.join(workdir, mode), ignore_errors=True)
            for tool in tools:
                start = time.monotonic()
                done = subprocess.run(
                    [sys.executable, __file__, *sys.argv[1:], f"--workdir={workdir}",
                     f"--child={tool}", f"--child_mode={mode}"],
                    capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{tool} ({mode}) failed:\n{done.stderr[-3000:]}")
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                figures["process_s"] = time.monotonic() - start
                times[mode, tool].append(figures)
                print(f"repeat {repeat} {mode:13s} {tool:11s} " + "  ".join(
                    f"{k} {v:6.1f}" for k, v in figures.items()), flush=True)
    print(f"\nmedians over {args.repeats} repeats ({args.config}, seq {args.seq_length}, "
          f"batch {args.batch}, {args.steps} steps, precision {args.precision}):")
    for tool in tools:
        med = {m: {k: statistics.median(f[k] for f in times[m, tool]) for k in times[m, tool][0]}
               for m in MODES}
        print(f"  {tool:11s} " + "  ".join(
            f"{k}: {med['autograph_off'][k]:.1f} vs {med['autograph_on'][k]:.1f} s "
            f"({med['autograph_on'][k] / med['autograph_off'][k]:.2f}x)"
            for k in ("run_s", "process_s")))
    differ = differing_tensors(*(os.path.join(workdir, m, "pretrained") for m in MODES))
    print(f"pretrained checkpoints of the two modes (same seed): "
          f"{'identical' if not differ else f'{len(differ)} tensors differ: {differ[:5]}'}")


def differing_tensors(dir_a, dir_b):
    """Names of the tensors that differ between the latest checkpoints in two directories."""
    a, b = (tf.train.load_checkpoint(tf.train.latest_checkpoint(d)) for d in (dir_a, dir_b))
    return [name for name in a.get_variable_to_shape_map()
            if not np.array_equal(a.get_tensor(name), b.get_tensor(name))]


if __name__ == "__main__":
    main()
