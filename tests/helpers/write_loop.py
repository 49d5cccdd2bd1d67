"""Writes, round after round, each kind of file a run leaves behind (checkpoint and its
`checkpoint` state, model.ckpt-best with best_checkpoint.txt, eval_results.txt, a record shard,
a SavedModel export, a flatbuffer), every file of round i holding the value i. Prints `ready`
after the first round. test_resume.py kills it at many points and checks what a rerun trusts.

  python tests/helpers/write_loop.py OUTPUT_DIR
"""

import itertools
import os
import sys

import numpy as np
import tensorflow as tf

from albert_tf.data.records import AtomicTFRecordWriter
from albert_tf.files import atomic_write_bytes
from albert_tf.serving.saved_model import save_atomically
from albert_tf.training import results

SHAPE, RECORDS, RECORD_BYTES, BLOB_BYTES = (256, 1024), 2000, 1000, 1 << 20


def main(out):
    variable = tf.Variable(np.zeros(SHAPE, np.float32))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), out, max_to_keep=2,
                                         checkpoint_name="model.ckpt")
    for i in itertools.count(1):
        variable.assign(np.full(SHAPE, i, np.float32))
        path = manager.save(checkpoint_number=i)
        results.record_eval(out, {"global_step": i, "accuracy": float(i)}, path, "accuracy")
        with AtomicTFRecordWriter(os.path.join(out, "shard.tfrecord")) as writer:
            writer.write_batch([bytes([i % 256]) * RECORD_BYTES] * RECORDS)
        module = tf.Module()
        module.v = tf.Variable(float(i))
        save_atomically(module, os.path.join(out, "export"), signatures=None)
        atomic_write_bytes(os.path.join(out, "model.tflite"), bytes([i % 256]) * BLOB_BYTES)
        if i == 1:
            print("ready", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
