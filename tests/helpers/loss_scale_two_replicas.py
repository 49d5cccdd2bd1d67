"""One float16 training step under MirroredStrategy on two logical CPU devices, where only the
second replica's gradient holds an inf (injected); prints JSON: weights changed?, finite?, loss
scale before and after, optimizer step.

  python tests/helpers/loss_scale_two_replicas.py
"""
import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

if __name__ == "__main__":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(2)])
    import keras

    from albert_tf import AlbertConfig, AlbertPretrainer, create_optimizer
    from albert_tf.training.trainer import Trainer
    from albert_tf.training.trainer_options import TrainerOptions
    from conftest import SMALL

    keras.mixed_precision.set_global_policy("mixed_float16")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    trainer = Trainer(strategy, lambda: AlbertPretrainer(AlbertConfig(**SMALL)),
                      lambda: create_optimizer(1e-3, 10, 0, "lamb"), tempfile.mkdtemp(),
                      TrainerOptions(global_batch_size=4))
    gradients = trainer._gradients

    def second_replica_overflows(features, denominators):
        grads, sums = gradients(features, denominators)
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        grads[0] = grads[0] + tf.where(tf.equal(replica, 1), np.inf, 0.0)
        return grads, sums
    trainer._grad_fn = tf.function(second_replica_overflows)

    rng = np.random.RandomState(0)
    ids = rng.randint(5, 60, (4, 16)).astype(np.int32)
    batch = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
             "input_type_ids": np.zeros_like(ids),
             "masked_lm_positions": np.tile(np.arange(1, 5, dtype=np.int32), (4, 1)),
             "masked_lm_ids": rng.randint(5, 60, (4, 4)).astype(np.int32),
             "masked_lm_weights": np.ones((4, 4), np.float32),
             "next_sentence_labels": np.zeros((4, 1), np.int32)}
    data = tf.data.Dataset.from_tensors(batch).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(data))
    before = [v.numpy() for v in trainer.model.trainable_variables]
    scale_before = float(trainer.optimizer.dynamic_scale.numpy())
    trainer._train_fn(iterator, tf.constant(1))
    copies = [[np.asarray(c) for c in strategy.experimental_local_results(v.value)]
              for v in trainer.model.trainable_variables]  # each replica's copy
    print(json.dumps({
        "copies": len(copies[0]),
        "changed": any(not np.array_equal(c, b) for cs, b in zip(copies, before) for c in cs),
        "finite": bool(all(np.isfinite(c).all() for cs in copies for c in cs)),
        "scale_before": scale_before,
        "scale_after": float(trainer.optimizer.dynamic_scale.numpy()),
        "step": int(trainer.optimizer.iterations.numpy())}))
