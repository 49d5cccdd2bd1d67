"""Ctrl-C as a terminal sends it: SIGINT to the tool's whole process group (its stderr filter
and the builder's workers included). Status 130, the tool's one line, no traceback, no
half-written output."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from albert_tf import AlbertConfig
from albert_tf.data.vocab import train_sentencepiece
from conftest import TINY, write_pretraining_records
from tool_runner import run_tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("a mill by the river kept seven geese and one dog that barked at every cart going to "
         "town on market day while the miller sang").split()


def _start(args, cwd):
    """The tool as a terminal starts it: its own process group, stderr through its filter."""
    return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(condition, proc, timeout=240):
    deadline = time.time() + timeout
    while not condition():
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def _ctrl_c(proc):
    """SIGINT to the whole group; (status, stderr, whether any process of the group is left)."""
    os.killpg(proc.pid, signal.SIGINT)
    status = proc.wait(timeout=120)
    err = proc.stderr.read()
    time.sleep(0.5)
    try:
        os.killpg(proc.pid, 0)
        left = True
    except ProcessLookupError:
        left = False
    return status, err, left


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupts")
    rng = random.Random(0)
    files = []
    for i in range(6):
        path = root / f"part-{i}.txt"
        path.write_text("".join(" ".join(rng.choices(WORDS, k=rng.randint(6, 14))) + ".\n" +
                                ("\n" if j % 6 == 5 else "") for j in range(6000)),
                        encoding="utf-8")
        files.append(str(path))
    spm = train_sentencepiece(files[0], str(root / "spm"), 60, hard_vocab_limit=False)
    return root, files, spm


def test_ctrl_c_stops_the_builder_and_its_workers_leaving_no_shard(corpus):
    root, files, spm = corpus
    out = root / "records" / "train.tfrecord"
    proc = _start(["albert_tf.create_pretraining_data", f"--input_file={root}/part-*.txt",
                   f"--output_file={out}", f"--spm_model_file={spm}", "--num_workers=2",
                   "--dupe_factor=60", "--max_seq_length=64"], ROOT)
    _wait_for(lambda: any(p.name.endswith("-of-00006") for p in out.parent.glob("*"))
              if out.parent.exists() else False, proc)
    status, err, left = _ctrl_c(proc)
    assert status == 130, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("create_pretraining_data: stopped: SIGINT after "), last
    assert last.endswith(" of 6 shards; removed this build's output files, so that no "
                         "partial set is left. Rerun the same command to build them"), last
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert not left  # no worker goes on writing
    assert sorted(p.name for p in out.parent.iterdir()) == []


def test_a_killed_builder_s_workers_die_with_it(corpus):
    """SIGKILL to the main process alone (an OOM killer's, a scheduler's): its workers die
    with it, so none finishes and publishes a shard beside a rerun's."""
    root, files, spm = corpus
    out = root / "killed" / "train.tfrecord"
    proc = _start(["albert_tf.create_pretraining_data", f"--input_file={root}/part-*.txt",
                   f"--output_file={out}", f"--spm_model_file={spm}", "--num_workers=2",
                   "--dupe_factor=60", "--max_seq_length=64"], ROOT)
    _wait_for(lambda: out.parent.exists() and any(
        p.name.endswith(".incomplete") for p in out.parent.iterdir()), proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.time() + 20
    while True:
        try:
            os.killpg(proc.pid, 0)  # the group: the workers, and the stderr filter
        except ProcessLookupError:
            break
        assert time.time() < deadline, "a process of the killed build is still running"
        time.sleep(0.2)
    time.sleep(1)
    assert not [p.name for p in out.parent.iterdir() if p.name.endswith("-of-00006")]


def test_a_partial_shard_set_is_refused_by_run_pretraining(tmp_path, capsys):
    from albert_tf import run_pretraining
    config = tmp_path / "albert_config.json"
    AlbertConfig(**TINY).to_json_file(str(config))
    for i in (0, 1, 4):
        write_pretraining_records(tmp_path / f"train.tfrecord-{i:05d}-of-00006", 8)
    status = run_tool(run_pretraining, capsys, albert_config_file=config,
                      input_file=f"{tmp_path}/train.tfrecord-*", output_dir=tmp_path / "run",
                      max_seq_length=16, max_predictions_per_seq=4)
    code, last, _ = status
    assert code == 2
    assert last == (f"run_pretraining: error: --input_file={tmp_path}/train.tfrecord-* matches "
                    f"3 of the 6 shards of {tmp_path}/train.tfrecord-?????-of-00006 (missing "
                    f"00002, 00003, 00005): was the build stopped? Rebuild the set, or name the "
                    f"files to train on")
    assert not (tmp_path / "run").exists()
    for i in (2, 3, 5):  # that set whole, beside the 2 shards of a later build of the name
        write_pretraining_records(tmp_path / f"train.tfrecord-{i:05d}-of-00006", 8)
    for i in (0, 1):
        write_pretraining_records(tmp_path / f"train.tfrecord-{i:05d}-of-00002", 8)
    code, last, _ = run_tool(run_pretraining, capsys, albert_config_file=config,
                             input_file=f"{tmp_path}/train.tfrecord-*",
                             output_dir=tmp_path / "run", max_seq_length=16,
                             max_predictions_per_seq=4)
    assert code == 2 and last == (
        f"run_pretraining: error: --input_file={tmp_path}/train.tfrecord-* matches the shards of "
        f"2 builds of {tmp_path}/train.tfrecord (-of-00002, -of-00006): their text would be "
        f"trained on twice. Remove the older set (create_pretraining_data --overwrite replaces "
        f"it), or name the files to train on"), last


def test_ctrl_c_stops_pretraining_with_its_line_and_a_checkpoint(tmp_path):
    config = tmp_path / "albert_config.json"
    AlbertConfig(**TINY).to_json_file(str(config))
    records = write_pretraining_records(tmp_path / "train.tfrecord", 64)
    out = tmp_path / "run"
    proc = _start(["albert_tf.run_pretraining", f"--albert_config_file={config}",
                   f"--input_file={records}", f"--output_dir={out}", "--max_seq_length=16",
                   "--max_predictions_per_seq=4", "--train_batch_size=8",
                   "--num_train_steps=100000", "--num_warmup_steps=2",
                   "--save_checkpoints_steps=20", "--log_steps=20", "--mixed_precision=none",
                   "--jit_compile=false"], ROOT)
    _wait_for(lambda: (out / "model.ckpt-20.index").exists(), proc)
    status, err, left = _ctrl_c(proc)
    assert status == 130, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("run_pretraining: stopped at step ") and " on SIGINT; " in last, last
    step = int(last.split("stopped at step ")[1].split()[0])
    assert last.endswith(f"Rerun the same command to resume from {out}/model.ckpt-{step}"), last
    assert (out / f"model.ckpt-{step}.index").exists()
    assert "Traceback" not in err and not left
    assert not (out / "run.lock").exists()
    assert not [p for p in out.rglob("*") if "_temp" in p.name or ".tmp-" in p.name]


def _children(pid):
    """Process ids whose parent is `pid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.parametrize("tool", ["run_classifier", "export_hub"])
def test_ctrl_c_while_a_tool_starts_is_its_line(tool, tmp_path):
    """Ctrl-C during the seconds TensorFlow takes to import (start_tool's stderr filter is up,
    the tool's own code not yet): status 130, one line, no KeyboardInterrupt traceback."""
    proc = _start([f"albert_tf.{tool}", f"--output_dir={tmp_path}/out"], ROOT)
    _wait_for(lambda: _children(proc.pid), proc, timeout=60)
    status, err, left = _ctrl_c(proc)
    assert status == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == (f"{tool}: stopped: SIGINT while starting; nothing "
                                            f"was written"), err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and not left
    assert not (tmp_path / "out").exists()
