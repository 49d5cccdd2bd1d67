import ast
import dataclasses
import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, create_optimizer, run_pretraining
from albert_tf.data.pipeline import pretraining_dataset
from albert_tf.data.synthetic import pretraining_batch
from albert_tf.training.excursions import ExcursionSettings, LossGuard
from albert_tf.training.failures import NonFiniteLossError, OutOfMemoryError
from albert_tf.modeling.optimizers import ReplicaLossScaleOptimizer, current_learning_rate
from albert_tf.modeling.step_kernels import StepKernels
from albert_tf.tracing import graph_function
from albert_tf.training import distribution
from albert_tf.training.distribution import log_step_memory
from albert_tf.training.step_memory import StepShape, gib, step_bytes
from albert_tf.training.trainer import Trainer
from albert_tf.training.trainer_options import TrainerOptions
from conftest import (PRECISION_MATRIX, SMALL, TINY, assert_near_float32,
                      write_pretraining_records)
from tool_runner import run_tool, run_tool_logged

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_pretraining_records(tmp_path_factory.mktemp("rec") / "train.tfrecord", 256)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "albert_config.json"
    AlbertConfig(**SMALL).to_json_file(str(path))
    return str(path)


def _trainer(output_dir, lr=1e-3, steps=100, accumulation=1, batch=8, steps_per_execution=1,
             save=1000, log=100, shape=None):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    return Trainer(strategy, lambda: AlbertPretrainer(AlbertConfig(**SMALL)),
                   lambda: create_optimizer(lr, steps, 2, "lamb"), str(output_dir),
                   TrainerOptions(global_batch_size=batch,
                                  gradient_accumulation_steps=accumulation,
                                  steps_per_execution=steps_per_execution,
                                  save_checkpoints_steps=save, log_steps=log, step_shape=shape))


def _dataset_fn(records, batch=8, seed=3):
    return lambda ctx: pretraining_dataset(records, ctx.get_per_replica_batch_size(batch), 16, 4,
                                           is_training=True, input_context=ctx, seed=seed)


def _weights(model):
    return {n: v.numpy() for n, v in model.tf1_weights().items()}


def test_train_checkpoint_and_resume_state(records, tmp_path):
    trainer = _trainer(tmp_path, steps_per_execution=3, save=4, log=2)
    assert trainer.train(_dataset_fn(records), 7) == 7
    saved = sorted(f for f in os.listdir(tmp_path) if f.endswith(".index"))
    assert saved == ["model.ckpt-4.index", "model.ckpt-7.index"]
    slots = [v.numpy() for v in trainer.optimizer.variables]
    weights = _weights(trainer.model)
    again = _trainer(tmp_path, steps_per_execution=3)
    assert again.restore_or_initialize().endswith("model.ckpt-7")
    assert again.step == 7
    assert current_learning_rate(again.optimizer) == pytest.approx(1e-3 * (1 - 7 / 100),
                                                                  rel=1e-5)
    assert len(again.optimizer.variables) == len(slots)
    for v, saved in zip(again.optimizer.variables, slots):
        np.testing.assert_array_equal(v.numpy(), saved, err_msg=v.path)
    for name, value in _weights(again.model).items():
        np.testing.assert_array_equal(value, weights[name])
    # The checkpoint directory is also a from_pretrained source.
    loaded = AlbertPretrainer.from_pretrained(str(tmp_path))
    np.testing.assert_array_equal(_weights(loaded)["cls/predictions/output_bias"],
                                  weights["cls/predictions/output_bias"])
    assert any(f.startswith("events") for f in os.listdir(tmp_path / "train"))
    # Closed, the trainer lets its input pipeline go at once, not at Python's next collection.
    iterator = weakref.ref(trainer._input.iterator)
    gc.disable()
    try:
        trainer.close()
        assert iterator() is None
    finally:
        gc.enable()


def test_gradient_accumulation_gives_the_same_update(records, tmp_path):
    results = []
    for k in (1, 2, 4):
        trainer = _trainer(tmp_path / f"acc{k}", accumulation=k, save=100, log=1)
        init = trainer.model
        if results:
            for name, variable in init.tf1_weights().items():
                variable.assign(results[0][0][name])
        start = _weights(init)
        trainer.train(_dataset_fn(records), 2)
        results.append((start, _weights(trainer.model)))
    for start, end in results[1:]:
        for name in end:
            np.testing.assert_allclose(end[name], results[0][1][name], atol=2e-5, err_msg=name)


def test_non_finite_loss_stops_before_saving(records, tmp_path):
    trainer = _trainer(tmp_path, lr=1e30, save=1, log=1)
    with pytest.raises(NonFiniteLossError) as err:
        trainer.train(_dataset_fn(records), 50)
    match = re.search(r"loss became (nan|inf) in the steps (\d+)\.\.\d+; nothing was saved "
                      r"after it\. Last good checkpoint: (\S+)\.", str(err.value))
    assert match, str(err.value)
    bad_step, last_good = int(match.group(2)), match.group(3)
    assert last_good == str(tmp_path / f"model.ckpt-{bad_step - 1}")
    assert tf.train.latest_checkpoint(str(tmp_path)) == last_good
    assert np.isfinite(AlbertPretrainer.from_pretrained(last_good).get_weights()[0]).all()


def out_of_memory_steps(trainer, iterator, num_steps):
    """Trainer._train_steps as a step that runs out of memory: TensorFlow's
    ResourceExhaustedError, raised when the step runs (a MemoryError in a py_function is one)."""
    def allocate():
        raise MemoryError("OOM when allocating tensor with shape[4,2,16,16]")
    failed = tf.py_function(allocate, [], tf.float32)
    return {name: failed for name in trainer.model.LOSS_SUM_NAMES}


def test_out_of_memory_in_the_step_is_one_line_naming_the_batch_that_fits(records, tmp_path):
    trainer = _trainer(tmp_path, accumulation=2, save=2, log=2, shape=StepShape(16, 4))
    assert trainer.train(_dataset_fn(records), 2) == 2
    assert trainer.memory.device is None and trainer.memory.device_bytes is None  # a CPU
    parameters = sum(v.shape.num_elements() for v in trainer.model.trainable_variables)
    needed = step_bytes(AlbertConfig(**SMALL), parameters, 4, StepShape(16, 4), "float32", 2,
                        fused_attention=False)
    assert trainer.memory.needed == needed
    trainer._train_fn = graph_function(lambda it, n: out_of_memory_steps(trainer, it, n))
    with pytest.raises(OutOfMemoryError) as err:
        trainer.train(_dataset_fn(records), 4)
    assert str(err.value) == (
        f"out of memory in the training step at --train_batch_size=8 and --max_seq_length=16: "
        f"the step needs about {gib(needed)} of device memory (estimate; batch 4 x 16, "
        f"float32); a micro-batch of 2 may fit, and --gradient_accumulation_steps=4 keeps the "
        f"global batch of 8. Training stopped after step 2 without saving; last checkpoint: "
        f"{tmp_path}/model.ckpt-2.")
    assert err.value.exit_status == 1
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-2")


def test_the_step_s_memory_is_logged_on_a_gpu_and_warned_of_when_it_exceeds_it(
        tmp_path, monkeypatch, caplog):
    trainer = _trainer(tmp_path, batch=8, shape=StepShape(16, 4))

    def logged():
        caplog.clear()
        with caplog.at_level("DEBUG", logger="absl"):
            memory = log_step_memory(trainer.model, trainer.optimizer, trainer.strategy,
                                     trainer.options)
        return memory.needed, [(r.levelname, r.getMessage()) for r in caplog.records]
    needed, records = logged()
    line = (f"The step needs about {gib(needed)} of device memory (estimate; batch 8 x 16, "
            f"float32)")
    assert records == [("DEBUG", line)]
    # As on a GPU, of 140 GiB, then of a quarter MiB.
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind=None: ["/GPU:0"])
    for total, level, said in (
            (140 * 2 ** 30, "INFO", " of 140.0 GiB on GPU:0"),
            (2 ** 18, "WARNING", ", more than the 0.2 MiB of GPU:0: a micro-batch of 4 "
                                 "fits, and --gradient_accumulation_steps=2 keeps the global "
                                 "batch of 8")):
        monkeypatch.setattr("albert_tf.training.distribution.gpu_memory_bytes",
                            lambda t=total: t)
        gpu_line = line.replace("device memory", "GPU memory") + said
        assert logged() == (needed, [(level, gpu_line)])


@pytest.mark.parametrize("precision,policy,jit", [("none", "float32", "false"),
                                                  ("bfloat16", "mixed_bfloat16", "false"),
                                                  ("float16", "mixed_float16", "false"),
                                                  ("bfloat16", "mixed_bfloat16", "true")])
def test_run_pretraining_out_of_memory_is_one_line_and_status_1(
        records, tmp_path, capsys, monkeypatch, precision, policy, jit):
    config = tmp_path / "albert_config.json"
    AlbertConfig(**TINY).to_json_file(str(config))
    monkeypatch.setattr(Trainer, "_train_steps", out_of_memory_steps)
    code, last, err = run_tool(
        run_pretraining, capsys, albert_config_file=config, input_file=records,
        output_dir=tmp_path / "out", max_seq_length=16, max_predictions_per_seq=4,
        train_batch_size=4, num_train_steps=2, num_warmup_steps=1, mixed_precision=precision,
        jit_compile=jit)
    assert code == 1, err[-3000:]
    model = AlbertPretrainer(AlbertConfig(**TINY))
    parameters = sum(v.shape.num_elements() for v in model.trainable_variables)
    needed = step_bytes(AlbertConfig(**TINY), parameters, 4, StepShape(16, 4, 1, 5), policy,
                        2, fused_attention=False)  # the last block at [CLS] and 4 positions
    assert last == (
        f"run_pretraining: error: out of memory in the training step at --train_batch_size=4 "
        f"and --max_seq_length=16: the step needs about {gib(needed)} of device memory "
        f"(estimate; batch 4 x 16, {policy}); a micro-batch of 2 may fit, and "
        f"--gradient_accumulation_steps=2 keeps the global batch of 4. Training stopped after "
        f"step 0 without saving; last checkpoint: none.")


def test_examples_per_second_leave_out_the_first_call_and_what_runs_between_calls(
        tmp_path, monkeypatch, caplog):
    """The first training call traces and compiles (timed apart, in its own line); time spent
    between calls (checkpoints, evaluation) is not training time, but is in the time left. A
    line whose steps were all in the first call (a resumed run's first line can be) has no
    examples/s, rather than one counting the compilation."""
    from albert_tf.training import progress as progress_module
    clock = iter([0.0, 30.0,            # the first call: 30 s
                  100.0, 101.0,          # then 3 calls of 2 steps, 1 s each, 60 s apart
                  160.0, 161.0, 220.0, 221.0,
                  221.0])                # the line: 191 s for the 6 steps since the first call
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: next(clock))
    caplog.set_level("INFO", logger="absl")
    progress = progress_module.Progress(tf.summary.create_noop_writer(), 8, 100)
    for steps in (1, 2, 2, 2):
        with progress.timed(steps):
            pass
        progress.add({"loss_sum": 1.0 * steps, "count": float(steps)}, steps)
    metrics = progress.log(7, lambda sums: {"loss": sums["loss_sum"] / sums["count"]}, 1e-3)
    assert metrics["examples_per_second"] == 6 * 8 / 3.0
    assert "The first training call (1 step) took 30.00 s: it traces and compiles the step, " \
           "and the examples/s leave it out" in caplog.messages
    # 93 steps left at 191 / 6 s each: 2960.5 s
    assert ("step 7/100  loss 1  learning_rate 0.001  examples_per_second 16  eta 49m20s"
            in caplog.messages)
    resumed = progress_module.Progress(tf.summary.create_noop_writer(), 8, 400)
    clock = iter([0.0, 17.0])
    with resumed.timed(1):
        pass
    resumed.add({"loss_sum": 1.0, "count": 1.0}, 1)
    metrics = resumed.log(280, lambda sums: {"loss": sums["loss_sum"] / sums["count"]}, 1e-3)
    assert "examples_per_second" not in metrics
    assert caplog.messages[-1] == "step 280/400  loss 1  learning_rate 0.001"
    # float16's dynamic loss scale, in the line and the summaries (once only in checkpoints).
    scaled = progress_module.Progress(tf.summary.create_noop_writer(), 8, 400,
                                      ReplicaLossScaleOptimizer(keras.optimizers.SGD(0.1),
                                                                initial_scale=1024.0))
    scaled.add({"loss_sum": 1.0, "count": 1.0}, 1)
    metrics = scaled.log(281, lambda sums: {"loss": sums["loss_sum"] / sums["count"]}, 1e-3)
    assert metrics["loss_scale"] == 1024.0
    assert caplog.messages[-1] == "step 281/400  loss 1  learning_rate 0.001  loss_scale 1024"


def test_batch_must_divide(tmp_path):
    with pytest.raises(ValueError, match="must divide into 1 replicas × 3 accumulation steps"):
        _trainer(tmp_path, accumulation=3, batch=8)


class _Lock:
    """A run lock that counts its checks."""
    verified = 0

    def verify(self):
        self.verified += 1


def test_every_trainer_option_reaches_the_trainer(tmp_path, monkeypatch):
    """Each field of TrainerOptions, at a value other than its default, changes what the
    trainer does (a field added without a use here fails the first assertion)."""
    checked = {"global_batch_size", "gradient_accumulation_steps", "steps_per_execution",
               "jit_compile", "save_checkpoints_steps", "log_steps", "keep_checkpoint_max",
               "run_kind", "run_settings", "tokenizer", "run_lock", "excursions", "step_shape",
               "step_kernels"}
    assert {f.name for f in dataclasses.fields(TrainerOptions)} == checked
    model_fn = lambda: AlbertPretrainer(AlbertConfig(**TINY))  # noqa: E731
    optimizer_fn = lambda: create_optimizer(1e-3, 10, 1, "lamb")  # noqa: E731
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with pytest.raises(ValueError, match=r"--train_batch_size=4 must divide into 1 replicas × "
                                         r"3 accumulation steps"):
        Trainer(strategy, model_fn, optimizer_fn, str(tmp_path / "refused"),
                TrainerOptions(global_batch_size=4, gradient_accumulation_steps=3))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n")
    tokenizer = types.SimpleNamespace(asset_file=str(vocab), kind="wordpiece",
                                      do_lower_case=True)
    lock, out = _Lock(), tmp_path / "run"
    kernels, estimated_with = StepKernels("plain"), []
    monkeypatch.setattr(distribution, "_attention_fused",
                        lambda k, *args: estimated_with.append(k) or False)
    trainer = Trainer(strategy, model_fn, optimizer_fn, str(out), TrainerOptions(
        global_batch_size=4, gradient_accumulation_steps=2, steps_per_execution=4,
        save_checkpoints_steps=3, log_steps=5, keep_checkpoint_max=1, run_kind="a test",
        run_settings={"learning_rate": 0.5},
        tokenizer=tokenizer, run_lock=lock, step_shape=StepShape(16, 4), step_kernels=kernels))
    calls, train_fn = [], trainer._train_fn
    trainer._train_fn = lambda iterator, n: calls.append(int(n)) or train_fn(iterator, n)
    logged, saved = [], []
    batch = pretraining_batch(TINY["vocab_size"], batch=4, seq=16, preds=4)
    trainer.train(lambda ctx: tf.data.Dataset.from_tensors(batch).repeat(), 6,
                  on_log=lambda step, metrics: logged.append(step),
                  on_checkpoint=lambda path, step: saved.append(step))
    assert trainer.accumulation == 2
    assert (trainer.memory.shape, trainer.memory.batch) == (StepShape(16, 4), 2)
    assert trainer.memory.needed > 0 and estimated_with == [kernels]
    assert calls == [3, 2, 1]  # up to 4 steps a call, ending at checkpoints and progress lines
    assert (logged, saved, lock.verified) == ([5, 6], [3, 6], 2)
    assert sorted(f for f in os.listdir(out) if f.endswith(".index")) == ["model.ckpt-6.index"]
    assert json.load(open(out / "run.json")) == {
        "kind": "a test", "model_class": "albert_tf.modeling.pretrainer.AlbertPretrainer",
        "settings": {"learning_rate": 0.5}}
    assert (out / "vocab.txt").read_text() == vocab.read_text()
    guarded = Trainer(strategy, model_fn, optimizer_fn, str(tmp_path / "guarded"),
                      TrainerOptions(global_batch_size=4, jit_compile=True,
                                     excursions=ExcursionSettings(max_recoveries=7)))
    assert guarded._compiled() == "forward, backward and update compiled as one XLA computation"
    assert guarded.guard.settings.max_recoveries == 7
    assert LossGuard.saved_state(guarded.save())["recoveries"] == 0


@pytest.mark.parametrize("keep,kept", [(2, [3, 4]), (0, [1, 2, 3, 4])])
def test_keep_checkpoint_max_zero_keeps_every_checkpoint(tmp_path, keep, kept):
    """--keep_checkpoint_max=0 keeps all, as the original's Estimator (its RunConfig: "None
    or 0, all checkpoint files are kept")."""
    from albert_tf.training.checkpoint_files import (CHECKPOINT_NAME, checkpoints_on_disk,
                                                     prune_checkpoints)
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path),
                                         max_to_keep=None, checkpoint_name=CHECKPOINT_NAME)
    for number in range(1, 5):
        manager.save(checkpoint_number=number)
    prune_checkpoints(str(tmp_path), keep, [])
    assert sorted(checkpoints_on_disk(str(tmp_path))) == kept
    from albert_tf.tasks.options import FinetuningOptions, PretrainingOptions
    for options in (FinetuningOptions, PretrainingOptions):  # (the flag's bound: 0 allowed)
        assert options(keep_checkpoint_max=keep).keep_checkpoint_max == keep
    with pytest.raises(ValueError, match=r"^keep_checkpoint_max=-1: "):
        FinetuningOptions(keep_checkpoint_max=-1)


def test_the_trainer_stays_in_rooms():
    """trainer.py holds the loop, not the recovery, the saving or the failures' messages."""
    path = os.path.join(ROOT, "albert_tf", "training", "trainer.py")
    source = open(path).read()
    assert len(source.splitlines()) <= 400
    train = next(node for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.FunctionDef) and node.name == "train")
    assert train.end_lineno - train.lineno + 1 <= 60


def _run(args, **kwargs):
    return subprocess.run([sys.executable] + args, cwd=ROOT, capture_output=True, text=True,
                          **kwargs)


def _pretrain_flags(config_file, records, output_dir, **extra):
    flags = dict(albert_config_file=config_file, input_file=records, output_dir=output_dir,
                 max_seq_length=16, max_predictions_per_seq=4, train_batch_size=8,
                 num_train_steps=6, num_warmup_steps=2, learning_rate=1e-3,
                 save_checkpoints_steps=3, log_steps=1, mixed_precision="none")
    flags.update(extra)
    return [f"--{k}={v}" for k, v in flags.items()]


def _logged_losses(stderr):
    return [float(x) for x in re.findall(r"step \d+/\d+ .*?  loss (\S+)", stderr)]


def test_float16_overflow_on_one_replica_skips_the_step_on_all(tmp_path):
    """Two replicas under mixed_float16, an inf injected into the second replica's gradient:
    no replica applies the step (weights unchanged and finite on both copies, step still 0)
    and the loss scale halves. Keras's own LossScaleOptimizer decided by replica 0 alone and
    applied the inf."""
    result = _run(["tests/helpers/loss_scale_two_replicas.py"])
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"copies": 2, "changed": False, "finite": True, "scale_before": 32768.0,
                   "scale_after": 16384.0, "step": 0}


@pytest.fixture(scope="module")
def one_device_run(config_file, records, tmp_path_factory):
    """run_pretraining on one device, 6 steps with eval: (output_dir, its log)."""
    out = tmp_path_factory.mktemp("one_device")
    status, log = run_tool_logged("run_pretraining", *_pretrain_flags(
        config_file, records, out, do_eval="true", max_eval_steps=4))
    assert status == 0, log[-3000:]
    assert "Each evaluation reads the 256 records of --input_file\n" in log
    assert "Eval at step 6 on 256 examples: loss " in log
    # The held-out SOP baseline: the more common order's share, counted here from the records.
    swapped = np.mean([tf.train.Example.FromString(r.numpy()).features.feature[
        "next_sentence_labels"].int64_list.value[0] for r in tf.data.TFRecordDataset(records)])
    baseline = max(swapped, 1 - swapped)
    assert (f"Held-out sentence order: {100 * swapped:.1f}% of the 256 pairs are swapped: "
            f"answering the more common order alone scores sentence_order_accuracy "
            f"{baseline:.4g}") in log
    accuracy = float(re.search(r"Eval at step 6 .*sentence_order_accuracy (\S+)", log)[1])
    assert ("equals the share of the more common order" in log) == (
        abs(accuracy - baseline) < 0.5 / 256 + 1e-4), (accuracy, baseline)
    return out, log


def test_mirrored_two_devices_equal_one_device(config_file, records, one_device_run, tmp_path):
    one, one_log = one_device_run
    two = _run(["tests/helpers/run_with_cpu_devices.py", "2", "albert_tf.run_pretraining"]
               + _pretrain_flags(config_file, records, tmp_path / "two", strategy="mirrored"))
    assert two.returncode == 0, two.stderr[-3000:]
    assert "Strategy mirrored (MirroredStrategy) with 2 replicas" in two.stderr
    losses_one, losses_two = _logged_losses(one_log), _logged_losses(two.stderr)
    assert len(losses_one) == len(losses_two) == 6
    np.testing.assert_allclose(losses_two, losses_one, rtol=1e-4)
    # The newest checkpoints (a run directory means its best, which the evals may pick apart).
    a = _weights(AlbertPretrainer.from_pretrained(tf.train.latest_checkpoint(str(one))))
    b = _weights(AlbertPretrainer.from_pretrained(
        tf.train.latest_checkpoint(str(tmp_path / "two"))))
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-5, err_msg=name)


def test_eval_writes_original_format_and_keeps_best(config_file, records, one_device_run):
    out, _ = one_device_run
    lines = (out / "eval_results.txt").read_text().splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
        "sentence_order_accuracy", "sentence_order_loss"]
    assert lines[0] == "global_step = 6"
    assert (out / "model.ckpt-best.index").exists()
    best = (out / "best_checkpoint.txt").read_text()
    assert "metric = masked_lm_accuracy" in best
    # Eval only, from the checkpoint in output_dir.
    status, log = run_tool_logged("run_pretraining", *_pretrain_flags(
        config_file, records, out, do_train="false", do_eval="true", max_eval_steps=2))
    assert status == 0, log[-3000:]
    assert "Each evaluation reads --max_eval_steps=2 batches of 64 records from --input_file" in log
    assert "Eval at step 6 on 128 examples: loss " in log
    # Nothing trains: the checkpoint is restored, not resumed, and no setting is compared.
    assert f"Restored {out}/model.ckpt-6 (step 6)" in log
    assert "Resum" not in log and "settings other than" not in log


def test_sigterm_saves_before_exit(config_file, records, tmp_path):
    out = tmp_path / "run"
    flags = _pretrain_flags(config_file, records, out, num_train_steps=100000,
                            save_checkpoints_steps=20, log_steps=20)
    proc = subprocess.Popen([sys.executable, "run_pretraining.py"] + flags, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (out / "model.ckpt-20.index").exists():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr[-3000:]  # 128 + SIGTERM: `train && next` stops
    stopped = int(re.search(r"Stopping at step (\d+) on SIGTERM", stderr).group(1))
    # Acknowledged when it comes, before the steps under way end.
    assert stderr.index("SIGTERM received: stopping once the steps or the evaluation under way "
                        "end, after saving a checkpoint") < stderr.index("Stopping at step")
    latest = tf.train.latest_checkpoint(str(out))
    assert latest.endswith(f"model.ckpt-{stopped}")
    assert stderr.splitlines()[-1] == (
        f"run_pretraining: stopped at step {stopped} on SIGTERM; nothing after training ran. "
        f"Rerun the same command to resume from {latest}")


def test_whole_training_step_compiles_as_one_xla_computation(tmp_path):
    """As on a TPU: forward, backward (with accumulation) and the LAMB update trace into one XLA
    computation, and its update equals the plain step's. (Each fine-tuning script's step runs
    as one XLA computation in its matrix test.)"""
    batch = pretraining_batch(TINY["vocab_size"], batch=4, seq=16, preds=4)
    dataset_fn = lambda ctx: tf.data.Dataset.from_tensors(batch).repeat()  # noqa: E731
    updates = {}
    for jit in (True, False):
        tf.keras.utils.set_random_seed(0)
        trainer = Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"),
                          lambda: AlbertPretrainer(AlbertConfig(**SMALL)),
                          lambda: create_optimizer(1e-3, 10, 1, "lamb"),
                          str(tmp_path / str(jit)),
                          TrainerOptions(global_batch_size=4, gradient_accumulation_steps=2,
                                         jit_compile=jit, save_checkpoints_steps=10,
                                         log_steps=1))
        assert trainer.whole_step_jit is jit
        initial = _weights(trainer.model)
        assert trainer.train(dataset_fn, 2) == 2
        updates[jit] = {n: v - initial[n] for n, v in _weights(trainer.model).items()}
        assert max(np.abs(update).max() for update in updates[jit].values()) > 1e-4
        if jit:  # one HLO module for the whole replica step, and the update is inside it
            hlo = trainer.strategy.run(
                lambda b: trainer._step_fn.experimental_get_compiler_ir(b)(stage="hlo"),
                args=({k: tf.constant(v) for k, v in batch.items()},))
            assert hlo.count("HloModule ") == 1
            graph = trainer._step_fn._list_all_concrete_functions()[0].graph
            assert {"AssignVariableOp", "While"} <= {op.type for op in graph.get_operations()}
    for name, update in updates[True].items():
        np.testing.assert_allclose(update, updates[False][name], atol=2e-5, err_msg=name)


def test_log_says_what_xla_compiles_under_mirrored(tmp_path):
    """Mirrored: the update all-reduces outside XLA, the forward and backward pass is compiled;
    the log says so. (One device, with and without XLA: the scripts' matrix tests.)"""
    for jit, expected in (
            (True, "forward and backward compiled with XLA, the update outside it"),
            (False, "TensorFlow ops, XLA only in each variable's optimizer update")):
        trainer = Trainer(tf.distribute.MirroredStrategy(["/cpu:0"]),
                          lambda: AlbertPretrainer(AlbertConfig(**TINY)),
                          lambda: create_optimizer(1e-3, 10, 1, "lamb"), str(tmp_path / str(jit)),
                          TrainerOptions(global_batch_size=4, jit_compile=jit))
        assert (trainer.whole_step_jit, trainer.gradients_jit) == (False, jit)
        assert trainer._compiled() == expected


def test_pretraining_precision_and_xla_matrix(records, tmp_path):
    """run_pretraining under float32/bfloat16/float16, each with and without XLA, with dropout
    0.1, gradient accumulation (the bf16 + accumulation + dropout path of issue 12) and masks
    drawn afresh per batch as the demo draws them (single words): every run trains, logs finite
    losses, checkpoints and evaluates, with held-out losses near the float32 run's (the masks
    are seeded alike)."""
    config = tmp_path / "albert_config.json"
    AlbertConfig(**{**SMALL, "hidden_dropout_prob": 0.1,
                    "attention_probs_dropout_prob": 0.1}).to_json_file(str(config))
    flags = _pretrain_flags(str(config), records, tmp_path, num_train_steps=4,
                            save_checkpoints_steps=4, gradient_accumulation_steps=2,
                            dynamic_masking=True, ngram=1, masked_lm_prob=0.2, mask_token_id=4,
                            do_eval=True, max_eval_steps=2, strategy="one_device")
    flags = [f for f in flags if not f.startswith(("--output_dir", "--mixed_precision"))]
    runs, losses = {}, []
    for precision, jit in PRECISION_MATRIX:
        name = f"{precision}-{jit}"
        status, log = run_tool_logged("run_pretraining", *flags, output_dir=tmp_path / name,
                                      mixed_precision=precision, jit_compile=jit)
        tf.keras.mixed_precision.set_global_policy("float32")  # as a new process starts
        assert status == 0, log[-3000:]
        assert (re.search(r"^step \d+/4 .*  loss_scale \d+", log, re.M) is not None) == (
            precision == "float16"), log[-3000:]  # float16's dynamic loss scale, logged
        losses += _logged_losses(log)
        lines = (tmp_path / name / "eval_results.txt").read_text().splitlines()
        runs[name] = dict(line.split(" = ") for line in lines if line)
    assert len(losses) == 4 * len(PRECISION_MATRIX) and np.isfinite(losses).all()
    for name, values in runs.items():
        assert values["global_step"] == "4", name
        assert (tmp_path / name / "model.ckpt-4.index").exists()
        assert 0 <= float(values["masked_lm_accuracy"]) <= 1
        assert_near_float32(values, runs["none-false"],
                            ("masked_lm_loss", "sentence_order_loss", "loss"))

