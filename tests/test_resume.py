"""A run killed with SIGKILL and rerun with the same command is the same run: it ends with the
weights, optimizer slots and random state of a run never interrupted (docs/pretraining.md,
"Preemption"). The killed runs are processes of their own; the uninterrupted runs and the
reruns run in this process, as `python -m` would run them (tool_runner)."""

import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.training.input_state import TrainingInput
from conftest import SMALL, write_pretraining_records
from test_original_commands import paths  # noqa: F401 (the fixture)
from tool_runner import run_tool_logged

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DROPOUT = dict(SMALL, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Three record files (so that the interleave and the file shuffle matter) and a tiny
    config with dropout 0.1."""
    root = tmp_path_factory.mktemp("resume")
    files = [write_pretraining_records(root / f"train-{i}.tfrecord", 40, seed=i)
             for i in range(3)]
    config = root / "albert_config.json"
    AlbertConfig(**DROPOUT).to_json_file(str(config))
    return str(root / "train-*.tfrecord"), str(config), files


def _flags(data, output_dir, **extra):
    pattern, config, _ = data
    flags = dict(albert_config_file=config, input_file=pattern, output_dir=output_dir,
                 max_seq_length=16, max_predictions_per_seq=4, train_batch_size=8,
                 num_train_steps=36, num_warmup_steps=4, learning_rate=2e-3,
                 save_checkpoints_steps=6, log_steps=6, mixed_precision="none",
                 jit_compile="false")
    flags.update(extra)
    return [f"--{k}={v}" for k, v in flags.items()]


def checkpoint_tensors(directory):
    """Every tensor of the latest checkpoint in `directory` but the save counter."""
    prefix = tf.train.latest_checkpoint(str(directory))
    reader = tf.train.load_checkpoint(prefix)
    return prefix, {name: reader.get_tensor(name)
                    for name in reader.get_variable_to_shape_map()
                    if not name.startswith(("save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH"))}


def assert_same_state(a_dir, b_dir, atol=1e-6):
    a_prefix, a = checkpoint_tensors(a_dir)
    b_prefix, b = checkpoint_tensors(b_dir)
    assert os.path.basename(a_prefix) == os.path.basename(b_prefix)
    assert sorted(a) == sorted(b)
    assert any(name.startswith("rng/") for name in a)
    assert any("/.OPTIMIZER_SLOT/" in name or name.startswith("optimizer/") for name in a)
    numeric = [n for n in a if not isinstance(a[n], bytes)]
    for name in set(a) - set(numeric):  # the loss guard's state (JSON): the same within atol
        _assert_close_json(json.loads(a[name]), json.loads(b[name]), max(atol, 1e-5), name)
    worst = max((float(np.max(np.abs(a[n].astype(np.float64) - b[n].astype(np.float64)),
                           initial=0.0)), n) for n in numeric)
    assert worst[0] <= atol, worst


def _assert_close_json(a, b, rtol, name):
    assert sorted(a) == sorted(b), name
    for key in a:
        if isinstance(a[key], float) and isinstance(b[key], float):
            assert a[key] == b[key] or abs(a[key] - b[key]) <= rtol * abs(a[key]), (name, key)
        else:
            assert a[key] == b[key], (name, key, a[key], b[key])


def kill_after_checkpoint(command, output_dir, step, timeout=180):
    """Starts `command`, SIGKILLs it once a checkpoint of at least `step` is trusted; returns
    the step of that checkpoint."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout

    def saved():
        latest = tf.train.latest_checkpoint(str(output_dir))
        return int(latest.rsplit("-", 1)[1]) if latest else 0
    try:
        while saved() < step:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.time() < deadline
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return saved()


def run_ok(command):
    """Runs `[python, -m, albert_tf.<tool>, flags...]` in this process; returns its log."""
    assert command[1:2] == ["-m"], command
    status, log = run_tool_logged(importlib.import_module(command[2]), *command[3:])
    assert status == 0, log[-3000:]
    return log


@pytest.mark.parametrize("masking,precision", [("static", "bfloat16"), ("dynamic", "float16-xla")])
def test_pretraining_killed_and_rerun_is_the_same_run(data, tmp_path, masking, precision):
    """Static masks under bfloat16 (the precision `auto` picks on TPUs and AMX CPUs), dynamic
    masks under float16, which also restores the dynamic loss scale (part of the optimizer's
    state); with XLA (as on a TPU or GPU) dropout draws XLA's random numbers from the same
    restored seeds."""
    extra = dict(mixed_precision=precision)
    if precision.endswith("-xla"):
        extra = dict(mixed_precision=precision[:-4], jit_compile="true")
    if masking == "dynamic":
        extra["dynamic_masking"] = "true"
    command = [sys.executable, "-m", "albert_tf.run_pretraining"]
    run_ok(command + _flags(data, tmp_path / "whole", **extra))
    killed = kill_after_checkpoint(command + _flags(data, tmp_path / "killed", **extra),
                                   tmp_path / "killed", 12)
    assert 12 <= killed < 36
    err = run_ok(command + _flags(data, tmp_path / "killed", **extra))
    assert f"Resumed the input position of step {killed}" in err
    assert_same_state(tmp_path / "whole", tmp_path / "killed")
    if masking == "static":
        _rerun_over_damaged_checkpoints(command + _flags(data, tmp_path / "killed", **extra),
                                        tmp_path / "killed", tmp_path / "whole")


def _rerun_over_damaged_checkpoints(command, out, whole):
    """The newest checkpoint truncated, the one before it without its .index, the `checkpoint`
    index gone: the rerun resumes from the newest intact one, says so, and still ends as the
    uninterrupted run."""
    newest = tf.train.latest_checkpoint(str(out))
    assert newest.endswith("model.ckpt-36")
    data = [f for f in os.listdir(out) if f.startswith("model.ckpt-36.data")][0]
    with open(out / data, "r+b") as f:
        f.truncate(os.path.getsize(out / data) // 2)
    os.remove(out / "model.ckpt-30.index")
    os.remove(out / "checkpoint")
    err = run_ok(command)
    assert (f"Resuming from {out}/model.ckpt-24, the newest intact checkpoint (skipped "
            f"model.ckpt-36 (Read less bytes than requested))") in err, err[-3000:]
    assert "Resumed the input position of step 24" in err
    assert_same_state(whole, out)


FINETUNING = {
    "run_classifier": "--task_name=SST-2 --data_dir={glue} --spm_model_file={squad_spm} "
                      "--init_checkpoint={release}/model.ckpt-best --do_lower_case "
                      "--max_seq_length=32 --train_batch_size=8 --learning_rate=1e-3 "
                      "--train_step=24 --warmup_step=2",
    "run_squad": "--train_file={squad_train_v2} --version_2_with_negative "
                 "--init_checkpoint={squad_init} --spm_model_file={squad_spm} --do_lower_case "
                 "--max_seq_length=40 --doc_stride=16 --max_query_length=12 "
                 "--train_batch_size=8 --learning_rate=3e-3 --num_train_epochs=0.55 "
                 "--warmup_proportion=.1",
}


@pytest.mark.parametrize("script", sorted(FINETUNING))
def test_finetuning_killed_and_rerun_is_the_same_run(paths, tmp_path, script):
    """Head dropout 0.1 (the scripts' default), shuffled epochs, killed after step 12 of 24.
    run_race feeds the same driver input (tasks/driver.dataset_fn) as these two."""
    def command(out):
        flags = FINETUNING[script].format(**paths).split()
        return [sys.executable, "-m", f"albert_tf.{script}", f"--output_dir={out}",
                "--do_train", "--nodo_eval", "--nodo_predict", "--save_checkpoints_steps=6",
                "--mixed_precision=none", "--jit_compile=false"] + flags
    run_ok(command(tmp_path / "whole"))
    killed = kill_after_checkpoint(command(tmp_path / "killed"), tmp_path / "killed", 12)
    assert 12 <= killed < 24
    err = run_ok(command(tmp_path / "killed"))
    assert f"Resumed the input position of step {killed}" in err
    assert_same_state(tmp_path / "whole", tmp_path / "killed")


def _uniform(array):
    values = np.unique(np.asarray(array))
    assert len(values) == 1, values[:5]
    return values[0]


def _check_trusted_files(out):
    """Every file a rerun would trust is whole: each holds one round's value throughout."""
    from helpers.write_loop import BLOB_BYTES, RECORD_BYTES, RECORDS
    latest = tf.train.latest_checkpoint(str(out))
    if latest:  # what a rerun resumes from
        value = _uniform(tf.train.load_checkpoint(latest).get_tensor(
            "v/.ATTRIBUTES/VARIABLE_VALUE"))
        assert value == int(latest.rsplit("-", 1)[1])
    if (out / "model.ckpt-best.index").exists():
        best = _uniform(tf.train.load_checkpoint(str(out / "model.ckpt-best")).get_tensor(
            "v/.ATTRIBUTES/VARIABLE_VALUE"))
        if (out / "best_checkpoint.txt").exists():
            assert f"global_step = {int(best)}\n" in (out / "best_checkpoint.txt").read_text()
    if (out / "eval_results.txt").exists():
        lines = (out / "eval_results.txt").read_text().splitlines()
        assert lines[0].startswith("accuracy = ") and lines[1].startswith("global_step = ")
        assert float(lines[0].split(" = ")[1]) == int(lines[1].split(" = ")[1])
    if (out / "shard.tfrecord").exists():
        records = [r.numpy() for r in tf.data.TFRecordDataset(str(out / "shard.tfrecord"))]
        assert len(records) == RECORDS and len(set(records)) == 1
        assert len(records[0]) == RECORD_BYTES
    if (out / "export").exists():
        _uniform(tf.saved_model.load(str(out / "export")).v.numpy())
    if (out / "model.tflite").exists():
        blob = (out / "model.tflite").read_bytes()
        assert len(blob) == BLOB_BYTES and len(set(blob)) == 1


def test_a_kill_while_writing_never_leaves_a_file_a_rerun_trusts(tmp_path):
    delays = [0.0, 0.02, 0.06, 0.15, 0.4]
    for delay in delays:
        out = tmp_path / f"kill-{delay}"
        proc = subprocess.Popen([sys.executable, "tests/helpers/write_loop.py", str(out)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, PYTHONPATH=ROOT), text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _check_trusted_files(out)


def _damaged_records_and_trainer(tmp_path, name, count, records, at, **dataset_options):
    """`count` record files, the second with one byte flipped at fraction `at` of it, their
    dataset_fn (naming them, as run_pretraining's does) and a Trainer for a SMALL pretrainer."""
    from albert_tf import AlbertPretrainer, create_optimizer
    from albert_tf.data.pipeline import pretraining_dataset
    from albert_tf.training.trainer import Trainer
    from albert_tf.training.trainer_options import TrainerOptions
    files = [write_pretraining_records(tmp_path / f"{name}-{i}.tfrecord", records, seed=i)
             for i in range(count)]
    raw = bytearray(open(files[1], "rb").read())
    raw[int(len(raw) * at)] ^= 0xFF
    open(files[1], "wb").write(bytes(raw))

    def dataset_fn(ctx):
        return pretraining_dataset(files, 8, 16, 4, input_context=ctx, **dataset_options)
    dataset_fn.input_files = files
    trainer = Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"),
                      lambda: AlbertPretrainer(AlbertConfig(**SMALL)),
                      lambda: create_optimizer(1e-3, 1000, 2, "lamb"), str(tmp_path / "out"),
                      TrainerOptions(global_batch_size=8, save_checkpoints_steps=5, log_steps=5))
    return files, dataset_fn, trainer


def test_a_corrupt_eval_record_stops_evaluation_naming_the_file(tmp_path):
    from albert_tf.training.failures import CorruptInputError
    files, dataset_fn, trainer = _damaged_records_and_trainer(tmp_path, "eval", 2, 40, 0.5,
                                                              is_training=False)
    with pytest.raises(CorruptInputError) as err:
        trainer.evaluate(dataset_fn)
    assert re.match(
        rf"{re.escape(files[1])} is corrupt after its first (19|20) records \(corrupted "
        rf"record at \d+\)\. Evaluation at step 0 stopped; replace or remove the file",
        str(err.value)), str(err.value)


def test_a_corrupt_record_stops_training_naming_the_file_and_the_last_checkpoint(tmp_path):
    from albert_tf.training.failures import CorruptInputError
    # 200 records a file, damaged near its end (tf.data reads ahead): met dozens of steps in
    files, dataset_fn, trainer = _damaged_records_and_trainer(tmp_path, "train", 3, 200, 0.9,
                                                              seed=1, shuffle_buffer=8)
    with pytest.raises(CorruptInputError) as err:
        trainer.train(dataset_fn, 1000)
    last = tf.train.latest_checkpoint(str(tmp_path / "out"))
    assert last and re.match(
        rf"{re.escape(files[1])} is corrupt after its first \d+ records \(corrupted record at "
        rf"\d+\)\. Training stopped after step \d+ without saving; last good checkpoint: "
        rf"{re.escape(last)}\. Replace or remove the file", str(err.value)), str(err.value)


def test_a_run_resumes_with_another_batch_size_or_more_input_files(data, tmp_path):
    """The saved input position fits only the batches and files it was saved with: otherwise
    the run goes on with the input restarted from its seed, and says why (it used to stop with
    Incompatible shapes, or OutOfRange for good)."""
    records = tmp_path / "records"
    records.mkdir()
    for path in data[2]:
        shutil.copy(path, records)
    mine = (str(records / "train-*.tfrecord"), data[1], None)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "albert_tf.run_pretraining"]
    log = run_ok(command + _flags(mine, out, num_train_steps=6))
    assert "Pretraining from random weights (no --init_checkpoint)" in log
    assert (f"no --spm_model_file or --vocab_file: the checkpoints in {out} will carry no "
            f"vocabulary") in log
    log = run_ok(command + _flags(mine, out, num_train_steps=12, train_batch_size=4))
    assert "Pretraining from random weights" not in log
    assert (f"Resuming the run in {out} with settings other than it last trained with "
            f"(run.json): --num_train_steps (run: 6, now: 12), --train_batch_size (run: 8, "
            f"now: 4)\n") in log
    # the schedule for 12 steps: the learning rate goes on from half of 2e-3, not from 0
    assert f"Resumed from {out}/model.ckpt-6 at step 6, at learning rate 0.001\n" in log
    assert ("The input position at step 6 is not restored: it was saved for other batches "
            "(--train_batch_size, --max_seq_length or the replicas changed)") in log
    write_pretraining_records(records / "train-3.tfrecord", 40, seed=3)  # users add data
    log = run_ok(command + _flags(mine, out, num_train_steps=18, train_batch_size=4))
    assert ("The input position at step 12 is not restored: the input files changed since "
            "(3 then, 4 now: 1 added, 0 gone)") in log
    # compared with the last process's settings, not with those the run started with
    assert ("with settings other than it last trained with (run.json): --num_train_steps "
            "(run: 12, now: 18)\n") in log
    assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-18")
    run = json.load(open(out / "run.json"))
    assert run["kind"] == "pretraining" and run["settings"]["input_file"] == mine[0]
    assert [(s["num_train_steps"], s["train_batch_size"])
            for s in (run["started_with"], run["settings"])] == [(6, 8), (18, 4)]


def test_an_input_position_whose_batch_size_the_shapes_leave_open_is_not_restored_at_another(
        tmp_path, caplog):
    """Fine-tuning's batches have no fixed batch dimension (the last one may be short), so the
    shapes alone do not tell another --train_batch_size: the position saved at 16 a batch is
    not restored at 8 (before: restored, the epochs went on at another place)."""
    def dataset_fn(context, batch=None):
        return tf.data.Dataset.range(1000).batch(batch or 8).repeat()
    strategy = tf.distribute.get_strategy()
    at16 = TrainingInput(strategy, dataset_fn, str(tmp_path), global_batch_size=16)
    [at16.next() for _ in range(3)]
    at16.save(3)
    again = TrainingInput(strategy, dataset_fn, str(tmp_path), global_batch_size=16)
    assert again.restore(3) and int(again.next()[0]) == 24
    with caplog.at_level("WARNING", logger="absl"):
        assert not TrainingInput(strategy, dataset_fn, str(tmp_path),
                                 global_batch_size=8).restore(3)
    assert ("The input position at step 3 is not restored: it was saved for other batches "
            "(--train_batch_size, --max_seq_length or the replicas changed)") in caplog.text
