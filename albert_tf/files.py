"""Writing files safely, saying so plainly when the disk is full, and fingerprinting them."""

import contextlib
import errno
import hashlib
import json
import os

import tensorflow as tf

from albert_tf.outputs import DISK_FULL_ERRNOS, DiskFull, make_local_dir


_DISK_FULL_TEXT = ("No space left on device", "Disk quota exceeded")


def disk_full(error):
    """Whether `error` (an OSError, or TensorFlow's error from a file op) is a full disk."""
    if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS:
        return True
    message = getattr(error, "message", None) if isinstance(error, tf.errors.OpError) else None
    return bool(message) and any(t in message for t in _DISK_FULL_TEXT)


def remove_matching(*patterns):
    """Removes the files and directories the glob patterns match (temporary files)."""
    for pattern in patterns:
        for path in tf.io.gfile.glob(pattern):
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)


@contextlib.contextmanager
def writing(what, path, cleanup=(), intact=""):
    """Running out of space inside the block becomes one DiskFull line naming `what` and
    `path` (and `intact`: what is still whole), after the `cleanup` globs are removed."""
    try:
        yield
    except Exception as e:
        if not disk_full(e):
            raise
        remove_matching(*cleanup)
        raise DiskFull(f"no space left on the device while writing {what} {path}"
                       f"{'; ' + intact if intact else ''}. Free space, then rerun the same "
                       f"command") from e


def absolute_path(path):
    """A local path made absolute (what run.json records, so that a rerun from another directory
    finds it); a URL (gs://...), None or "" as it is."""
    return os.path.abspath(path) if isinstance(path, str) and path and "://" not in path else path


def make_output_dir(path, flag="output_dir"):
    """Creates a tool's output directory (and its parents), with one-line errors for a path
    that is a file or cannot be written."""
    path = os.fspath(path)
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise NotADirectoryError(f"--{flag}={path} is a file, not a directory")
    try:
        if "://" in path:
            tf.io.gfile.makedirs(path)
        else:
            make_local_dir(path)
    except (tf.errors.FailedPreconditionError, NotADirectoryError, FileExistsError):
        raise NotADirectoryError(f"--{flag}={path} cannot be created: a file is in the way "
                                 f"on its path") from None
    except (tf.errors.PermissionDeniedError, OSError) as e:
        if isinstance(e, OSError) and e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise PermissionError(f"--{flag}={path} cannot be created: permission denied "
                              f"(a read-only location?)") from None
    if "://" not in path and not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"--{flag}={path} cannot be written: permission denied")
    return path


def atomic_write_text(path, text):
    """Writes `text` to `path` through a temporary name, so readers never see a half file."""
    _atomic_write(path, text, "w")


def atomic_write_bytes(path, data):
    _atomic_write(path, data, "wb")


def _atomic_write(path, data, mode):
    tmp = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, mode) as f:
        f.write(data)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_json(path, value):
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


_DIGESTS = {}


def file_digest(path, chunk=1 << 22):
    """sha256 of a file's bytes (any tf.io.gfile path), remembered while its size and
    modification time stay the same (feature caches ask for it once per split and run)."""
    stat = tf.io.gfile.stat(path)
    key = (os.path.abspath(path) if "://" not in path else path, stat.length, stat.mtime_nsec)
    if key not in _DIGESTS:
        _DIGESTS[key] = _sha256(path, chunk)
    return _DIGESTS[key]


def _sha256(path, chunk):
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()

