"""The trainer's progress lines and train summaries: loss sums and examples/s since the last
line."""

import time

import tensorflow as tf
from absl import logging


class Progress:
    """Loss sums and examples/s over the steps since the last progress line."""

    def __init__(self, writer, global_batch_size, num_train_steps):
        self.writer, self.global_batch_size = writer, global_batch_size
        self.num_train_steps = num_train_steps
        self._reset()

    def _reset(self):
        self.sums, self.steps, self.start = None, 0, time.perf_counter()

    def restart(self):
        """Forgets the steps since the last line (training went back to a checkpoint)."""
        self._reset()

    def add(self, sums, steps):
        self.sums = sums if self.sums is None else {n: self.sums[n] + sums[n] for n in sums}
        self.steps += steps

    def log(self, step, metrics_from_sums, learning_rate):
        """A progress line and the train summaries at `step`; returns the metrics."""
        elapsed = time.perf_counter() - self.start
        metrics = {n: float(v) for n, v in metrics_from_sums(self.sums).items()}
        metrics["learning_rate"] = learning_rate
        metrics["examples_per_second"] = self.steps * self.global_batch_size / elapsed
        logging.info("step %d/%d  " % (step, self.num_train_steps) + "  ".join(
            f"{n} {v:.4g}" for n, v in metrics.items()))
        with self.writer.as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
        self.writer.flush()
        self._reset()
        return metrics
