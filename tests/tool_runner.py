"""Running the tools' command lines in the test process, as `python -m albert_tf.<tool>` runs
them (`module.run(argv)`), each with only its own flags (every tool's run() defines them), and
checking what they refuse."""

import contextlib
import hashlib
import importlib
import logging
import os

from absl import flags


def digests(*paths):
    """{file: sha256} of every file under `paths` (files or directories)."""
    out = {}
    for path in map(str, paths):
        files = [path] if os.path.isfile(path) else [
            os.path.join(d, f) for d, _, names in os.walk(path) for f in names]
        for name in files:
            with open(name, "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


# FlagValues' registries: the flags by name, and the modules that define them or hold them key.
_REGISTRIES = ("__flags", "__flags_by_module", "__flags_by_module_id", "__key_flags_by_module")


@contextlib.contextmanager
def own_flags():
    """absl's FLAGS holding only absl's own flags while a tool defines and parses its flags, as
    in a new process, and as before once it is done. Every registry goes back: the modules' lists
    kept each run's new flags, and a tool's pass over them (cli._list_in_help) grew from 0.05 s
    to over 2 s of CPU a run in a test process that had run hundreds."""
    fv = flags.FLAGS
    saved = {name: fv.__dict__[name] for name in _REGISTRIES}
    core = {id(f) for module, fs in saved["__flags_by_module"].items()
            if module.startswith("absl.") for f in fs}
    fv.__dict__["__flags"] = {name: f for name, f in saved["__flags"].items() if id(f) in core}
    for name in _REGISTRIES[1:]:
        fv.__dict__[name] = {key: [f for f in fs if id(f) in core]
                             for key, fs in saved[name].items()
                             if any(id(f) in core for f in fs)}
    try:
        yield
    finally:
        fv.__dict__.update(saved)


def tool_flags(module):
    """The names of the flags `python -m albert_tf.<module>` accepts (absl's own included)."""
    with own_flags():
        module.define_flags()
        return set(flags.FLAGS)


def _exit_status(module, args, flag_values):
    """Runs `python -m albert_tf.<module> args` in this process; returns its exit status."""
    name = module.__name__.rsplit(".", 1)[1]
    argv = [name, *args] + [f"--{k}={v}" for k, v in flag_values.items()]
    flags.FLAGS.unparse_flags()
    with own_flags():
        try:
            module.run(argv)
            return 0
        except SystemExit as e:
            return e.code or 0
        finally:
            flags.FLAGS.unparse_flags()


def run_tool(module, capsys, *args, **flag_values):
    """(exit status, stderr's last line, stderr) of `python -m albert_tf.<module> args`;
    without `capsys`, only the status."""
    if capsys is None:
        return _exit_status(module, args, flag_values)
    status, _, err = run_tool_captured(module, capsys, *args, **flag_values)
    lines = err.strip().splitlines()
    return status, lines[-1] if lines else "", err


def run_tool_captured(module, capsys, *args, **flag_values):
    """(exit status, stdout, stderr) of `python -m albert_tf.<module> args`, run in-process."""
    capsys.readouterr()
    status = _exit_status(module, args, flag_values)
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return status, out, err


def run_tool_logged(module, *args, **flag_values):
    """(exit status, its log lines at INFO as one text) of `python -m albert_tf.<module> args`
    run in-process; `module` may be its name."""
    if isinstance(module, str):
        module = importlib.import_module(f"albert_tf.{module}")
    lines, handler = [], logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger("absl").addHandler(handler)
    try:
        status = run_tool(module, None, *args, verbosity=0, **flag_values)
    finally:
        logging.getLogger("absl").removeHandler(handler)
    return status, "\n".join(lines)


def assert_refused(result, message, status=2):
    code, last, err = result
    assert code == status, err[-2000:]
    name = last.split(":", 1)[0]
    assert last.startswith(f"{name}: error: ") and message in last, last
