"""The trainer's progress lines and train summaries: loss sums and examples/s since the last
line, and the time left."""

import contextlib
import time

import tensorflow as tf
from absl import logging

from albert_tf.modeling.optimizers import current_loss_scale


class Progress:
    """Loss sums and examples/s over the steps since the last progress line. The examples/s
    count the training calls' time (`timed`): not the checkpoints and evaluations between
    them, nor the first call, which traces and compiles the step (its time is logged apart; a
    line whose steps were all in it has no examples/s). The time left (`eta`) is the wall
    time per step since the first call, checkpoints and evaluations included."""

    def __init__(self, writer, global_batch_size, num_train_steps, optimizer=None):
        self.writer, self.global_batch_size = writer, global_batch_size
        self.num_train_steps, self.optimizer = num_train_steps, optimizer
        self.first_call = True
        self.since_first, self.steps_since_first = None, 0
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
            self.since_first = start + seconds
            logging.info("The first training call (%d step%s) took %.2f s: it traces and "
                         "compiles the step, and the examples/s leave it out", steps,
                         "" if steps == 1 else "s", seconds)
        else:
            self.timed_steps += steps
            self.seconds += seconds
            self.steps_since_first += steps

    def add(self, sums, steps):
        self.sums = sums if self.sums is None else {n: self.sums[n] + sums[n] for n in sums}
        self.steps += steps

    def log(self, step, metrics_from_sums, learning_rate):
        """A progress line and the train summaries at `step` (with float16's dynamic loss scale
        where the optimizer has one); returns the metrics."""
        metrics = {n: float(v) for n, v in metrics_from_sums(self.sums).items()}
        metrics["learning_rate"] = learning_rate
        loss_scale = current_loss_scale(self.optimizer)
        if loss_scale is not None:
            metrics["loss_scale"] = loss_scale
        if self.timed_steps:
            metrics["examples_per_second"] = (self.timed_steps * self.global_batch_size
                                              / max(self.seconds, 1e-9))
        left = ""
        if self.steps_since_first and step < self.num_train_steps:
            per_step = (time.perf_counter() - self.since_first) / self.steps_since_first
            left = f"  eta {_duration((self.num_train_steps - step) * per_step)}"
        logging.info("step %d/%d  " % (step, self.num_train_steps) + "  ".join(
            f"{n} {v:.4g}" for n, v in metrics.items()) + left)
        with self.writer.as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
        self.writer.flush()
        self._reset()
        return metrics


def _duration(seconds):
    """3h05m, 4m10s or 42s."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
