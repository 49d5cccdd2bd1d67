"""A full disk is one line: what was being written and where, what is intact, status 1, and no
temporary file left behind. The disk is a small tmpfs where this machine lets the tests mount
one (CI's and the project's machines do); elsewhere the write failure is injected where the
file is written."""

import errno
import os
import random
import subprocess

import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, create_pretraining_data, run_pretraining
from albert_tf.data import records
from albert_tf.data.vocab import train_sentencepiece
from conftest import TINY, write_pretraining_records
from tool_runner import run_tool

WORDS = "the miller kept seven geese and a dog that barked at every cart on the road".split()
TEMPORARY = ("_temp", ".tmp", ".incomplete")


class SmallDisk:
    """A 4 MB tmpfs at `path` (or a plain directory when mounting is not allowed)."""

    def __init__(self, path):
        self.path = path
        path.mkdir()
        try:
            self.real = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs",
                                        str(path)], capture_output=True).returncode == 0
        except OSError:  # no mount command
            self.real = False
        self._filler = path / "filler"

    def fill(self, leave=0):
        """Takes all the space but `leave` bytes."""
        if not self.real:
            return
        with open(self._filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError as e:
                assert e.errno == errno.ENOSPC
        if leave:
            os.truncate(self._filler, os.path.getsize(self._filler) - leave)

    def free(self):
        if self._filler.exists():
            self._filler.unlink()

    def close(self):
        if self.real:
            subprocess.run(["umount", "--lazy", str(self.path)], check=True)


@pytest.fixture
def disk(tmp_path):
    d = SmallDisk(tmp_path / "disk")
    yield d
    d.close()


def _temporary_files(directory):
    return [p for p in directory.rglob("*") if any(t in p.name for t in TEMPORARY)]


@pytest.mark.slow  # a pretraining run and its rerun: the full suite, not the fast tier
def test_a_checkpoint_that_runs_out_of_space_is_one_line_and_the_rerun_resumes(
        disk, tmp_path, capsys, monkeypatch):
    config = tmp_path / "albert_config.json"
    AlbertConfig(**TINY).to_json_file(str(config))
    data = write_pretraining_records(tmp_path / "train.tfrecord", 32)
    out = disk.path / "run"
    flags = dict(albert_config_file=config, input_file=data, output_dir=out, max_seq_length=16,
                 max_predictions_per_seq=4, train_batch_size=4, num_warmup_steps=1,
                 save_checkpoints_steps=2, log_steps=2, mixed_precision="none",
                 jit_compile="false")
    assert run_tool(run_pretraining, None, num_train_steps=2, **flags) == 0
    disk.fill(leave=60_000)  # room for the lock and the summaries, not a 210 kB checkpoint
    if not disk.real:
        def no_space(self, *args, **kwargs):
            tf.io.gfile.makedirs(os.path.join(self.directory, "model.ckpt-4_temp"))
            raise tf.errors.ResourceExhaustedError(None, None, "model.ckpt-4_temp/part-00000-"
                                                   "of-00001.data-00000-of-00001.tempstate1; "
                                                   "No space left on device")
        monkeypatch.setattr(tf.train.CheckpointManager, "save", no_space)
    code, last, err = run_tool(run_pretraining, capsys, num_train_steps=4, **flags)
    assert code == 1, err[-3000:]
    assert last == (f"run_pretraining: error: no space left on the device while writing "
                    f"checkpoint {out}/model.ckpt-4; the last good checkpoint {out}/model.ckpt-2 "
                    f"is intact and the rerun resumes from it. Free space, then rerun the same "
                    f"command")
    assert not _temporary_files(out) and not list(out.glob("model.ckpt-4*"))
    assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-2")
    assert not (out / "run.lock").exists()
    disk.free()
    monkeypatch.undo()
    assert run_tool(run_pretraining, None, num_train_steps=4, **flags) == 0
    assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-4")


def test_records_that_run_out_of_space_are_one_line_and_leave_no_partial_set(
        disk, tmp_path, capsys, monkeypatch):
    rng = random.Random(0)
    for i in range(2):
        (tmp_path / f"part-{i}.txt").write_text("".join(
            " ".join(rng.choices(WORDS, k=10)) + ".\n" + ("\n" if j % 5 == 4 else "")
            for j in range(3000)), encoding="utf-8")
    spm = train_sentencepiece(str(tmp_path / "part-0.txt"), str(tmp_path / "spm"), 40,
                              hard_vocab_limit=False)
    disk.fill(leave=300_000)
    if not disk.real:
        write_batch = records.AtomicTFRecordWriter.write_batch

        def no_space(self, batch):
            if self.path.endswith("00001-of-00002"):
                raise OSError(errno.ENOSPC, "No space left on device", self.tmp_path)
            return write_batch(self, batch)
        monkeypatch.setattr(records.AtomicTFRecordWriter, "write_batch", no_space)
    out = disk.path / "records" / "train.tfrecord"
    code, last, err = run_tool(create_pretraining_data, capsys, input_file=f"{tmp_path}/part-*",
                               output_file=out, spm_model_file=spm, dupe_factor=10,
                               max_seq_length=64)
    assert code == 1, err[-3000:]
    assert last.startswith(f"create_pretraining_data: error: no space left on the device while "
                           f"writing {out}-0000"), last
    assert last.endswith("; removed this build's output files, so that no partial set is "
                         "left. Free space, then rerun the same command"), last
    assert not out.parent.exists()  # no shard left, nor the directory the run made for them


def test_an_export_that_runs_out_of_space_leaves_no_temporary_directory(disk, monkeypatch):
    from albert_tf.files import DiskFull
    from albert_tf.serving.saved_model import save_atomically
    root = tf.Module()
    root.v = tf.Variable(tf.zeros([300_000]))  # 1.2 MB of variables
    export = disk.path / "export"
    disk.fill(leave=200_000)
    if not disk.real:
        def no_space(obj, path, signatures=None):
            tf.io.gfile.makedirs(path)
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")
        monkeypatch.setattr(tf.saved_model, "save", no_space)
    with pytest.raises(DiskFull, match=f"while writing the SavedModel export {export}. Free"):
        save_atomically(root, export, signatures=None)
    assert sorted(p.name for p in disk.path.iterdir() if p.name != "filler") == []
