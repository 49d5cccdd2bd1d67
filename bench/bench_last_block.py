"""The classifier's training step with the last block at [CLS] only (what run_classifier runs)
against the whole sequence (the step before), in one process: the same weights and batch, the
loss and gradients compared, the median step time of each.

  python bench/bench_last_block.py [--config=configs/albert_demo.json] [--policy=mixed_bfloat16]
      [--batch=32] [--seq=128] [--steps=5]
"""
import argparse
import time

import keras
import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import AlbertEncoder

CLS_ONLY = AlbertEncoder.pooled_output


def _whole_sequence(encoder, inputs, training=None):
    return encoder(inputs, training=training)["pooled_output"]


def measure(model, features, steps):
    """(loss, flat gradients, median seconds per step) of a tf.function training step."""
    @tf.function
    def step():
        with tf.GradientTape() as tape:
            sums = model.loss_sums(features, model(features, training=True))
            loss = model.replica_loss(sums, model.denominators(features))
        return loss, tape.gradient(loss, model.trainable_variables)
    loss, grads = step()
    step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        float(step()[0])
        times.append(time.perf_counter() - start)
    flat = np.concatenate([tf.convert_to_tensor(g).numpy().ravel() for g in grads])
    return float(loss), flat, float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/albert_demo.json")
    ap.add_argument("--policy", default="mixed_bfloat16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    config = AlbertConfig.from_json_file(a.config)
    keras.mixed_precision.set_global_policy(a.policy)
    keras.utils.set_random_seed(0)
    model = AlbertClassifier(config, 2, classifier_dropout=0.0)
    keras.mixed_precision.set_global_policy("float32")
    rng = np.random.default_rng(0)
    shape = (a.batch, a.seq)
    features = {"input_word_ids": tf.constant(rng.integers(5, config.vocab_size, shape), tf.int32),
                "input_mask": tf.ones(shape, tf.int32), "input_type_ids": tf.zeros(shape, tf.int32),
                "label_ids": tf.constant(rng.integers(0, 2, a.batch), tf.int32)}
    results = {}
    for name, pooled in (("cls_only", CLS_ONLY), ("whole_sequence", _whole_sequence)):
        AlbertEncoder.pooled_output = pooled
        results[name] = measure(model, features, a.steps)
    AlbertEncoder.pooled_output = CLS_ONLY
    (loss, grads, t), (loss_all, grads_all, t_all) = results["cls_only"], results["whole_sequence"]
    print(f"{a.config} {a.policy} batch {a.batch} x {a.seq}: loss {loss:.6f} against "
          f"{loss_all:.6f}, gradients differ by "
          f"{np.linalg.norm(grads - grads_all) / np.linalg.norm(grads_all):.2e} of their norm; "
          f"{t * 1e3:.1f} ms a step against {t_all * 1e3:.1f}: {t_all / t:.2f}x")


if __name__ == "__main__":
    main()
