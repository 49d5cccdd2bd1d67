"""Outputs that never replace what a tool did not write.

Every tool checks its output paths before it writes anything: an output that is (or holds) one
of its inputs, an existing file where a directory goes, or a directory holding other files (a
run or release directory) stops it with a message naming the flag. An earlier output of the
same kind is replaced only with --overwrite. Local paths are checked without TensorFlow (the
data builder does not load it); gs:// and other URLs through tf.io.gfile.
"""

import errno
import fnmatch
import os
import shutil
import types


# The local directories this process's make_local_dir created (the outermost of each path):
# cli removes those a failed run leaves empty.
CREATED = []

# The errors of a write that ran out of space (a full disk, a user's quota).
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(RuntimeError):
    """A write ran out of space; the message says what, where, and what is intact."""
    exit_status = 1


class OutputRefused(FileExistsError):
    """An output path that would replace an input, or files that this kind of output is not."""


# What an earlier SavedModel export (TF-Hub, serving, with its TFLite file) holds.
SAVED_MODEL_ENTRIES = ("saved_model.pb", "variables", "assets", "fingerprint.pb",
                       "keras_metadata.pb", "*.tflite", "labels.txt", "labels.json",
                       "tflite_report.json")
# What convert_checkpoint writes in any format (ours, TF1, Hugging Face, a KerasHub preset).
CONVERTED_ENTRIES = ("checkpoint", "albert_config.json", "model.ckpt.index", "model.ckpt.data-*",
                     "model.ckpt-best.index", "model.ckpt-best.data-*", "config.json",
                     "model.safetensors", "*.model", "vocab*.txt", "tokenizer_config.json",
                     "special_tokens_map.json", "metadata.json", "model.weights.h5",
                     "tokenizer.json", "preprocessor.json", "task.json", "task.weights.h5",
                     "assets", "labels.json", "labels.txt", "conversion.json")
# What a conversion writes last, so that only a directory it wrote is ever replaced (a model
# directory that transformers wrote holds the same file names).
CONVERSION_MARKER = "conversion.json"


def _normalised(path):
    path = os.fspath(path)
    if "://" in path:
        return path.rstrip("/")
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def _encloses(outer, inner):
    sep = "/" if "://" in outer else os.sep
    return inner == outer or inner.startswith(outer.rstrip(sep) + sep)


def check_not_input(path, flag, inputs):
    """Refuses an output that is, or holds, one of the tool's inputs ({flag: path(s)})."""
    out = _normalised(path)
    named = _named(flag, path)
    for in_flag, in_paths in inputs.items():
        if isinstance(in_paths, (str, os.PathLike)):
            in_paths = [in_paths]
        elif not isinstance(in_paths, (list, tuple)):
            continue  # None, or an object given instead of a path
        for in_path in in_paths:
            if in_path and _encloses(out, _normalised(in_path)):
                same = out == _normalised(in_path)
                raise OutputRefused(
                    f"{named} {'is' if same else 'holds'} the input --{in_flag}={in_path}; "
                    f"writing there would replace it. Give {_flag(flag)}a new path")


def _named(flag, path):
    return f"--{flag}={path}" if flag else os.fspath(path)


def _flag(flag):
    return f"--{flag} " if flag else "it "


def _entries_match(names, patterns):
    return all(any(fnmatch.fnmatch(n, p) for p in patterns) for n in names)


def check_output_dir(path, flag, *, what, patterns, overwrite=False, inputs=None,
                     marker=None, overwrite_flag="overwrite"):
    """Stops before writing a directory output when it would replace what the tool did not
    write: an input, an existing file, a directory with other files (a run or release
    directory). An earlier output of the same kind (every entry matching `patterns`, and the
    `marker` entry among them) is replaced only with `overwrite` (the flag `overwrite_flag`)."""
    path = os.fspath(path)
    named = _named(flag, path)
    check_not_input(path, flag, inputs or {})
    if not _fs(path).exists(path):
        return
    if not _fs(path).isdir(path):
        raise OutputRefused(f"{named} is an existing file; give {_flag(flag)}a directory that "
                            f"does not exist yet")
    names = sorted(n.rstrip("/") for n in _fs(path).listdir(path))
    if not names:
        return
    if _entries_match(names, patterns) and (marker is None or marker in names):
        if overwrite:
            return
        raise OutputRefused(f"{named} holds {what} written earlier; pass --{overwrite_flag} to "
                            f"replace it, or give {_flag(flag)}a new directory")
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    raise OutputRefused(f"{named} already holds files that are not {what} ({shown}); give "
                        f"{_flag(flag)}a new or empty directory")


def check_output_files(paths, flag, *, what, overwrite=False, inputs=None, is_kind=None,
                       remote_fs=None):
    """The same for file outputs: an existing file is replaced only with `overwrite`, and only
    when `is_kind(path)` says it is an earlier output of this kind. `remote_fs` (`exists`,
    `isdir`) looks at URLs instead of tf.io.gfile (Beam's filesystems)."""
    for path in paths:
        path = os.fspath(path)
        check_not_input(path, flag, inputs or {})
        fs = remote_fs if remote_fs is not None and "://" in path else _fs(path)
        if not fs.exists(path):
            continue
        if fs.isdir(path):
            raise OutputRefused(f"--{flag}: {path} is a directory; give a file path")
        if is_kind is not None and not is_kind(path):
            raise OutputRefused(f"--{flag}: {path} exists and is not {what}; give --{flag} a "
                                f"new path")
        if not overwrite:
            raise OutputRefused(f"--{flag}: {path} exists; pass --overwrite to replace it, or "
                                f"give --{flag} a new path")


_LOCAL = types.SimpleNamespace(exists=os.path.exists, isdir=os.path.isdir, listdir=os.listdir)


def _fs(path):
    if "://" not in os.fspath(path):
        return _LOCAL
    import tensorflow as tf  # only for URLs: local checks stay free of TensorFlow's import
    return tf.io.gfile


def outermost_missing(path):
    """The outermost directory of a local `path` that does not exist (what creating `path`
    creates), or None."""
    missing, parent = None, os.path.abspath(path)
    while not os.path.exists(parent):
        missing, parent = parent, os.path.dirname(parent)
    return missing


def make_local_dir(path):
    """Creates a local directory (and its parents), recording in CREATED the outermost one it
    made, so that a failed run leaves no empty directory behind."""
    new = outermost_missing(path)
    os.makedirs(path, exist_ok=True)
    if new:
        CREATED.append(new)


def make_parent_dir(path):
    """make_local_dir for the directory a file `path` goes into."""
    make_local_dir(os.path.dirname(os.path.abspath(path)))


def remove_created_if_empty():
    """Removes the directories in CREATED that hold no file (empty folders at
    most): what a failed run leaves behind."""
    while CREATED:
        top = CREATED.pop()
        if os.path.isdir(top) and not any(files for _, _, files in os.walk(top)):
            shutil.rmtree(top, ignore_errors=True)
