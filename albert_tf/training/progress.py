"""The trainer's progress lines and train summaries: loss sums and examples/s since the last
line."""

import contextlib
import time

import tensorflow as tf
from absl import logging


class Progress:
    """Loss sums and examples/s over the steps since the last progress line. The examples/s
    count the training calls' time (`timed`): not the checkpoints and evaluations between
    them, nor the first call, which traces and compiles the step (its time is logged apart)."""

    def __init__(self, writer, global_batch_size, num_train_steps):
        self.writer, self.global_batch_size = writer, global_batch_size
        self.num_train_steps = num_train_steps
        self.first_call = True
        self._reset()

    def _reset(self):
        self.sums, self.steps = None, 0
        self.timed_steps, self.seconds, self.first_seconds = 0, 0.0, 0.0

    def restart(self):
        """Forgets the steps since the last line (training went back to a checkpoint)."""
        self._reset()

    @contextlib.contextmanager
    def timed(self, steps):
        """Times one training call of `steps` steps."""
        start = time.perf_counter()
        yield
        seconds = time.perf_counter() - start
        if self.first_call:
            self.first_call, self.first_seconds = False, seconds
            logging.info("The first training call (%d step%s) took %.2f s: it traces and "
                         "compiles the step, and the examples/s leave it out", steps,
                         "" if steps == 1 else "s", seconds)
        else:
            self.timed_steps += steps
            self.seconds += seconds

    def add(self, sums, steps):
        self.sums = sums if self.sums is None else {n: self.sums[n] + sums[n] for n in sums}
        self.steps += steps

    def log(self, step, metrics_from_sums, learning_rate):
        """A progress line and the train summaries at `step`; returns the metrics."""
        metrics = {n: float(v) for n, v in metrics_from_sums(self.sums).items()}
        metrics["learning_rate"] = learning_rate
        steps, seconds = ((self.timed_steps, self.seconds) if self.timed_steps else
                          (self.steps, self.seconds + self.first_seconds))
        metrics["examples_per_second"] = steps * self.global_batch_size / max(seconds, 1e-9)
        logging.info("step %d/%d  " % (step, self.num_train_steps) + "  ".join(
            f"{n} {v:.4g}" for n, v in metrics.items()))
        with self.writer.as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
        self.writer.flush()
        self._reset()
        return metrics
