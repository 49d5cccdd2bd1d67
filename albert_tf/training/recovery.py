"""The loss guard at work in the Trainer (training.excursions says what an excursion is): an
excursion is reported (one log line, TensorBoard) and, as the settings say, stops the run or is
recovered from: back to a checkpoint from before it, past the batches that led into it, at a
lower learning rate. A recovery is written to excursions.json before anything else changes, so
a run killed during one makes it again when rerun."""

import os

import tensorflow as tf
from absl import logging

from albert_tf.modeling.optimizers import scale_learning_rate
from albert_tf.training import results
from albert_tf.training.checkpoint_files import CHECKPOINT_NAME
from albert_tf.training.excursions import LossExcursionError, plan_recovery, read_log, write_log
from albert_tf.training.failures import NonFiniteLossError


def learning_rate_factor(optimizer):
    """The factor a recovery lowers the optimizer's learning rate through (1 until then);
    made under the strategy's scope."""
    lr_scale = tf.Variable(1.0, trainable=False, name="lr_scale",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    scale_learning_rate(optimizer, lr_scale)
    return lr_scale


class NoRecovery:
    """A run without a loss guard: nothing observed, and training never goes back."""
    recovers = False
    replayed_step = None

    def __init__(self, saver):
        self.saver = saver

    def observe_eval(self, step, loss):
        pass

    def observe(self, step, loss, steps, restarts):
        return False

    def evaluated(self, on_checkpoint, path):
        on_checkpoint(path, self.saver.step)
        return False

    def restored(self, with_state, step):
        pass

    def finish_interrupted(self, resumed):
        return resumed

    def take_input_skip(self):
        return 0


class Recovery:
    """Acts on what the `guard` sees. `saver`: the run's CheckpointSaver; `restore(prefix)`:
    the trainer's; `writer(name)`: its summary writers."""

    def __init__(self, guard, lr_scale, saver, restore, writer):
        self.guard, self.settings, self.lr_scale = guard, guard.settings, lr_scale
        self.saver, self.restore, self.writer = saver, restore, writer
        self.output_dir = saver.output_dir
        self.input_skip = 0  # batches a resumed recovery still has to skip (Trainer.train)
        self._eval_excursion = None
        self.replayed_step = None  # an evaluation recorded before, run again (`resumed`)

    @property
    def recovers(self):
        return self.settings.action == "recover"

    def take_input_skip(self):
        """The batches a resumed recovery still has to skip, once."""
        skip, self.input_skip = self.input_skip, 0
        return skip

    def observe_eval(self, step, loss):
        self._eval_excursion = self.guard.observe_eval(step, loss)

    def observe(self, step, loss, steps, restarts):
        """Feeds the mean loss of the `steps` steps that ended at `step`; True when training
        went back to an earlier checkpoint."""
        return self.recovered(self.guard.observe(step, loss, steps), restarts)

    def evaluated(self, on_checkpoint, path):
        """Runs on_checkpoint for `path`; a held-out excursion it reports is acted on. Returns
        whether training went back to an earlier checkpoint."""
        on_checkpoint(path, self.saver.step)
        excursion, self._eval_excursion = self._eval_excursion, None
        return self.recovered(excursion, on_checkpoint)

    def resumed(self, on_checkpoint, path, scheduled):
        """The evaluation of the checkpoint a resumed run starts from (saved before its own), for
        the guard's held-out history: only where an uninterrupted run evaluated (`scheduled`; not
        the checkpoint an interrupt saved between two), and not recorded again where
        eval_results.txt already holds it (`replayed_step`: Trainer.record_eval skips it)."""
        if not scheduled:
            return
        self.replayed_step = results.recorded_step(self.output_dir)
        try:
            self.evaluated(on_checkpoint, path)
        finally:
            self.replayed_step = None

    def restored(self, with_state, step):
        """After a checkpoint is restored: one of an older run, without the guard's state,
        read its input one batch per step."""
        if not with_state:
            self.guard.state["batches_read"] = step
        self.lr_scale.assign(self.guard.state["lr_scale"])

    def recovered(self, excursion, restarts=None):
        """Reports an excursion and acts as the settings say; True when training went back to
        an earlier checkpoint (then `restarts`, given, evaluates it)."""
        if excursion is None:
            return False
        with self.writer("train").as_default(step=excursion.step):
            tf.summary.scalar("excursions/" + excursion.kind.replace(" ", "_"), excursion.loss)
        last = tf.train.latest_checkpoint(self.output_dir)
        self._stop_if_exhausted(excursion, last)
        entry = (plan_recovery(self.guard, excursion, self.saver.on_disk())
                 if self.recovers else None)
        if entry is None:
            return self._go_on(excursion, last)
        logging.warning(
            "Loss excursion: %s. Recovery %d: back to step %d (%s), past the %d batches that led "
            "into it, learning rate x%g", excursion.describe(), entry["number"],
            entry["rolled_back_to_step"], f"{CHECKPOINT_NAME}-{entry['rolled_back_to_step']}",
            entry["skipped_batches"], entry["lr_scale"])
        # Written first: a run killed from here on makes the same recovery when rerun.
        if self.saver.chief:
            write_log(self.output_dir, read_log(self.output_dir) + [entry])
        prefix = self.roll_back(entry)
        with self.writer("train").as_default(step=excursion.step):
            tf.summary.scalar("excursions/recoveries", entry["number"])
            tf.summary.scalar("excursions/learning_rate_factor", entry["lr_scale"])
        if restarts is not None:
            self.evaluated(restarts, prefix)
        return True

    def _stop_if_exhausted(self, excursion, last):
        """--on_loss_spike=stop, or the recoveries used up, stops the run."""
        recoveries = self.guard.state["recoveries"]
        if self.settings.action == "stop" or (self.recovers and
                                              recoveries >= self.settings.max_recoveries):
            why = ("--on_loss_spike=stop" if self.settings.action == "stop" else
                   f"{recoveries} recoveries already (--max_loss_recoveries)")
            raise LossExcursionError(
                f"{excursion.describe()}; stopped ({why}). Last checkpoint: {last or 'none'}; "
                f"excursions.json lists the recoveries. Lower --learning_rate and rerun in a "
                f"new --output_dir, or resume with --on_loss_spike=warn")

    def _go_on(self, excursion, last):
        """An excursion not recovered from: training goes on, saying so (a non-finite loss
        stops it)."""
        if excursion.kind == "non-finite loss":
            raise NonFiniteLossError(
                f"{excursion.describe()}, and no checkpoint from before it is left to go back "
                f"to; nothing was saved after it. Last checkpoint: {last or 'none'}. Lower "
                f"--learning_rate or check the data.")
        logging.warning("Loss excursion: %s. %s", excursion.describe(),
                        "Going on (--on_loss_spike=warn)" if self.settings.action == "warn" else
                        f"No checkpoint from before it (step <= "
                        f"{self.guard.anchor_for(excursion)}) to go back to: going on")
        return False

    def finish_interrupted(self, resumed):
        """A run killed after a recovery was decided and before its next checkpoint: the
        recovery is made again from excursions.json (the same checkpoint, learning rate and
        input position as the killed run's), so the rerun ends as an uninterrupted run.
        Returns the checkpoint training goes on from."""
        log = read_log(self.output_dir)
        done = self.guard.state["recoveries"]
        if done > len(log):
            logging.warning("The checkpoint counts %d recoveries and %s lists %d: the file was "
                            "changed or removed", done,
                            os.path.join(self.output_dir, "excursions.json"), len(log))
        if done >= len(log):
            return resumed
        entry = log[-1]
        logging.warning("Recovery %d was not finished before the run stopped: going back to "
                        "step %d as it did", entry["number"], entry["rolled_back_to_step"])
        prefix = self.roll_back(entry)
        self.input_skip = entry["skipped_batches"]
        return prefix

    def roll_back(self, entry):
        """Restores the recovery's checkpoint (dropping every later one) and applies it: the
        recovery count, the input offset and the learning-rate factor. Returns the prefix."""
        anchor = entry["rolled_back_to_step"]
        prefix = self.saver.on_disk().get(anchor)
        if prefix is None:
            raise LossExcursionError(
                f"the checkpoint of step {anchor} that recovery {entry['number']} goes back to "
                f"is not in {self.output_dir}")
        self.saver.drop([s for s in self.saver.on_disk() if s > anchor])
        self.restore(prefix)
        self.guard.apply(entry)
        self.lr_scale.assign(entry["lr_scale"])
        return prefix
