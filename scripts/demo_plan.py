"""Sizes the demo to a time budget on this machine: times the demo model's pretraining step in
float32 and (on CPUs with native bfloat16) in mixed bfloat16, keeps the faster precision, and
picks the number of pretraining steps (and fine-tuning epochs) that fit the budget.

  python scripts/demo_plan.py --minutes=8 --config=configs/albert_demo.json --batch=32 --seq=32

Prints shell assignments (PRECISION, STEPS, FINETUNE_EPOCHS) on stdout, the plan in words on
stderr.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from albert_tf.startup import quiet_stderr  # noqa: E402

if __name__ == "__main__":
    quiet_stderr()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig, AlbertPretrainer, create_optimizer  # noqa: E402
from albert_tf.data.synthetic import pretraining_batch, pretraining_step  # noqa: E402

PRECISIONS = {"none": "float32", "bfloat16": "mixed_bfloat16"}
# Measured on the demo's own logs (README): the stages besides pretraining and fine-tuning
# (process start-ups, exports, predictions, the report) took 45 s on a 2-core Xeon, twice that
# is allowed; pretraining's start-up, input pipeline (dynamic masking), held-out evaluations and
# checkpoints added 27% to the timed steps with 2 cores and 45% with one (2026-11-23, the demo
# at seq 32), 60% is allowed; a fine-tuning step (94 an epoch: 3000 sentences, batch 32) with
# its evaluations cost about 1.2 timed pretraining steps, 1.3 is allowed.
FIXED_SECONDS = 90
PRETRAIN_OVERHEAD = 1.6
FINETUNE_STEPS_PER_EPOCH = 94
FINETUNE_STEP_COST = 1.3
MIN_STEPS, MAX_STEPS = 160, 20000


def step_seconds(config, policy, batch, seq, preds, budget_s=4.0, max_steps=12):
    """Median seconds of one training step (forward, backward, LAMB) under `policy`."""
    keras.mixed_precision.set_global_policy(policy)
    model = AlbertPretrainer(config)
    keras.mixed_precision.set_global_policy("float32")
    optimizer = create_optimizer(1e-3, 1000, 10, "lamb")
    features = {k: tf.constant(v)
                for k, v in pretraining_batch(config.vocab_size, batch, seq, preds).items()}
    step = tf.function(lambda: pretraining_step(model, optimizer, features))

    for _ in range(2):
        step().numpy()
    times, start = [], time.perf_counter()
    while len(times) < max_steps and (time.perf_counter() - start < budget_s or len(times) < 3):
        t = time.perf_counter()
        step().numpy()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def plan(seconds, minutes, epochs):
    """(steps, finetune_epochs) for `minutes` of demo given the step time: fine-tuning gets at
    most a quarter of the time (at least one epoch), pretraining the rest."""
    work = minutes * 60 - FIXED_SECONDS
    epoch = FINETUNE_STEPS_PER_EPOCH * FINETUNE_STEP_COST * seconds
    epochs = max(1, min(epochs, int(work / 4 // epoch)))
    free = work - epochs * epoch
    steps = max(MIN_STEPS, min(MAX_STEPS, free // (seconds * PRETRAIN_OVERHEAD)))
    return int(steps // 20 * 20), epochs  # whole quarters and tenths: evaluations, logs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=8.0)
    ap.add_argument("--config", default="configs/albert_demo.json")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--preds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--precision", default="auto", choices=["auto", *PRECISIONS])
    a = ap.parse_args()
    config = AlbertConfig.from_json_file(a.config)
    from albert_tf.training.distribution import cpu_has_native_bf16
    if a.precision != "auto":
        candidates = [a.precision]
    else:  # without AVX512-BF16/AMX, bfloat16 is emulated: not worth the probe's time
        candidates = list(PRECISIONS) if cpu_has_native_bf16() else ["none"]
    timed = {p: step_seconds(config, PRECISIONS[p], a.batch, a.seq, a.preds) for p in candidates}
    precision = min(timed, key=timed.get)
    steps, epochs = plan(timed[precision], a.minutes, a.epochs)
    pretrain_min = steps * timed[precision] * PRETRAIN_OVERHEAD / 60
    rest_min = (FIXED_SECONDS + epochs * FINETUNE_STEPS_PER_EPOCH * FINETUNE_STEP_COST
                * timed[precision]) / 60
    print("Measured one pretraining step (batch %d × %d tokens): %s → %s." % (
        a.batch, a.seq, ", ".join("%s %.2f s" % (PRECISIONS[p], s) for p, s in timed.items()),
        PRECISIONS[precision]), file=sys.stderr)
    print("Plan for about %.0f minutes: %d pretraining steps (~%.1f min), then fine-tuning for "
          "%d epoch(s), exports and predictions (~%.1f min)." % (
              pretrain_min + rest_min, steps, pretrain_min, epochs, rest_min), file=sys.stderr)
    print(f"PRECISION={precision} STEPS={steps} FINETUNE_EPOCHS={epochs} "
          f"STEP_SECONDS={timed[precision]:.3f}")


if __name__ == "__main__":
    main()
