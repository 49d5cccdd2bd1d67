"""Writing files safely and fingerprinting them."""

import hashlib
import json
import os

import tensorflow as tf


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

