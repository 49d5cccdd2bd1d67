"""Pretraining fed by tf.data service (docs/pretraining.md, "Input on tf.data service"): one
dispatcher and two workers on localhost (in this process), trainers in this process or killed
ones in their own. The batches are the in-process pipeline's, so a run fed by the service, killed
and rerun, ends with the state of an uninterrupted run without it; a lost worker, a missing one
or an unreachable dispatcher is one line."""

import contextlib
import gc
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.impl import api as autograph_api

from albert_tf import data_service, run_pretraining
from albert_tf.data.pipeline import pretraining_dataset
from albert_tf.data.service import (ServiceUnavailable, check_dispatcher, in_index_order,
                                    read_from_service, shard_for_workers, start_dispatcher,
                                    start_worker, wait_for_workers)
from albert_tf.training.failures import Watchdog
from conftest import free_ports
from test_resume import (ROOT, _flags, assert_same_state, data,  # noqa: F401 (data: a fixture)
                         kill_after_checkpoint, run_ok)
from tool_runner import assert_refused, run_tool

pytestmark = pytest.mark.slow
PRETRAIN = [sys.executable, "-m", "albert_tf.run_pretraining"]


@contextlib.contextmanager
def local_service(workers=2, started=None):
    """(dispatcher address, running workers) on localhost, in this process: `workers` listed,
    the first `started` of them running."""
    port, *ports = free_ports(1 + workers)
    addresses = [f"localhost:{p}" for p in ports]
    dispatcher = start_dispatcher(port, addresses)
    running = [start_worker(f"localhost:{port}", p, a)
               for p, a in list(zip(ports, addresses))[:started]]
    try:
        yield f"localhost:{port}", running
    finally:
        gc.collect()  # the iterators of finished runs: a worker's stop waits for their calls
        for server in [*running, dispatcher]:
            server._stop()


@pytest.fixture
def service():
    with local_service() as (address, _):
        yield address


@pytest.mark.parametrize("dynamic_masking", [True, False])
def test_the_service_sends_the_in_process_batches(data, service, dynamic_masking,  # noqa: F811
                                                  monkeypatch):
    """Batch for batch, masks included, from the start and from a later batch (a resume).
    AutoGraph rewrites none of the pipelines' functions (they are TensorFlow ops already)."""
    converted, convert = [], autograph_api._convert_actual
    monkeypatch.setattr(autograph_api, "_convert_actual",
                        lambda entity, context: converted.append(entity) or convert(entity,
                                                                                    context))
    options = dict(input_patterns=data[0], batch_size=4, max_seq_length=16,
                   max_predictions_per_seq=4, seed=7, dynamic_masking=dynamic_masking,
                   vocab_size=60)
    local = list(pretraining_dataset(**options).take(16))
    for start in (0, 5):
        served = list(pretraining_dataset(**options, data_service=service,
                                          start_batch=start).take(16 - start))
        assert not converted, converted
        assert len(served) == 16 - start
        for expected, got in zip(local[start:], served):
            assert sorted(got) == sorted(expected)
            for name in expected:
                np.testing.assert_array_equal(got[name].numpy(), expected[name].numpy(), name)


def _reordered(indices, first=0, window=4):
    pairs = tf.data.Dataset.from_tensor_slices((np.array(indices, np.int64), {
        "ids": np.repeat(np.array(indices, np.int32)[:, None], 3, axis=1)}))
    out = [batch["ids"].numpy() for batch in in_index_order(pairs, first, window)]
    assert all(row.tolist() == [row[0]] * 3 for row in out)
    return [int(row[0]) for row in out]


def test_batches_that_come_late_are_put_back_in_order_and_a_lost_one_is_an_error():
    """A worker that misses a round sends its batch a round later (seen under load)."""
    assert _reordered([1, 0, 3, 2, 5, 4]) == [0, 1, 2, 3, 4, 5]
    assert _reordered([0, 2, 1, 4, 3, 6, 5, 7]) == list(range(8))
    assert _reordered([6, 5, 8, 7], first=5) == [5, 6, 7, 8]
    for indices, message in (([0, 2, 3, 4, 5], "sent batch 5 where batch 1 was due"),
                             ([0, 0, 1], "sent batch 0 where batch 1 was due"),
                             ([1, 0, 2, 2], "sent batch 2 where batch 3 was due")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            _reordered(indices)


def test_a_run_fed_by_the_service_killed_and_rerun_is_the_same_run(
        data, service, tmp_path):  # noqa: F811
    """mixed_bfloat16 (what `auto` picks on TPUs, recent GPUs and AMX CPUs), dynamic masking:
    SIGKILLed after a checkpoint and rerun with the same command, a run fed by the service ends
    with the weights, slots and random state of the uninterrupted in-process run."""
    extra = dict(dynamic_masking="true", mixed_precision="bfloat16", num_train_steps=24)
    run_ok(PRETRAIN + _flags(data, tmp_path / "local", **extra))
    served = PRETRAIN + _flags(data, tmp_path / "killed", data_service_address=service, **extra)
    killed = kill_after_checkpoint(served, tmp_path / "killed", 6)
    assert 6 <= killed < 24
    log = run_ok(served)
    assert f"Training batches come from the tf.data service, from batch {killed}" in log
    assert_same_state(tmp_path / "local", tmp_path / "killed")


@pytest.mark.parametrize("precision", [dict(mixed_precision="none"),
                                       dict(mixed_precision="float16", jit_compile="true")])
def test_a_lost_worker_stops_the_run_with_one_line(data, tmp_path, capsys,
                                                   precision):  # noqa: F811
    """float32, and float16 with the step compiled by XLA (as on a GPU): the run trains from
    both workers until one is stopped after the first checkpoint."""
    out = tmp_path / "run"
    with local_service() as (address, workers):
        def lose_a_worker():
            while not tf.train.latest_checkpoint(str(out)):
                time.sleep(0.05)
            workers.pop()._stop()
        threading.Thread(target=lose_a_worker, daemon=True).start()
        result = run_tool(run_pretraining, capsys, *_flags(
            data, out, data_service_address=address, num_train_steps=100000, log_steps=1000,
            **precision))
    assert_refused(result, f"the tf.data service at {address} sent batch ", status=1)
    last = result[1]
    assert "was due: one of its workers was lost, restarted or is not serving" in last
    assert f"last checkpoint: {out}/model.ckpt-" in last and "to resume from that" in last


def test_an_unreachable_dispatcher_or_a_missing_worker_is_one_line(
        data, tmp_path, capsys):  # noqa: F811
    (nobody,) = free_ports(1)
    result = run_tool(run_pretraining, capsys, *_flags(
        data, tmp_path / "a", data_service_address=f"localhost:{nobody}"))
    assert_refused(result, f"no tf.data service dispatcher answers at localhost:{nobody} "
                           f"(Connection refused); start one with python -m "
                           f"albert_tf.data_service --dispatcher_port={nobody}", status=1)
    assert not (tmp_path / "a").exists()
    assert_refused(run_tool(run_pretraining, capsys, *_flags(
        data, tmp_path / "a", data_service_address="localhost")),
        "--data_service_address=localhost is not host:port")
    assert_refused(run_tool(run_pretraining, capsys, *_flags(
        data, tmp_path / "a", data_service_address=f"localhost:{nobody}",
        data_service_timeout=0)), "--data_service_timeout=0.0: must be a positive number")

    with local_service(workers=2, started=1) as (address, _):
        result = run_tool(run_pretraining, capsys, *_flags(
            data, tmp_path / "b", data_service_address=address, data_service_timeout=2))
    assert_refused(result, f"the tf.data service at {address}: 1 of its 2 workers serve after "
                           f"2 s; start every worker", status=1)
    assert tf.train.latest_checkpoint(str(tmp_path / "b")) is None


def test_the_watchdog_ends_only_a_wait_longer_than_its_timeout():
    expired = []
    watchdog = Watchdog(0.2, lambda: "no step", expire=expired.append)
    try:
        time.sleep(0.5)  # outside `with` nothing is watched (saving, evaluating)
        with watchdog:
            time.sleep(0.1)
        assert expired == []
        with watchdog:
            deadline = time.monotonic() + 5
            while not expired and time.monotonic() < deadline:
                time.sleep(0.05)
        assert expired == ["no step"]
    finally:
        watchdog.stop()


def _stderr_lines(proc):
    """(lines read so far, thread reading `proc`'s stderr to its end)."""
    lines = []
    thread = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    thread.start()
    return lines, thread


def test_the_entry_point_serves_until_stopped(capsys):
    """A worker started before its dispatcher says that it waits, then serves; both stop on
    SIGTERM with their line."""
    port, worker_port = free_ports(2)
    address = f"localhost:{port}"
    tool = [sys.executable, "-m", "albert_tf.data_service"]
    worker = subprocess.Popen(tool + [f"--dispatcher_address={address}",
                                      f"--worker_port={worker_port}"],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
    procs = [worker]
    try:
        lines, reader = _stderr_lines(worker)
        deadline = time.monotonic() + 60
        while not any("this worker waits for it" in line for line in lines):
            assert worker.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
        procs.append(subprocess.Popen(tool + [f"--dispatcher_port={port}",
                                              f"--worker_addresses=localhost:{worker_port}"],
                                      cwd=ROOT, stderr=subprocess.PIPE, text=True))
        # Asked before the dispatcher listens, the service's client retries its calls for
        # minutes in threads that outlive the question (and hold up other servers' stops).
        while True:
            try:
                check_dispatcher(address)
                break
            except ServiceUnavailable:
                assert procs[1].poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert wait_for_workers(address, 60) == 1
        numbers = shard_for_workers(tf.data.Dataset.range(10**6).repeat().map(lambda i: (i, 3 * i)))
        assert [int(v) for v in read_from_service(numbers, address, 0, 30).take(5)] == [
            0, 3, 6, 9, 12]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
    worker.wait(timeout=60)
    reader.join(timeout=60)
    errs = ["".join(lines), procs[1].communicate(timeout=60)[1]]
    for proc, err, role in zip(procs, errs, ("worker", "dispatcher on port")):
        assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
        assert f"tf.data service {role}" in err
        assert "\ndata_service: stopped on SIGTERM\n" in err and "Traceback" not in err, err
    assert (f"no tf.data service dispatcher answers at {address} (Connection refused); start "
            f"one with python -m albert_tf.data_service --dispatcher_port={port} "
            f"--worker_addresses=...; this worker waits for it") in errs[0]
    assert f"The dispatcher at {address} answers" in errs[0]
    assert "Failed to Worker heartbeat" not in errs[0]  # TensorFlow's retries, unexplained
    assert "its state lost if it restarts (--work_dir keeps it)" in errs[1]
    for err in errs:  # the servers' configuration protos, dumped by TensorFlow
        assert "goo.gle/debug" not in err and "\nport: " not in err, err

    for flags, message in [
            ({}, "give --dispatcher_port (a dispatcher) or --dispatcher_address with "
                 "--worker_port (a worker)"),
            (dict(dispatcher_port=5050), "--worker_addresses is required with --dispatcher_port"),
            (dict(dispatcher_port=70000, worker_addresses="a:1"), "--dispatcher_port=70000 is "
                                                                   "not a port"),
            (dict(dispatcher_port=5050, worker_addresses="a:1,b"), "--worker_addresses=b is not "
                                                                    "host:port"),
            (dict(dispatcher_address="localhost:5050"), "--worker_port is required"),
            (dict(dispatcher_port=5050, dispatcher_address="localhost:5050"), "give "
                                                                               "--dispatcher_port")]:
        assert_refused(run_tool(data_service, capsys, **flags), message)


def test_a_taken_port_or_a_worker_the_dispatcher_does_not_list_is_one_line(capsys):
    handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    with local_service(workers=1, started=0) as (address, _):
        port = int(address.rsplit(":", 1)[1])
        # (gRPC would start a second dispatcher on the port beside the first.)
        with pytest.raises(ValueError, match=f"^the tf.data service dispatcher cannot listen on "
                                             f"port {port} \\(Address already in use: another "
                                             f"process holds it\\)$"):
            start_dispatcher(port, ["localhost:1"])
        unlisted, = free_ports(1)
        assert_refused(run_tool(data_service, capsys, dispatcher_address=address,
                                worker_port=unlisted),
                       f"the dispatcher at {address} does not take this worker as "
                       f"localhost:{unlisted}: its --worker_addresses are [localhost:")
    # The tool's signal handlers end with it (it also runs inside other programs).
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers
