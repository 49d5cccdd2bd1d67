"""One run per output directory.

A training run (run_pretraining, the fine-tuning scripts) holds `<output_dir>/run.lock` from
before it writes anything there until it ends; a second run into the same directory stops
with one line naming the holder (tool, host, process id, since when). docs/safety.md says how a
dead holder is told from a live one:

- Local and network (NFS) directories: an operating-system lock (`flock`) on the file, which
  the kernel (or the NFS server's lock manager) drops when the holding process ends, however
  it ends. The file's content only names the holder; a lock file left by a killed run is
  simply taken over.
- gs://, s3://, hdfs:// and other TensorFlow file systems have no locks: the holder rewrites
  the file every `HEARTBEAT_S` seconds and checks before each checkpoint that it is still its
  own. A file not rewritten for `STALE_S` seconds (by its writer's clock) belongs to a run that
  died (a machine lost) and is taken over with a warning. Two runs started together both write
  and read back after `SETTLE_S` seconds: the one whose token is there runs.

In a multi-worker job only the chief takes it.
"""

import datetime
import errno
import fcntl
import json
import os
import socket
import threading
import time
import uuid

import tensorflow as tf
from absl import logging

from albert_tf.files import atomic_write_text, make_output_dir, writing

LOCK_NAME = "run.lock"
HEARTBEAT_S, STALE_S, SETTLE_S = 60.0, 600.0, 3.0


class RunLocked(FileExistsError):
    """Another live run holds the output directory."""


class RunLockLost(RuntimeError):
    """Another run took the output directory over while this one ran (object stores only)."""
    exit_status = 1


def _holder(tool):
    now = time.time()
    return {"tool": tool, "host": socket.gethostname(), "pid": os.getpid(), "since": now,
            "heartbeat": now, "token": uuid.uuid4().hex}


def _when(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def describe(holder):
    """'run_pretraining on host h (process 12, since 2026-11-24 21:03:05 UTC)'."""
    if not holder:
        return "another run (its lock file is being written)"
    since = holder.get("since")
    return (f"{holder.get('tool', 'another run')} on host {holder.get('host', '?')} "
            f"(process {holder.get('pid', '?')}"
            f"{', since ' + _when(since) if since else ''})")


def _parse(text):
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _LocalLock:
    """flock on the file; the kernel releases it when the process ends."""

    def __init__(self, path, tool):
        self.path, self.holder, self.fd = path, _holder(tool), None

    def acquire(self):
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                previous = _parse(_read_fd(fd))
                os.close(fd)
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise RunLocked(_refusal(self.path, previous)) from None
            # The file may have been removed by a holder that ended between our open and our
            # lock: then the lock is on a name no one else sees; take the new file instead.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _parse(_read_fd(fd))
        if previous:
            logging.warning("%s was left by %s, which is no longer running; taking it over",
                            self.path, describe(previous))
        self.fd = fd
        try:
            with writing("the run lock", self.path):
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(self.holder) + "\n").encode(), 0)
                os.fsync(fd)
        except BaseException:
            self.release()
            raise

    def verify(self):
        pass  # the kernel keeps it ours

    def release(self):
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self.fd)  # closing drops the lock
        self.fd = None


def _read_fd(fd):
    return os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")


class _RemoteLock:
    """A heartbeat file with a token, for file systems without locks."""

    def __init__(self, path, tool, heartbeat_s=HEARTBEAT_S, stale_s=STALE_S,
                 settle_s=SETTLE_S):
        self.path, self.holder = path, _holder(tool)
        self.heartbeat_s, self.stale_s, self.settle_s = heartbeat_s, stale_s, settle_s
        self._stop = threading.Event()
        self._thread = None
        self.lost = None

    def _read(self):
        try:
            with tf.io.gfile.GFile(self.path, "r") as f:
                return _parse(f.read())
        except tf.errors.NotFoundError:
            return None

    def _write(self):
        self.holder["heartbeat"] = time.time()
        atomic_write_text(self.path, json.dumps(self.holder) + "\n")

    def _live(self, holder):
        age = time.time() - float(holder.get("heartbeat", 0))
        return age < self.stale_s, age

    def acquire(self):
        previous = self._read()
        if previous:
            live, age = self._live(previous)
            if live:
                raise RunLocked(_refusal(self.path, previous, age, self.stale_s))
            logging.warning("%s was last renewed %.0f s ago by %s: that run is taken for dead "
                            "(no renewal for %.0f s); taking it over", self.path, age,
                            describe(previous), self.stale_s)
        with writing("the run lock", self.path):
            self._write()
        time.sleep(self.settle_s)
        current = self._read()
        if not current or current.get("token") != self.holder["token"]:
            raise RunLocked(_refusal(self.path, current, 0.0, self.stale_s))
        self._thread = threading.Thread(target=self._renew, daemon=True, name="run-lock")
        self._thread.start()

    def _renew(self):
        while not self._stop.wait(self.heartbeat_s):
            try:
                current = self._read()
                if not current or current.get("token") != self.holder["token"]:
                    self.lost = current
                    return
                self._write()
            except (tf.errors.OpError, OSError) as e:  # a storage hiccup: try again next time
                logging.warning("could not renew %s: %s", self.path, e)

    def verify(self):
        current = self._read() if self.lost is None else self.lost
        if current is None or current.get("token") != self.holder["token"]:
            raise RunLockLost(f"{self.path} now names {describe(current)}: another run took "
                              f"--output_dir over while this one ran; stopping without saving "
                              f"over its checkpoints")

    def release(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        current = self._read()
        if current and current.get("token") == self.holder["token"]:
            tf.io.gfile.remove(self.path)


def _refusal(path, holder, age=None, stale_s=None):
    directory = os.path.dirname(path)
    message = (f"--output_dir={directory} is in use by {describe(holder)}; one run per output "
               f"directory: wait for it to end, or give another --output_dir")
    if age is not None:
        message += (f" (its lock {path} was renewed {age:.0f} s ago; one not renewed for "
                    f"{stale_s:.0f} s is taken over)")
    return message


class RunLock:
    """`with RunLock(output_dir, tool):` holds the directory for the block (a no-op when
    `chief` is False)."""

    def __init__(self, output_dir, tool, chief=True, **remote_settings):
        output_dir = os.fspath(output_dir)
        path = os.path.join(output_dir, LOCK_NAME)
        self.output_dir, self.chief = output_dir, chief
        self._lock = (_RemoteLock(path, tool, **remote_settings) if "://" in output_dir
                      else _LocalLock(path, tool))

    def __enter__(self):
        if self.chief:
            make_output_dir(self.output_dir)
            self._lock.acquire()
        return self

    def verify(self):
        if self.chief:
            self._lock.verify()

    def __exit__(self, *exc):
        if self.chief:
            self._lock.release()
        return False
