"""Synthetic pretraining batches and one training step on them: what the timing probes
(scripts/demo_plan.py, bench/) and the HLO dumps for GPUs (bench/gpu/) measure."""

import numpy as np


def pretraining_batch(vocab_size, batch, seq, preds, seed=0):
    """A full-length batch in the pretraining input schema (int32 ids, `preds` sorted masked
    positions inside the sequence, two segments, random sentence-order labels)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, (batch, seq)).astype(np.int32)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), preds, replace=False)
                                  for _ in range(batch)]), axis=1).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": (np.arange(seq)[None, :] >= seq // 2).astype(np.int32)
            .repeat(batch, 0),
            "masked_lm_positions": positions,
            "masked_lm_ids": np.take_along_axis(ids, positions, 1),
            "masked_lm_weights": np.ones(positions.shape, np.float32),
            "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype(np.int32)}


def pretraining_step(model, optimizer, features):
    """One update of an AlbertPretrainer on `features` (the trainer's loss: MLM + SOP over the
    batch); wrap it in tf.function, with jit_compile as wanted."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        sums = model.loss_sums(features, model(features, training=True))
        loss = model.replica_loss(sums, sums)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
