"""Training throughput of ALBERT-base (MLM, seq 128) against KerasHub and transformers (PyTorch).

Every peer runs the same shapes in the same process, interleaved over rounds, fp32 and bf16:
  python bench/bench_pretraining.py --batch_size=8 --steps=3 --rounds=3
Ours trains MLM + SOP with LAMB (the full original objective); the peers train MLM only with
Adam, which is slightly less work. A GEMM calibration is printed next to each round, since the
speed of these shared machines drifts.
"""

import argparse
import json
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import triton_first  # noqa: E402,F401  (before TensorFlow: bench/triton_first.py)
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import gemm_bound  # noqa: E402

BASE = dict(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
            num_attention_heads=12, intermediate_size=3072, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


def make_batch(batch, seq, preds, seed=0):
    from albert_tf.data.synthetic import pretraining_batch
    return pretraining_batch(BASE["vocab_size"], batch, seq, preds, seed)


def gemm_gflops():
    a, b = tf.random.normal([4096, 768]), tf.random.normal([768, 3072])
    f = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    f()
    start, n = time.perf_counter(), 10
    for _ in range(n):
        f().numpy()
    return 2 * 4096 * 768 * 3072 * n / (time.perf_counter() - start) / 1e9


def with_policy(policy, build):
    keras.mixed_precision.set_global_policy(policy)
    try:
        return build()
    finally:
        keras.mixed_precision.set_global_policy("float32")


def ours(batch, precision, jit_compile=False):
    """Our step; with `jit_compile` forward, backward and LAMB update as one XLA computation
    (what --jit_compile=true compiles with one device)."""
    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.modeling.optimizers import create_optimizer
    policy = "mixed_bfloat16" if precision == "bf16" else "float32"
    model = with_policy(policy, lambda: AlbertPretrainer(AlbertConfig(**BASE)))
    optimizer = create_optimizer(1e-4, 1000, 10, "lamb")
    features = {k: tf.constant(v) for k, v in batch.items()}

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            loss = model.compute_loss(features, y_pred=model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return lambda: step().numpy()


def kerashub(batch, precision):
    import keras_hub
    policy = "mixed_bfloat16" if precision == "bf16" else "float32"
    backbone = with_policy(policy, lambda: keras_hub.models.AlbertBackbone(
        vocabulary_size=BASE["vocab_size"], num_layers=12, num_heads=12, embedding_dim=128,
        hidden_dim=768, intermediate_dim=3072, dropout=0.0))
    model = with_policy(policy, lambda: keras_hub.models.AlbertMaskedLM(backbone))
    optimizer = keras.optimizers.Adam(1e-4)
    x = {"token_ids": tf.constant(batch["input_word_ids"]),
         "segment_ids": tf.constant(batch["input_type_ids"]),
         "padding_mask": tf.constant(batch["input_mask"]),
         "mask_positions": tf.constant(batch["masked_lm_positions"])}
    y = tf.constant(batch["masked_lm_ids"])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return lambda: step().numpy()


def transformers_torch(batch, precision):
    import torch
    import transformers
    torch.manual_seed(0)
    model = transformers.AlbertForMaskedLM(transformers.AlbertConfig(**BASE)).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    ids = torch.tensor(batch["input_word_ids"], dtype=torch.long)
    labels = torch.full_like(ids, -100)
    rows = torch.arange(ids.shape[0])[:, None]
    positions = torch.tensor(batch["masked_lm_positions"], dtype=torch.long)
    labels[rows, positions] = ids[rows, positions]
    kwargs = dict(attention_mask=torch.tensor(batch["input_mask"]),
                  token_type_ids=torch.tensor(batch["input_type_ids"], dtype=torch.long))

    def step():
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(input_ids=ids, labels=labels, **kwargs).loss
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


PEERS = {"albert_tf": ours, "kerashub": kerashub, "transformers": transformers_torch,
         "albert_tf_xla": lambda batch, precision: ours(batch, precision, jit_compile=True)}


def time_steps(step, steps):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per round")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--no_gemm_bound", action="store_true",
                        help="skip timing the step's matmuls alone (bench/gemm_bound.py)")
    args = parser.parse_args()
    batch = make_batch(args.batch_size, args.seq_length, args.predictions)
    peers, precisions = args.peers.split(","), args.precisions.split(",")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; tf {tf.__version__}, "
          f"keras {keras.__version__}; batch {args.batch_size}, seq {args.seq_length}")
    # Build and warm every peer first, then interleave the timed rounds, so that a slow phase
    # of the shared machine hits every peer alike.
    steps = {}
    for precision in precisions:
        for peer in peers:
            steps[(peer, precision)] = step = PEERS[peer](batch, precision)
            for _ in range(args.warmup):
                step()
    results = {key: [] for key in steps}
    for round_idx in range(args.rounds):
        print(f"round {round_idx}: GEMM calibration {gemm_gflops():.0f} GFLOP/s fp32", flush=True)
        for (peer, precision), step in steps.items():
            seconds = time_steps(step, args.steps)
            results[(peer, precision)].append(args.batch_size / seconds)
            print(f"  {peer:13s} {precision}: {seconds:6.2f} s/step  "
                  f"{args.batch_size / seconds:5.2f} seq/s", flush=True)
    print("\nmedian over rounds, sequences/s (ratio = albert_tf / best peer):")
    summary = {}
    for precision in precisions:
        rates = {p: float(np.median(results[(p, precision)])) for p in peers}
        others = {p: r for p, r in rates.items() if not p.startswith("albert_tf")}
        best = max(others, key=others.get) if others else None
        ratio = rates["albert_tf"] / others[best] if best and "albert_tf" in rates else None
        summary[precision] = {"rates": rates, "best_peer": best, "ratio": ratio}
        print(f"  {precision}: " + ", ".join(f"{p} {r:.2f}" for p, r in rates.items())
              + (f"  → {ratio:.2f}x {best}" if ratio else ""))
        if not args.no_gemm_bound and args.batch_size == 8 and args.seq_length == 128:
            bound = gemm_bound.bound_seconds(precision)
            summary[precision]["matmul_bound_seq_per_s"] = args.batch_size / bound
            print(f"    the step's matmuls alone: {bound:.2f} s/step = "
                  f"{args.batch_size / bound:.2f} seq/s, the ceiling for any implementation "
                  "with this matmul library (bench/gemm_bound.py)")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
