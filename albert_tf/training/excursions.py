"""Loss excursions: a training loss that spikes, a smoothed training loss that keeps rising
above its best, or a held-out loss that keeps rising. The guard sees them as the run goes; the
trainer says so (one log line, TensorBoard) and, by default, recovers as PaLM did (Chowdhery et
al. 2022, §5.1): back to the newest checkpoint from before the excursion, past the batches that
led into it, at a lower learning rate (as OPT's restarts did).

The guard's state is saved in every checkpoint (a PythonState), and each recovery is written to
output_dir/excursions.json before anything else changes: a killed run rerun ends as an
uninterrupted one, across a recovery too.
"""

import dataclasses
import json
import math
import os

import tensorflow as tf
from absl import flags

from albert_tf.files import write_json

ACTIONS = ("recover", "warn", "stop")
LOG_FILE = "excursions.json"


def define_flags(define, action):
    """The guard's flags through `define(kind, name, default, help, **kwargs)` (a script's
    flag-definition helper), --on_loss_spike defaulting to `action`."""
    d = ExcursionSettings()
    positive = (lambda v: math.isfinite(v) and v > 0, "must be a positive number")
    define(flags.DEFINE_enum, "on_loss_spike", action, list(ACTIONS),
           "A loss excursion (a spike, a smoothed training loss that keeps rising above its "
           "best, with run_pretraining's --do_eval a held-out MLM loss that keeps rising): "
           "recover (back to the newest checkpoint from before it, past the batches that led "
           "into it, at a lower learning rate), warn or stop (docs/pretraining.md, \"Loss "
           "excursions\").")
    define(flags.DEFINE_float, "loss_spike_sigmas", d.spike_sigmas,
           "A spike: a step's loss this many standard deviations above the smoothed loss.",
           validator=positive)
    define(flags.DEFINE_float, "loss_rise_tolerance", d.rise_tolerance,
           "A rise: the smoothed loss this fraction above its best for --loss_smoothing_steps.",
           validator=positive)
    define(flags.DEFINE_integer, "loss_smoothing_steps", d.smoothing_steps,
           "Window of the smoothed training loss, and the patience of a rise.", lower_bound=1)
    define(flags.DEFINE_integer, "eval_loss_rises", d.eval_rises,
           "Pretraining only (fine-tuning reads no held-out loss): a held-out excursion, the "
           "eval MLM loss rose at this many evaluations in a row.",
           lower_bound=1)
    define(flags.DEFINE_float, "recovery_lr_factor", d.lr_factor,
           "Each recovery multiplies the learning rate by this (1: unchanged).",
           validator=(lambda v: 0 < v <= 1, "must be in (0, 1]"))
    define(flags.DEFINE_integer, "max_loss_recoveries", d.max_recoveries,
           "Recoveries before an excursion stops the run.", lower_bound=0)


class LossExcursionError(RuntimeError):
    """A loss excursion stopped the run (--on_loss_spike=stop, or recoveries exhausted)."""
    exit_status = 1


@dataclasses.dataclass(frozen=True)
class ExcursionSettings:
    """What counts as an excursion and what is done about it (docs/pretraining.md, "Loss
    excursions", gives the measurements behind the defaults)."""
    action: str = "recover"
    # A chunk of steps whose mean loss lies this many standard deviations (of one step's loss
    # around the smoothed loss) above the smoothed loss is a spike.
    spike_sigmas: float = 8.0
    # The smoothed loss this fraction above its best for `smoothing_steps` steps is a rise.
    rise_tolerance: float = 0.05
    # The window of the smoothed loss (an exponential moving average), and the patience of a
    # rise; detection starts after this many steps.
    smoothing_steps: int = 200
    # A held-out loss that rose at this many evaluations in a row.
    eval_rises: int = 2
    # Each recovery multiplies the learning rate by this.
    lr_factor: float = 0.5
    max_recoveries: int = 3

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise ValueError(f"--on_loss_spike={self.action!r}; use one of {', '.join(ACTIONS)}")


@dataclasses.dataclass(frozen=True)
class Excursion:
    kind: str  # "spike", "rise", "held-out rise" or "non-finite loss"
    step: int
    loss: float
    smoothed: float
    best: float
    best_step: int

    def describe(self):
        if self.kind == "held-out rise":
            return (f"the held-out loss rose at {self.smoothed:g} evaluations in a row, to "
                    f"{self.loss:.4g} at step {self.step} (lowest {self.best:.4g} at step "
                    f"{self.best_step})")
        if self.kind == "non-finite loss":
            return f"the loss became {self.loss} at step {self.step}"
        if self.kind == "spike":
            return (f"a loss spike at step {self.step}: {self.loss:.4g} against a smoothed "
                    f"{self.smoothed:.4g}")
        return (f"the smoothed training loss rose to {self.smoothed:.4g} at step {self.step}, "
                f"above its best {self.best:.4g} (step {self.best_step})")


class LossGuard(tf.train.experimental.PythonState):
    """The detector, fed the loss of each chunk of training steps and each evaluation's."""

    def __init__(self, settings=None):
        self.settings = settings or ExcursionSettings()
        self.state = dict(steps=0, ema=None, var=0.0, spiking=0, last=None, last_steps=1,
                          max_sigmas=0.0, max_rise=0.0, best=math.inf, best_step=0,
                          above_since=None, eval_last=None, eval_rises=0, eval_best=math.inf,
                          eval_best_step=0, recoveries=0, batches_read=0, lr_scale=1.0)

    # ---- the checkpointed state ------------------------------------------------------------

    def serialize(self):
        return json.dumps(self.state)

    def deserialize(self, string_value):
        self.state = json.loads(string_value.numpy() if hasattr(string_value, "numpy")
                                else string_value)

    # ---- detection -------------------------------------------------------------------------

    def observe(self, step, loss, steps):
        """Feeds the mean loss of the `steps` steps (batches) that ended at `step`; returns the
        Excursion they show, or None."""
        s, cfg = self.state, self.settings
        # The input's position: with float16, steps whose gradients overflow read a batch and
        # leave the step count as it was.
        s["batches_read"] += steps
        if not math.isfinite(loss):  # recoverable: a recovery restores the weights
            return Excursion("non-finite loss", step, loss, s["ema"], s["best"], s["best_step"])
        warm = s["steps"] >= cfg.smoothing_steps
        sigmas = ((loss - s["ema"]) / math.sqrt(s["var"] / steps)
                  if warm and s["var"] > 0 else 0.0)
        spike = sigmas > cfg.spike_sigmas
        # A spike is kept out of the smoothed loss and its spread, and reported once; a level
        # that lasts a window is no spike: the smoothed loss takes it (a rise, if it is one).
        if spike and s["spiking"] < cfg.smoothing_steps:
            s["spiking"] += steps
            if s["spiking"] == steps:
                return Excursion("spike", step, loss, s["ema"], s["best"], s["best_step"])
            return None
        s["spiking"] = 0
        s["max_sigmas"] = max(s["max_sigmas"], sigmas)
        if s["ema"] is None:
            s["ema"] = loss
        else:
            alpha = steps / min(cfg.smoothing_steps, s["steps"] + steps)
            s["ema"] += alpha * (loss - s["ema"])
            # The variance of one step's loss, from the differences of successive chunk means
            # (a chunk of n steps has 1/n of it): a falling loss does not count as spread.
            diff = loss - s["last"]
            s["var"] += alpha * (diff * diff / (1 / steps + 1 / s["last_steps"]) - s["var"])
        s.update(last=loss, last_steps=steps)
        s["steps"] += steps
        if warm:
            s["max_rise"] = max(s["max_rise"], s["ema"] / s["best"] - 1)
        if s["ema"] < s["best"]:
            s.update(best=s["ema"], best_step=step, above_since=None)
        elif warm and s["ema"] > s["best"] * (1 + cfg.rise_tolerance):
            if s["above_since"] is None:
                s["above_since"] = step
            elif s["above_since"] >= 0 and step - s["above_since"] >= cfg.smoothing_steps:
                s["above_since"] = -1  # reported: once, until the loss is back within bounds
                return Excursion("rise", step, loss, s["ema"], s["best"], s["best_step"])
        else:
            s["above_since"] = None
        return None

    def headroom(self):
        """How close the run came to an excursion, for the log at the end of training: the
        largest step loss above the smoothed loss (in standard deviations, spikes aside) and
        the largest rise of the smoothed loss above its best so far."""
        s, cfg = self.state, self.settings
        if s["steps"] <= cfg.smoothing_steps:  # no step was checked against the smoothed loss
            return (f"{s['steps']} steps: too few to check for spikes and rises (it smooths "
                    f"over --loss_smoothing_steps={cfg.smoothing_steps} first); "
                    f"{s['recoveries']} recoveries")
        largest = (f"the largest step loss was {s['max_sigmas']:.1f} standard deviations above "
                   f"the smoothed loss" if s["max_sigmas"] > 0 else
                   "no step loss rose above the smoothed loss")
        return (f"{largest} (a spike: {cfg.spike_sigmas:g}), the smoothed loss at most "
                f"{100 * s['max_rise']:.1f}% above its best (a rise: "
                f"{100 * cfg.rise_tolerance:g}% for {cfg.smoothing_steps} steps); "
                f"{s['recoveries']} recoveries")

    def observe_eval(self, step, loss):
        """Feeds a held-out loss; returns an Excursion when it rose `eval_rises` times running."""
        s = self.state
        rose = s["eval_last"] is not None and loss > s["eval_last"]
        s["eval_rises"] = s["eval_rises"] + 1 if rose else 0
        s["eval_last"] = loss
        if loss < s["eval_best"]:
            s.update(eval_best=loss, eval_best_step=step)
        if s["eval_rises"] >= self.settings.eval_rises:
            rises, s["eval_rises"] = s["eval_rises"], 0
            return Excursion("held-out rise", step, loss, rises, s["eval_best"],
                             s["eval_best_step"])
        return None

    def anchor_steps(self):
        """The steps whose newest checkpoint at or before them must be kept: the lowest smoothed
        training loss's and the lowest held-out loss's (what a recovery goes back to)."""
        return {self.state["best_step"], self.state["eval_best_step"]}

    @staticmethod
    def saved_state(prefix):
        """The guard's state in a checkpoint of the trainer (written as `guard`)."""
        return json.loads(tf.train.load_checkpoint(prefix).get_tensor(
            "guard/.ATTRIBUTES/py_state").decode())

    def apply(self, entry):
        """The state after a recovery, on the state of the checkpoint it went back to."""
        self.state.update(recoveries=entry["number"], batches_read=entry["batches_read"],
                          lr_scale=entry["lr_scale"])

    def anchor_for(self, excursion):
        return (self.state["eval_best_step"] if excursion.kind == "held-out rise"
                else self.state["best_step"])


def plan_recovery(guard, excursion, checkpoints):
    """The excursions.json entry of a recovery from `excursion` ({step: prefix} of the
    checkpoints there), or None when no checkpoint is from before it. The input goes on from
    where it is: past the batches read since the checkpoint gone back to."""
    before = [step for step in checkpoints if step <= guard.anchor_for(excursion)]
    if not before:
        return None
    s = guard.state
    return {"number": s["recoveries"] + 1, "kind": excursion.kind,
            "detected_at_step": excursion.step, "loss": excursion.loss,
            "smoothed": excursion.smoothed, "best": excursion.best,
            "best_step": excursion.best_step, "rolled_back_to_step": max(before),
            "batches_read": s["batches_read"],
            "skipped_batches": s["batches_read"] - LossGuard.saved_state(
                checkpoints[max(before)])["batches_read"],
            "lr_scale": s["lr_scale"] * guard.settings.lr_factor}


def read_log(output_dir):
    """The recoveries of the run in output_dir, oldest first ([] without any)."""
    path = os.path.join(output_dir, LOG_FILE)
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)["recoveries"]


def write_log(output_dir, recoveries):
    write_json(os.path.join(output_dir, LOG_FILE), {"recoveries": recoveries})
