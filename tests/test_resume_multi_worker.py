"""Multi-worker preemption: a stop request on one worker stops every worker at the same step
with one checkpoint; a worker that dies makes the others fail within seconds with a clear
message; restarting every worker resumes (docs/pretraining.md, "Preemption")."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from test_resume import ROOT, _flags, data  # noqa: F401 (data: the fixture)
from conftest import start_local_workers

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not


def _start_workers(data, out, **extra):
    return start_local_workers(
        [sys.executable, "-m", "albert_tf.run_pretraining"] + _flags(
            data, out, strategy="multi_worker_mirrored", save_checkpoints_steps=10,
            log_steps=10, **extra), ROOT, stdout=subprocess.DEVNULL)


def _wait_for(path, procs, timeout=180):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert all(p.poll() is None for p in procs) and time.time() < deadline
        time.sleep(0.02)


def _resume_both(data, out, step):
    """Restarts both workers to run 4 more steps; each resumes weights and input at `step`."""
    procs = _start_workers(data, out, num_train_steps=step + 4)
    errs = [p.communicate(timeout=300)[1] for p in procs]
    for p, err in zip(procs, errs):
        assert p.returncode == 0, err[-3000:]
        assert "Strategy multi_worker_mirrored (CollectiveAllReduceStrategy) with 2 replicas" in err
        assert f"Resumed the input position of step {step}" in err
    assert tf.train.latest_checkpoint(str(out)).endswith(f"model.ckpt-{step + 4}")
    assert not [f for f in os.listdir(out) if f.startswith(".worker")]  # no worker's temp files


@pytest.mark.parametrize("victim", [0, 1])
def test_sigterm_to_one_worker_stops_every_worker_at_the_same_step(data, tmp_path, victim):
    out = tmp_path / "mw"
    procs = _start_workers(data, out, num_train_steps=100000)
    _wait_for(out / "model.ckpt-10.index", procs)
    procs[victim].send_signal(signal.SIGTERM)
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [143, 143], errs[0][-2000:] + errs[1][-2000:]
    steps = [int(re.search(r"Stopping at step (\d+) on (\S+)", e).group(1)) for e in errs]
    assert steps[0] == steps[1] >= 10
    assert "Stopping at step %d on SIGTERM" % steps[0] in errs[victim]
    assert "on a stop request of another worker" in errs[1 - victim]
    step = steps[0]
    assert tf.train.latest_checkpoint(str(out)).endswith(f"model.ckpt-{step}")
    for worker in (0, 1):
        assert (out / "input_state" / f"worker-{worker}" / f"step-{step}.index").exists()
    if victim == 1:  # (the restart is the same whichever worker was stopped)
        _resume_both(data, out, step)


def test_a_worker_killed_stops_the_others_with_a_clear_error(data, tmp_path):
    out = tmp_path / "mw"
    procs = _start_workers(data, out, num_train_steps=100000)
    _wait_for(out / "model.ckpt-10.index", procs)
    procs[1].send_signal(signal.SIGKILL)
    start = time.time()
    _, err = procs[0].communicate(timeout=120)
    procs[1].wait()
    assert procs[0].returncode != 0 and time.time() - start < 60
    last = tf.train.latest_checkpoint(str(out))
    message = re.search(r"^run_pretraining: error: (.*)", err, re.MULTILINE).group(1)
    assert "Traceback" not in err
    assert "a worker of the job stopped or became unreachable" in message
    assert f"Last checkpoint: {last}. Restart every worker with the same command" in message
    # Restarting every worker resumes: tested after a stop request (victim 1 above); a run
    # killed at any moment resumes from its last checkpoint (test_resume.py).
