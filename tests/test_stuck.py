"""A fine-tuning run stuck at the constant prediction says so, with what to try."""

import math

import numpy as np
import pytest
from absl import logging

from albert_tf.training.stuck import StuckWatch, constant_loss


def test_constant_loss_is_the_best_constant_predictions_loss():
    assert constant_loss([0, 1, 1, 0]) == pytest.approx(math.log(2))
    assert constant_loss(np.arange(4).repeat(5)) == pytest.approx(math.log(4))
    p = np.array([0.9, 0.1])
    assert constant_loss([0] * 9 + [1]) == pytest.approx(-(p * np.log(p)).sum())
    assert constant_loss([1.0, 2.0, 3.0], regression=True) == pytest.approx(2 / 3)
    assert constant_loss([]) is None and constant_loss([3, 3, 3]) is None


@pytest.fixture
def warnings(monkeypatch):
    said = []
    monkeypatch.setattr(logging, "warning", lambda msg, *args: said.append(msg % args))
    return said


def test_loss_at_the_constant_level_past_warmup_warns_once(warnings):
    watch = StuckWatch(math.log(2), num_warmup_steps=30, learning_rate=2e-3, log_steps=50)
    assert not watch.training_loss(50, 0.70)  # its window still holds warmup steps
    assert not watch.training_loss(100, 0.60)  # learning
    assert not watch.training_loss(100, 0.685)  # learning slowly, at a low rate
    assert not watch.training_loss(150, 0.6925)  # one line at the level: a slow start, maybe
    assert not watch.training_loss(200, 0.67)  # ... it was
    assert not watch.training_loss(250, 0.6931)
    assert watch.training_loss(300, 0.6925)  # two in a row
    assert not watch.training_loss(350, 0.6931)  # said once
    assert len(warnings) == 1
    assert "0.6925 at step 300, 270 steps after the warmup" in warnings[0]
    assert "constant prediction's (0.6931" in warnings[0]
    assert "lower --learning_rate (now 0.002)" in warnings[0]
    assert "--warmup_step, --warmup_proportion; now 30 steps" in warnings[0]
    worse = StuckWatch(math.log(2), 30, 2e-3, 50)  # worse than constant
    assert not worse.training_loss(100, 0.9) and worse.training_loss(150, 0.9)
    assert not StuckWatch(None, 30, 2e-3, 50).training_loss(100, 0.9)  # no level (SQuAD)


def test_one_class_for_every_eval_prediction_warns(warnings):
    watch = StuckWatch(math.log(2), 30, 5e-4, 50)
    assert not watch.predictions(300, "dev", np.array(["0", "1", "1"]))
    assert watch.predictions(300, "dev", np.array(["1"] * 500))
    assert "Every dev prediction at step 300 is '1' (500 of 500)" in warnings[0]
    assert "lower --learning_rate (now 0.0005)" in warnings[0]
    assert watch.predictions(400, "dev", ["O"] * 7)  # tags, at every evaluation
    assert len(warnings) == 2
    # Before the last step: it may still change; evaluating alone: not this command's settings.
    assert StuckWatch(math.log(2), 30, 5e-4, 50, train_steps=500).predictions(300, "dev",
                                                                              ["1"] * 5)
    assert warnings[2].endswith(
        "(5 of 5): the model predicts one class whatever the input so far (step 300 of 500): "
        "if it still does later, try a lower --learning_rate (now 0.0005) or a longer warmup "
        "(--warmup_step, --warmup_proportion; now 30 steps)."), warnings[2]
    assert StuckWatch(None, 0, 5e-5, 50, train_steps=500, training=False).predictions(
        300, "dev", ["1"] * 5)
    assert warnings[3].endswith(
        "whatever the input; if its training is the cause, train again with a lower "
        "--learning_rate or a longer warmup (--warmup_step, --warmup_proportion)."), warnings[3]
