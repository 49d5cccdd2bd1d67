"""The matmul-only lower bound of one ALBERT-base pretraining step on this machine.

  python bench/gemm_bound.py --precisions=fp32,bf16

Times, one by one and outside any model, every matmul our training step runs (forward, the
input gradient and the weight gradient of every projection, the attention batch matmuls, the
embedding projection and the MLM head; the last layer only at [CLS] + the masked positions),
and adds them up. No implementation of the same step can beat this sum with the same matmul
library: it tells how much of a step is matmul and how much is everything else.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def step_matmuls(batch=8, seq=128, preds=20, hidden=768, inter=3072, emb=128, vocab=30000,
                 heads=12, layers=12):
    """[(count, batch_dims, m, k, n, transpose_a, transpose_b, dtype_is_compute)] of one step."""
    rows, last_rows, d = batch * seq, batch * (1 + preds), hidden // heads
    ops = []

    def dense(count, m, k, n, compute=True):
        ops.extend([(count, (), m, k, n, False, False, compute),    # y = x W
                    (count, (), m, n, k, False, True, compute),     # dx = dy W^T
                    (count, (), k, m, n, True, False, compute)])    # dW = x^T dy

    def attention(count, q_rows):
        b = (batch, heads)
        ops.extend([(count, b, q_rows, d, seq, False, True, True),  # q k^T
                    (count, b, q_rows, seq, d, False, False, True),  # p v
                    (count, b, q_rows, seq, d, False, False, True),  # d(q k^T) wrt q
                    (count, b, seq, q_rows, d, True, False, True),   # ... wrt k
                    (count, b, q_rows, d, seq, False, True, True),   # d(p v) wrt p
                    (count, b, seq, q_rows, d, True, False, True)])  # ... wrt v
    dense(4 * (layers - 1) + 2, rows, hidden, hidden)               # q k v o; k v of the last
    dense(layers - 1, rows, hidden, inter)
    dense(layers - 1, rows, inter, hidden)
    attention(layers - 1, seq)
    dense(2, last_rows, hidden, hidden)                             # last layer: q, o
    dense(1, last_rows, hidden, inter)
    dense(1, last_rows, inter, hidden)
    attention(1, 1 + preds)
    dense(1, rows, emb, hidden)                                     # embedding projection
    dense(1, batch * preds, hidden, emb)                            # MLM transform
    dense(1, batch * preds, emb, vocab, compute=False)              # tied vocabulary, float32
    return ops


def time_matmul(batch_dims, m, k, n, ta, tb, dtype, repeats=20):
    a = tf.cast(tf.random.normal([*batch_dims, *((k, m) if ta else (m, k))]), dtype)
    b = tf.cast(tf.random.normal([*batch_dims, *((n, k) if tb else (k, n))]), dtype)
    f = tf.function(lambda a, b: tf.matmul(a, b, transpose_a=ta, transpose_b=tb))
    f(a, b).numpy()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            out = f(a, b)
        out.numpy()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def bound_seconds(precision):
    dtype = tf.bfloat16 if precision == "bf16" else tf.float32
    total = 0.0
    for count, batch_dims, m, k, n, ta, tb, compute in step_matmuls():
        total += count * time_matmul(batch_dims, m, k, n, ta, tb,
                                     dtype if compute else tf.float32)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="fp32,bf16")
    args = parser.parse_args()
    for precision in args.precisions.split(","):
        print(f"{precision}: matmuls alone {bound_seconds(precision):.3f} s/step "
              "(ALBERT-base, batch 8, seq 128, 20 masked positions)", flush=True)


if __name__ == "__main__":
    main()
