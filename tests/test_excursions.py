"""Loss excursions (training.excursions): the detector on loss series, and a run with corrupted
batches that the trainer sees, goes back from, skips and ends as a clean run; killed after the
recovery and rerun, it ends exactly as the uninterrupted run."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, create_optimizer, run_pretraining
from albert_tf.data.pipeline import pretraining_dataset
from albert_tf.training.excursions import ExcursionSettings, LossGuard
from albert_tf.training.failures import NonFiniteLossError
from albert_tf.training.trainer import Trainer
from albert_tf.training.trainer_options import TrainerOptions
from conftest import write_pretraining_records
from test_resume import DROPOUT, assert_same_state
from tool_runner import assert_refused, run_tool

SETTINGS = ExcursionSettings(smoothing_steps=10)


def _feed(guard, losses, first_step=1):
    return [(step, e) for step, loss in enumerate(losses, first_step)
            if (e := guard.observe(step, loss, 1)) is not None]


def test_a_spike_is_reported_once_and_kept_out_of_the_smoothed_loss():
    rng = np.random.default_rng(0)
    losses = list(3.0 + 0.05 * rng.standard_normal(200))
    losses[150] = 4.0  # 20 standard deviations above
    guard = LossGuard(ExcursionSettings(smoothing_steps=50))
    found = _feed(guard, losses)
    assert [(s, e.kind) for s, e in found] == [(151, "spike")]
    assert found[0][1].loss == 4.0
    assert abs(guard.state["ema"] - 3.0) < 0.03
    # The spread of a chunk's mean shrinks with its steps: 0.25 above is 5 standard deviations
    # of one step's loss, 10 of a 4-step chunk's mean.
    state = guard.serialize()
    assert guard.observe(201, guard.state["ema"] + 0.25, 1) is None
    guard.deserialize(state)
    assert guard.observe(204, guard.state["ema"] + 0.25, 4).kind == "spike"


def test_a_run_too_short_to_check_says_so():
    guard = LossGuard(SETTINGS)
    _feed(guard, [3.0, 2.9, 3.1] * 3)
    assert guard.headroom() == ("9 steps: too few to check for spikes and rises (it smooths "
                                "over --loss_smoothing_steps=10 first); 0 recoveries")
    _feed(guard, [3.0, 3.2, 2.9], 10)
    assert guard.headroom().startswith("the largest step loss was 2.1 standard deviations above "
                                       "the smoothed loss (a spike: 8)")
    falling = LossGuard(SETTINGS)  # no step above the smoothed loss: said so, not "0.0"
    _feed(falling, [3.0 - 0.01 * i for i in range(30)])
    assert falling.headroom().startswith("no step loss rose above the smoothed loss (a spike: ")


def test_a_level_shift_is_one_spike_then_a_rise():
    losses = [3.0 + 0.02 * (-1) ** i for i in range(30)] + [3.5] * 40
    found = _feed(LossGuard(SETTINGS), losses)
    kinds = [e.kind for _, e in found]
    assert kinds[0] == "spike" and found[0][0] == 31
    # The spike lasted a window, the smoothed loss took it; above best by 5% for a window.
    assert "rise" in kinds and kinds.count("spike") == 1
    rise = found[kinds.index("rise")][1]
    assert rise.best == pytest.approx(2.98, abs=0.03) and rise.best_step <= 30


def test_a_slow_rise_is_a_rise_noise_and_a_stall_are_not():
    rng = np.random.default_rng(1)
    falling = 5.0 - 0.01 * np.arange(100) + 0.05 * rng.standard_normal(100)
    stall = 4.0 + 0.05 * rng.standard_normal(200)
    rising = 4.0 + 0.004 * np.arange(200) + 0.05 * rng.standard_normal(200)
    guard = LossGuard(SETTINGS)
    assert _feed(guard, np.concatenate([falling, stall])) == []
    # Gaussian noise of 300 steps: a few standard deviations at most, a rise of a few percent.
    assert 2 < guard.state["max_sigmas"] < 6 and guard.state["max_rise"] < 0.03
    assert guard.headroom().endswith("(a rise: 5% for 10 steps); 0 recoveries")
    found = _feed(guard, rising, 301)
    assert [e.kind for _, e in found] == ["rise"]  # once, however long it goes on
    assert found[0][1].smoothed > found[0][1].best * 1.05


def test_held_out_rises_and_the_state_round_trips():
    guard = LossGuard(ExcursionSettings(eval_rises=2))
    assert guard.observe_eval(10, 3.0) is None
    assert guard.observe_eval(20, 3.1) is None
    assert guard.observe_eval(30, 2.9) is None  # fell: the count starts again
    assert guard.observe_eval(40, 3.0) is None
    found = guard.observe_eval(50, 3.2)
    assert (found.kind, found.best, found.best_step) == ("held-out rise", 2.9, 30)
    assert guard.anchor_for(found) == 30
    again = LossGuard()
    again.deserialize(guard.serialize())
    assert again.state == guard.state


def test_unknown_action_is_refused():
    with pytest.raises(ValueError, match="--on_loss_spike='retry'; use one of recover, warn"):
        ExcursionSettings(action="retry")


# ---- a run with corrupted batches ----------------------------------------------------------

CORRUPT = (30,)  # the batch of step 31 has wrong labels
STEPS, SAVE, BATCH = 50, 5, 8


# The tests below train (marked slow: the full suite runs them, the fast tier does not).
@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_pretraining_records(tmp_path_factory.mktemp("rec") / "train.tfrecord", 128)


def _dataset_fn(records, corrupt, poison=()):
    """Learnable labels (each masked label 7 or 8, drawn by batch), batches in `corrupt`
    labelled 9 throughout (a loss far above the rest), batches in `poison` with NaN weights."""
    def fn(ctx):
        batches = pretraining_dataset(records, ctx.get_per_replica_batch_size(BATCH), 16, 4,
                                      is_training=True, input_context=ctx, seed=3)

        @tf.autograph.experimental.do_not_convert  # TensorFlow ops already
        def relabel(index, features):
            ids = features["masked_lm_ids"]
            coin = tf.random.stateless_uniform(tf.shape(ids), seed=tf.stack([index, 1]))
            labels = tf.where(coin < 0.5, 7, 8)
            bad = tf.reduce_any(tf.equal(index, tf.constant(corrupt, tf.int64)))
            labels = tf.where(bad, tf.fill(tf.shape(ids), 9), labels)
            nan = tf.reduce_any(tf.equal(index, tf.constant((-1, *poison), tf.int64)))
            weights = features["masked_lm_weights"]
            weights = tf.where(nan, tf.fill(tf.shape(weights), float("nan")), weights)
            return dict(features, masked_lm_ids=tf.cast(labels, ids.dtype),
                        masked_lm_weights=weights)
        return batches.enumerate().map(relabel)
    return fn


def _trainer(out, precision, action="recover", lr_factor=0.5):
    policy = {"none": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
    tf.keras.mixed_precision.set_global_policy(policy[precision])
    tf.keras.utils.set_random_seed(5)
    return Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"),
                   lambda: AlbertPretrainer(AlbertConfig(**DROPOUT), sop_weight=0.0),
                   lambda: create_optimizer(1e-2, STEPS, 5, "lamb"), str(out),
                   TrainerOptions(global_batch_size=BATCH, jit_compile=precision == "bfloat16",
                                  save_checkpoints_steps=SAVE, log_steps=1,
                                  keep_checkpoint_max=1,
                                  excursions=ExcursionSettings(action=action, smoothing_steps=10,
                                                               lr_factor=lr_factor)))


class Killed(Exception):
    pass


def _run(out, records, precision, corrupt=CORRUPT, action="recover", kill=None,
         lr_factor=0.5, eval_losses=None, poison=()):
    """Trains; `kill(out, step)` true after a step's progress line stops the run there (as a
    SIGKILL would: nothing more is written); `eval_losses` {step: loss} are reported to the
    guard as the held-out losses of the checkpoints before any recovery (3.0 after one)."""
    trainer = _trainer(out, precision, action, lr_factor)
    trainer.restore_or_initialize()
    losses = {}

    def on_log(step, metrics):
        losses[step] = metrics["masked_lm_loss"]
        if kill and kill(out, step):
            raise Killed

    def on_checkpoint(path, step):
        recovered = trainer.guard.state["recoveries"] > 0
        trainer.observe_eval(step, 3.0 if recovered else eval_losses[step])
    try:
        trainer.train(_dataset_fn(records, corrupt, poison), STEPS, on_log=on_log,
                      on_checkpoint=on_checkpoint if eval_losses else None,
                      evaluate_restarts=bool(eval_losses))
    finally:
        trainer.close()
    return losses


def _recoveries(out):
    with open(os.path.join(out, "excursions.json")) as f:
        return json.load(f)["recoveries"]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["none", "bfloat16", "float16"])
def test_corrupted_batches_are_seen_gone_back_from_and_skipped(records, tmp_path, precision,
                                                                caplog):
    """Under float32, bfloat16 with the whole step compiled by XLA, and float16 with its loss
    scale: batch 30 (step 31) is a spike; the run goes back to the checkpoint before it, past
    the batches read since then, and ends as a clean run (at the same rate: factor 1)."""
    clean = _run(tmp_path / "clean", records, precision, corrupt=(-1,))
    caplog.set_level("WARNING")
    losses = _run(tmp_path / "recover", records, precision, lr_factor=1.0)
    [entry] = _recoveries(tmp_path / "recover")
    # The batch of the spike: step 31's, or later under float16 (whose overflowing steps read
    # a batch without counting a step).
    spike = entry["detected_at_step"]
    assert spike == 31 or (precision == "float16" and 25 < spike < 31)
    # Back to the newest checkpoint at or before the lowest smoothed loss, kept for it (the
    # trainer keeps one other checkpoint), past every batch read since then.
    anchor = entry["best_step"] // SAVE * SAVE
    assert (entry["kind"], entry["rolled_back_to_step"], entry["batches_read"],
            entry["lr_scale"]) == ("spike", anchor, 31, 1.0)
    read_at_anchor = 31 - entry["skipped_batches"]
    assert read_at_anchor == anchor or (precision == "float16" and anchor < read_at_anchor < 31)
    assert entry["loss"] > 2 * clean[spike]
    assert (f"Recovery 1: back to step {anchor} (model.ckpt-{anchor}), past the "
            f"{entry['skipped_batches']} batches that led into it, learning rate x1"
            ) in caplog.text
    assert len(losses) == STEPS and abs(losses[STEPS] - clean[STEPS]) < 0.05
    if precision != "none":
        return
    warned = _run(tmp_path / "warn", records, precision, action="warn")  # the log's only
    assert not os.path.exists(tmp_path / "warn" / "excursions.json")
    assert warned[spike] == pytest.approx(entry["loss"], rel=1e-3)
    assert "Going on (--on_loss_spike=warn)" in caplog.text


def _after_recovery(steps_after_checkpoint, checkpoints_after=0):
    """Kills the run `steps_after_checkpoint` steps after the `checkpoints_after`-th checkpoint
    that follows its first recovery."""
    def kill(out, step):
        recovered = os.path.exists(out / "excursions.json")
        if recovered and step % SAVE == 0:
            kill.saves += 1
        return recovered and step % SAVE == steps_after_checkpoint and \
            kill.saves > checkpoints_after
    kill.saves = 0
    return kill


@pytest.fixture(scope="module")
def whole(records, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole")
    _run(out, records, "none")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kill", [_after_recovery(2), _after_recovery(2, checkpoints_after=1)],
                         ids=["before-the-next-checkpoint", "after-the-next-checkpoint"])
def test_a_run_killed_after_a_recovery_and_rerun_is_the_same_run(records, whole, tmp_path,
                                                                  kill):
    """Killed before a checkpoint follows the recovery, the rerun makes the recovery again from
    excursions.json (the same checkpoint, input position and halved rate); killed after one,
    it resumes from it. Either way it ends with the uninterrupted run's weights, slots, random
    state and guard state."""
    with pytest.raises(Killed):
        _run(tmp_path / "killed", records, "none", kill=kill)
    assert len(_recoveries(tmp_path / "killed")) == 1
    _run(tmp_path / "killed", records, "none")
    assert _recoveries(tmp_path / "killed") == _recoveries(whole)
    assert _recoveries(whole)[0]["lr_scale"] == 0.5
    assert_same_state(whole, tmp_path / "killed", atol=0)


@pytest.mark.slow
def test_a_resumed_run_evaluates_and_records_where_an_uninterrupted_one_did(records, tmp_path):
    """Resumed from the checkpoint an interrupt saved between two scheduled ones (step 7), a
    run does not evaluate it: an uninterrupted run never did, and its accuracy made it
    model.ckpt-best. Resumed from a scheduled one evaluated before the interrupt (step 10), it
    evaluates it again for the guard only: eval_results.txt, the best and TensorBoard's points
    are an uninterrupted run's."""
    out, evaluated = tmp_path / "run", []

    def run(stop_at=None, save_at_stop=False):
        trainer = _trainer(out, "none")
        trainer.restore_or_initialize()

        def on_log(step, metrics):
            if step == stop_at:
                if save_at_stop:  # as a SIGTERM's stop does
                    trainer.save()
                raise Killed

        def on_checkpoint(path, step):
            evaluated.append(step)
            trainer.observe_eval(step, 3.0)
            accuracy = 1.0 if step % SAVE else step / 100
            trainer.record_eval({"global_step": step, "masked_lm_accuracy": accuracy,
                                 "loss": 1.0}, path, "masked_lm_accuracy")
        try:
            trainer.train(_dataset_fn(records, (-1,)), 3 * SAVE, on_log=on_log,
                          on_checkpoint=on_checkpoint, evaluate_restarts=True)
        finally:
            trainer.close()
    with pytest.raises(Killed):
        run(stop_at=7, save_at_stop=True)
    with pytest.raises(Killed):
        run(stop_at=2 * SAVE + 1)
    run()
    assert evaluated == [SAVE, 2 * SAVE, 2 * SAVE, 3 * SAVE]
    best = (out / "best_checkpoint.txt").read_text()
    assert best.startswith(f"global_step = {3 * SAVE}\n"), best
    assert (out / "eval_results.txt").read_text().startswith(f"global_step = {3 * SAVE}\n")
    points = [event.step for path in sorted((out / "eval").glob("events*"))
              for event in tf.compat.v1.train.summary_iterator(str(path))
              for value in event.summary.value if value.tag == "masked_lm_accuracy"]
    assert points == [SAVE, 2 * SAVE, 3 * SAVE]


@pytest.mark.slow
def test_a_held_out_rise_goes_back_to_the_lowest_held_out_loss(records, tmp_path, caplog):
    """Held-out losses that fall to step 15 and rise at 20 and 25: back to step 15 (kept for it
    though the trainer keeps one other checkpoint), whose evaluation runs again."""
    caplog.set_level("INFO")
    evals = {step: 3.0 for step in range(SAVE, STEPS + 1, SAVE)}
    evals.update({5: 3.5, 10: 3.2, 15: 3.0, 20: 3.1, 25: 3.3})
    _run(tmp_path, records, "none", corrupt=(-1,), eval_losses=evals)
    [entry] = _recoveries(tmp_path)
    assert (entry["kind"], entry["detected_at_step"], entry["rolled_back_to_step"],
            entry["skipped_batches"], entry["best"]) == ("held-out rise", 25, 15, 10, 3.0)
    assert "the held-out loss rose at 2 evaluations in a row, to 3.3 at step 25" in caplog.text
    # Kept: the newest, the lowest held-out loss's (step 15) and, if another, the lowest
    # smoothed training loss's.
    kept = {f for f in os.listdir(tmp_path) if f.endswith(".index")}
    assert {f"model.ckpt-{STEPS}.index", "model.ckpt-15.index"} <= kept and len(kept) <= 3


@pytest.mark.slow
def test_the_command_line_recovers_then_stops_after_max_loss_recoveries(records, tmp_path,
                                                                        capsys):
    """run_pretraining's flags reach the guard: with a hair-trigger threshold the noise is a
    spike, one recovery is made, the next excursion stops the run in one line (status 1); with
    --on_loss_spike=stop the first does. A threshold of 0 is refused before anything runs."""
    config = tmp_path / "albert_config.json"
    AlbertConfig(**DROPOUT).to_json_file(str(config))
    flags = dict(albert_config_file=config, input_file=records, max_seq_length=16,
                 max_predictions_per_seq=4, train_batch_size=8, num_train_steps=40,
                 num_warmup_steps=2, save_checkpoints_steps=2, log_steps=10,
                 mixed_precision="none", loss_smoothing_steps=2, loss_spike_sigmas=1e-6,
                 max_loss_recoveries=1)
    status, last, err = run_tool(run_pretraining, capsys, output_dir=tmp_path / "recover",
                                 **flags)
    assert status == 1, err[-2000:]
    assert last.startswith("run_pretraining: error: a loss spike at step ") and last.endswith(
        "stopped (1 recoveries already (--max_loss_recoveries)). Last checkpoint: "
        f"{tf.train.latest_checkpoint(str(tmp_path / 'recover'))}; excursions.json lists the "
        "recoveries. Lower --learning_rate and rerun in a new --output_dir, or resume with "
        "--on_loss_spike=warn"), last
    assert [r["number"] for r in _recoveries(tmp_path / "recover")] == [1]
    status, last, err = run_tool(run_pretraining, capsys, output_dir=tmp_path / "stop",
                                 on_loss_spike="stop", **flags)
    assert status == 1 and "stopped (--on_loss_spike=stop)" in last, err[-2000:]
    assert not (tmp_path / "stop" / "excursions.json").exists()
    assert_refused(run_tool(run_pretraining, capsys, output_dir=tmp_path / "zero",
                            **dict(flags, loss_spike_sigmas=0)),
                   "--loss_spike_sigmas=0.0: must be a positive number")
    assert not (tmp_path / "zero").exists()


@pytest.mark.slow
def test_a_non_finite_loss_is_recovered_from_when_recovering(records, tmp_path):
    """NaN weights in batch 30: the loss of step 31 is NaN (and so are the weights after it);
    a recovering run goes back to a checkpoint from before it and ends as a clean run, while
    --on_loss_spike=warn stops as before, nothing saved after it."""
    guard = LossGuard(SETTINGS)
    assert guard.observe(1, float("nan"), 1).describe() == "the loss became nan at step 1"
    clean = _run(tmp_path / "clean", records, "none", corrupt=(-1,))
    losses = _run(tmp_path / "recover", records, "none", corrupt=(-1,), poison=(30,),
                  lr_factor=1.0)
    [entry] = _recoveries(tmp_path / "recover")
    assert (entry["kind"], entry["detected_at_step"]) == ("non-finite loss", 31)
    assert abs(losses[STEPS] - clean[STEPS]) < 0.05
    with pytest.raises(NonFiniteLossError, match="loss became nan in the steps 31..31"):
        _run(tmp_path / "warn", records, "none", corrupt=(-1,), poison=(30,), action="warn")
    assert tf.train.latest_checkpoint(str(tmp_path / "warn")).endswith("model.ckpt-30")
