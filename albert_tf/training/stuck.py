"""Telling a fine-tuning run that learns nothing: past the warmup its training loss stays at
the best constant prediction's, or every eval prediction is one class."""

import numpy as np
from absl import logging

# A model stuck at a constant prediction sits at its loss within a fraction of a percent (or
# above it); runs that learn slowly at low rates were 1-2% below it at that point (measured,
# docs/finetuning.md).
TOLERANCE = 0.005


def constant_loss(labels, regression=False, multi_label=False):
    """The training loss of the best constant prediction: the entropy of the label frequencies
    (cross-entropy; ln C for balanced classes), their variance (squared error) or, multi-label
    (0/1 rows), each label's binary entropy averaged over the labels. None when there are no
    labels or they are all the same."""
    labels = np.asarray(labels)
    if multi_label and labels.size:
        p = labels.astype(np.float64).mean(0).clip(1e-12, 1 - 1e-12)
        return float(np.mean(-(p * np.log(p) + (1 - p) * np.log(1 - p)))) or None
    labels = labels.reshape(-1)
    if labels.size == 0:
        return None
    if regression:
        value = float(np.var(labels.astype(np.float64)))
    else:
        _, counts = np.unique(labels, return_counts=True)
        p = counts / counts.sum()
        value = float(-(p * np.log(p)).sum())
    return value or None


class StuckWatch:
    """Warns (once for the loss, at each evaluation for the predictions) when a run is stuck,
    with what to try. `train_steps`: the run's last step (an earlier evaluation's one class
    may still change); `training`: whether this invocation trains (else the learning rate and
    warmup it was given are not the ones that trained the model)."""

    def __init__(self, constant_loss, num_warmup_steps, learning_rate, log_steps,
                 train_steps=None, training=True):
        self.level = constant_loss
        self.warmup = num_warmup_steps
        self.learning_rate = learning_rate
        self.log_steps = log_steps
        self.train_steps = train_steps
        self.training = training
        self.warned = False
        self.lines_at_level = 0  # consecutive progress lines past the warmup at the level

    def advice(self):
        if not self.training:
            return ("if its training is the cause, train again with a lower --learning_rate or "
                    "a longer warmup (--warmup_step, --warmup_proportion)")
        return (f"try a lower --learning_rate (now {self.learning_rate:g}) or a longer warmup "
                f"(--warmup_step, --warmup_proportion; now {self.warmup} steps)")

    def training_loss(self, step, loss):
        """Checks a progress line's mean loss (its steps all past the warmup): two lines in a
        row at the constant level warn (one may be a slow start: a multiple-choice head sits
        at ln 4 for a while before it learns)."""
        if self.level is None or self.warned or step - self.log_steps < self.warmup:
            return False
        at_level = loss >= (1.0 - TOLERANCE) * self.level
        self.lines_at_level = self.lines_at_level + 1 if at_level else 0
        if self.lines_at_level < 2:
            return False
        self.warned = True
        logging.warning(
            "The training loss %.4g at step %d, %d steps after the warmup, is no better than "
            "a constant prediction's (%.4g: the label frequencies, whatever the input): the "
            "model is not learning from its input; %s.", loss, step, step - self.warmup,
            self.level, self.advice())
        return True

    def predictions(self, step, name, classes):
        """Checks one evaluation's predicted classes (labels, tags or answers)."""
        classes = np.asarray(classes).reshape(-1)
        if classes.size < 2 or np.any(classes != classes[0]):
            return False
        early = self.training and self.train_steps and step < self.train_steps
        logging.warning("Every %s prediction at step %d is %r (%d of %d): the model predicts "
                        "one class whatever the input%s.", name, step, str(classes[0]),
                        classes.size, classes.size,
                        f" so far (step {step} of {self.train_steps}): if it still does later, "
                        f"{self.advice()}" if early else f"; {self.advice()}")
        return True
