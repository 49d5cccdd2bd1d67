"""One run per output directory (training/run_lock.py): a live holder refuses a second run with
one line naming it; a dead one (killed, machine lost) never blocks a rerun."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from albert_tf.training import distribution
from albert_tf.training.run_lock import LOCK_NAME, RunLock, RunLocked, RunLockLost
from conftest import TINY, write_pretraining_records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLDER = re.compile(r"is in use by (\S+(?: \([^)]*\))?) on host (\S+) \(process (\d+), since "
                    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)")


def test_a_live_holder_refuses_a_second_run_then_lets_go(tmp_path):
    out = tmp_path / "run"
    with RunLock(out, "run_pretraining"):
        holder = json.loads((out / LOCK_NAME).read_text())
        assert (holder["host"], holder["pid"]) == (socket.gethostname(), os.getpid())
        with pytest.raises(RunLocked) as refused:
            RunLock(out, "run_classifier (sst-2)").__enter__()
        message = str(refused.value)
        assert message.startswith(f"--output_dir={out} is in use by run_pretraining on host ")
        assert HOLDER.search(message).group(3) == str(os.getpid())
    assert not (out / LOCK_NAME).exists()
    with RunLock(out, "run_pretraining"):  # free again
        pass


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path, caplog):
    out = tmp_path / "run"
    code = ("import sys, time\nfrom albert_tf.training.run_lock import RunLock\n"
            f"RunLock({str(out)!r}, 'run_pretraining').__enter__()\nprint('held', flush=True)\n"
            "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=f"process {proc.pid}, since"):
            RunLock(out, "run_pretraining").__enter__()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (out / LOCK_NAME).exists()  # a SIGKILL leaves the file, not the hold
    with caplog.at_level("WARNING"), RunLock(out, "run_pretraining"):
        holder = json.loads((out / LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid()
    assert f"(process {proc.pid}, since" in caplog.text and "no longer running" in caplog.text


def test_object_store_lock_heartbeat_takeover_and_loss(caplog):
    """gs://-like storage (TensorFlow's ram:// file system): no OS lock, a heartbeat instead."""
    out = f"ram://lock-{os.getpid()}-{time.time_ns()}/run"
    fast = dict(heartbeat_s=0.05, stale_s=0.5, settle_s=0.01)
    first = RunLock(out, "run_pretraining", **fast).__enter__()
    with pytest.raises(RunLocked, match=r"renewed \d+ s ago; one not renewed for 0 s"):
        RunLock(out, "run_pretraining", **fast).__enter__()
    first._lock._stop.set()  # the first run's machine is lost: no more heartbeats
    first._lock._thread.join()
    time.sleep(0.6)
    with caplog.at_level("WARNING"):
        second = RunLock(out, "run_pretraining", **fast).__enter__()
    assert "taken for dead" in caplog.text
    with pytest.raises(RunLockLost, match="another run took --output_dir over"):
        first.verify()  # the first, back from the dead, must not save over the second
    second.verify()
    second.__exit__(None, None, None)
    assert not tf.io.gfile.exists(f"{out}/{LOCK_NAME}")


@pytest.mark.parametrize("tf_config,chief", [
    (None, True),
    ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}, True),
    ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}, False),
    ({"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "worker",
                                                                 "index": 0}}, False),
    ({"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "chief",
                                                                 "index": 0}}, True),
])
def test_a_multi_worker_job_takes_it_once(monkeypatch, tmp_path, tf_config, chief):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    assert distribution.is_chief_task() is chief
    with RunLock(tmp_path / "run", "run_pretraining", chief=distribution.is_chief_task()):
        assert (tmp_path / "run" / LOCK_NAME).exists() is chief


def test_two_pretraining_runs_started_together_into_one_directory(tmp_path):
    """As a scheduler relaunching, or one command pasted in two terminals: one trains, the
    other stops before writing with one line naming it; every checkpoint is the winner's."""
    from albert_tf import AlbertConfig
    config = tmp_path / "albert_config.json"
    AlbertConfig(**{**TINY, "vocab_size": 60}).to_json_file(str(config))
    records = write_pretraining_records(tmp_path / "train.tfrecord", 64, vocab=60)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "albert_tf.run_pretraining", f"--albert_config_file={config}",
               f"--input_file={records}", f"--output_dir={out}", "--max_seq_length=16",
               "--max_predictions_per_seq=4", "--train_batch_size=8", "--num_train_steps=60",
               "--num_warmup_steps=2", "--save_checkpoints_steps=20", "--log_steps=20",
               "--mixed_precision=none", "--jit_compile=false"]
    procs = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read(), p.pid) for p in procs]
    assert sorted(r[0] for r in results) == [0, 2], [r[1][-1500:] for r in results]
    (_, _, winner), (_, err, _) = sorted(results)[0], sorted(results)[1]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"run_pretraining: error: --output_dir={out} is in use by "
                           f"run_pretraining on host {socket.gethostname()} (process {winner},")
    assert "Traceback" not in err and "Training steps" not in err
    assert sorted(p.name for p in out.glob("model.ckpt-*.index")) == [
        "model.ckpt-20.index", "model.ckpt-40.index", "model.ckpt-60.index"]
    assert not (out / LOCK_NAME).exists()
