"""The training input of each worker as a plain tf.data iterator whose position is saved beside
every checkpoint, so that a resumed run reads the batches the killed run would have read.

tf.distribute's distributed iterators cannot be checkpointed; a worker's own `iter(dataset)`
can (shuffle buffers, interleave positions and the batch counter of dynamic masking included).
Each worker keeps its state under output_dir/input_state/worker-<i>/, written before the
model checkpoint of the same step, which is what makes the pair trusted. On a TPU the
distributed iterator stays (the TPU infeed needs it) and the input restarts from its seed.
Batches from tf.data service (data.service) need no state: a resumed run asks the service for
a new job that starts at the batch after its checkpoint.
"""

import json
import os

import tensorflow as tf
from absl import logging

from albert_tf.files import write_json

STATE_DIR = "input_state"


def worker_index_and_count(strategy):
    """(this worker's index, number of workers) of a multi-worker strategy, else (0, 1)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or isinstance(strategy, tf.distribute.TPUStrategy):
        return 0, 1
    spec = resolver.cluster_spec().as_dict()
    if not spec:
        return 0, 1
    chiefs, workers = len(spec.get("chief", [])), len(spec.get("worker", []))
    if resolver.task_type == "chief":
        return 0, chiefs + workers
    return chiefs + (resolver.task_id or 0), chiefs + workers


class TrainingInput:
    """Per-replica training batches from `dataset_fn(input_context)` for one worker."""

    def __init__(self, strategy, dataset_fn, output_dir, global_batch_size=None):
        self.strategy = strategy
        self.resumable = not isinstance(strategy, tf.distribute.TPUStrategy)
        # Batches from tf.data service resume by starting a new job at the right batch
        # (data.service): no iterator state to save.
        self.served = self.resumable and bool(getattr(dataset_fn, "data_service", None))
        index, count = worker_index_and_count(strategy)
        self.directory = os.path.join(output_dir, STATE_DIR, f"worker-{index}")
        if not self.resumable:
            self.iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
            return
        self.local_replicas = strategy.num_replicas_in_sync // count
        context = tf.distribute.InputContext(num_input_pipelines=count,
                                             input_pipeline_id=index,
                                             num_replicas_in_sync=strategy.num_replicas_in_sync)
        self._dataset_fn, self._context = dataset_fn, context
        if self.served:
            return
        self._start()
        self._checkpoint = tf.train.Checkpoint(iterator=self.iterator)
        # What a saved position belongs to: restored into another batch shape or file list, an
        # iterator fails later (Incompatible shapes, OutOfRange) instead of now; a batch size
        # that the shapes leave open (None: fine-tuning's) would go on at another place.
        self.signature = {"batches": repr(self.iterator.element_spec),
                          "global_batch_size": global_batch_size,
                          "input_files": [os.fspath(f) for f in
                                          getattr(dataset_fn, "input_files", ())]}

    def _start(self, **kwargs):
        with tf.device("/cpu:0"):
            self.iterator = iter(self._dataset_fn(self._context, **kwargs))

    def next(self):
        """The next batch of every replica (call inside the training tf.function)."""
        if not self.resumable or self.local_replicas == 1:
            return next(self.iterator)
        batches = [next(self.iterator) for _ in range(self.local_replicas)]
        return self.strategy.experimental_distribute_values_from_function(
            lambda ctx: batches[ctx.replica_id_in_sync_group % self.local_replicas])

    def _prefix(self, step):
        return os.path.join(self.directory, f"step-{step}")

    def save(self, step):
        """Writes the position after `step` (before the model checkpoint of that step)."""
        if self.resumable and not self.served:
            tf.io.gfile.makedirs(self.directory)
            write_json(self._prefix(step) + ".json", self.signature)
            self._checkpoint.write(self._prefix(step))

    def skip(self, batches):
        """Reads past `batches` global batches (a loss-excursion recovery's; served input
        starts past them, `restore`'s offset)."""
        if self.served or not batches:
            return
        logging.info("Skipping %d batches of the training input (a recovery's)", batches)
        for _ in range(batches * (self.local_replicas if self.resumable else 1)):
            next(self.iterator)

    def restore(self, step, batches_read=None):
        """Puts the input where it was after `step`; False (with a warning) when the state of
        that step is missing or does not fit this input pipeline. `batches_read`: the global
        batches read up to `step`, where known (the loss guard counts them: recoveries skip
        some), else `step`; served input starts after them."""
        if self.served:
            first = (step if batches_read is None else batches_read) * self.local_replicas
            self._start(start_batch=first)
            logging.info("Training batches come from the tf.data service, from batch %d", first)
            return step > 0
        if not self.resumable or step == 0:
            return False
        prefix = self._prefix(step)
        why = None
        if not tf.io.gfile.exists(prefix + ".index"):
            why = "none was saved with it (a TPU run, or a checkpoint from an older albert_tf)"
        elif self._changed(prefix):
            why = self._changed(prefix)
        else:
            try:
                self._checkpoint.read(prefix).assert_consumed()
            except (tf.errors.OpError, AssertionError, ValueError) as e:
                why = f"the saved one does not fit this input ({str(e).splitlines()[0]})"
        if why:
            logging.warning("The input position at step %d is not restored: %s. The input "
                            "starts again from its seed.", step, why)
            return False
        logging.info("Resumed the input position of step %d from %s", step, prefix)
        return True

    def _changed(self, prefix):
        """Why the input saved at `prefix` is not this one (None when it is, or unknown)."""
        try:
            with tf.io.gfile.GFile(prefix + ".json") as f:
                saved = json.load(f)
        except (tf.errors.NotFoundError, ValueError):
            return None
        batch_size = self.signature["global_batch_size"]
        if saved.get("batches") != self.signature["batches"] or saved.get(
                "global_batch_size", batch_size) != batch_size:
            return ("it was saved for other batches (--train_batch_size, --max_seq_length or "
                    "the replicas changed)")
        before, now = saved.get("input_files", []), self.signature["input_files"]
        if before != now:
            added, gone = len(set(now) - set(before)), len(set(before) - set(now))
            return (f"the input files changed since ({len(before)} then, {len(now)} now: "
                    f"{added} added, {gone} gone)")
        return None

    def prune(self, keep_steps):
        """Deletes the states of steps whose checkpoints are gone."""
        if not self.resumable or self.served or not tf.io.gfile.isdir(self.directory):
            return
        keep = {f"step-{s}" for s in keep_steps}
        for name in tf.io.gfile.listdir(self.directory):
            if name.split(".")[0] not in keep:
                tf.io.gfile.remove(os.path.join(self.directory, name))
