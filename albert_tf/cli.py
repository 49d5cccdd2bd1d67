"""How every command-line tool runs, fails and stops.

A mistake the tools anticipate (a wrong flag, path, config or input file) ends with one line on
stderr, `<tool>: error: <what and which flag or file>`, and exit status 2 (several bad rows of
input files: that line counts them, and a line for each follows); a failure during the work that
the user can act on (a corrupt record, a non-finite loss, a lost worker) with the same line and
status 1; a run stopped by SIGINT or SIGTERM after saving with `<tool>: stopped
…` and 128 + the signal's number (130, 143). No traceback, unless ALBERT_TF_TRACEBACK=1 is set
or --verbosity is 1 or more. Anything else is a bug and keeps its traceback.
"""

import functools
import os
import re
import sys
import traceback

from absl import app, flags

from albert_tf.outputs import CREATED, DISK_FULL_ERRNOS, remove_created_if_empty
from albert_tf.startup import ready, tool_name

USAGE = 2
# Other toolkits' flags for what ours are called otherwise (absl suggests by spelling alone).
THEIR_FLAGS = {"use_xla": "--jit_compile", "enable_xla": "--jit_compile", "xla": "--jit_compile",
               "num_gpus": "--strategy=mirrored (every local GPU)",
               "fp16": "--mixed_precision=float16", "bf16": "--mixed_precision=bfloat16",
               "distribution_strategy": "--strategy", "strategy_type": "--strategy",
               "dtype": "--mixed_precision"}
# What the library raises for a user's mistake; its message names the flag or the file.
MISTAKES = (app.UsageError, flags.Error, ValueError, FileNotFoundError, FileExistsError,
            IsADirectoryError, NotADirectoryError, PermissionError)


def run(main, required=(), argv=None):
    """absl's app.run with the error handling above, on `argv` (default sys.argv), the tool
    named by argv[0]. `main(argv)`'s return value is ignored (a fine-tuning main returns its
    results to Python callers)."""
    argv = sys.argv if argv is None else argv
    name = tool_name(argv[0])
    function = main.func if isinstance(main, functools.partial) else main
    tool, entry = sys.modules.get(function.__module__), sys.modules.get("__main__")
    if tool is not None and entry is not None and entry is not tool and tool.__doc__:
        entry.__doc__ = tool.__doc__  # absl's help shows __main__'s (a checkout's shim's)
    if required:
        flags.mark_flags_as_required(list(required))
    _list_in_help(argv[0])
    ready()
    app.run(guarded(main, name), argv=argv,
            flags_parser=functools.partial(_parse_flags, name))


def _list_in_help(main_module):
    """--help and --helpshort list the flags the package defines (absl lists only those the
    main module defines itself; most tools define theirs through albert_tf.tasks.flags)."""
    key = flags.FLAGS.get_key_flags_for_module(main_module)
    for module, defined in flags.FLAGS.flags_by_module_dict().items():
        if module.startswith("albert_tf") and module != main_module:
            for flag in defined:
                if flag not in key:
                    flags.FLAGS.register_key_flag_for_module(main_module, flag)
                    key.append(flag)


def guarded(main, name):
    """`main` with every anticipated exception turned into its line and exit status."""
    def run_main(argv):
        if len(argv) > 1:
            _exit(name, f"error: unexpected arguments: {' '.join(argv[1:])}", USAGE)
        CREATED.clear()  # this run's directories only (tools run in one process from Python)
        try:
            main(argv)
        except BaseException as e:  # noqa: B036 (KeyboardInterrupt and SystemExit too)
            remove_created_if_empty()
            status = exit_status(e)
            if status is None:
                raise
            if show_traceback():
                traceback.print_exc()
            if isinstance(e, KeyboardInterrupt):
                _exit(name, "stopped: interrupted", status)
            _exit(name, one_line(e) if status >= 128 else f"error: {one_line(e)}", status)
    return run_main


def exit_status(error):
    """The exit status of an anticipated exception; None for a bug (or a SystemExit)."""
    if isinstance(error, SystemExit):
        return None
    if isinstance(error, KeyboardInterrupt):
        return 130
    status = getattr(error, "exit_status", None)  # the trainer's errors and Interrupted
    if status is not None:
        return status
    if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS:
        return 1
    return USAGE if isinstance(error, MISTAKES) else None


def show_traceback():
    if os.environ.get("ALBERT_TF_TRACEBACK", "") not in ("", "0"):
        return True
    return flags.FLAGS.is_parsed() and flags.FLAGS["verbosity"].value >= 1


def one_line(error):
    """The error's message on one line; one that lists several problems (its `several_lines`
    is true) keeps one line for each."""
    message = str(error) or type(error).__name__
    if isinstance(error, FileNotFoundError) and error.filename and error.filename not in message:
        message += f": {error.filename}"
    if getattr(error, "several_lines", False):
        return "\n".join(" ".join(line.split()) for line in message.splitlines())
    return " ".join(message.split())


def usage_error(error):
    """An app.UsageError saying what `error` says, in as many lines."""
    usage = app.UsageError(str(error))
    usage.several_lines = getattr(error, "several_lines", False)
    return usage


HELP_FLAGS = {"help", "?", "helpshort", "helpfull", "helpxml"}


def _parse_flags(name, argv):
    try:
        return flags.FLAGS(argv)
    except SystemExit:
        asked = {a.lstrip("-").split("=")[0] for a in argv[1:] if a.startswith("-")}
        if asked & HELP_FLAGS:  # absl exits 1 after printing the help that was asked for
            try:
                sys.stdout.flush()
            except BrokenPipeError:  # `--helpshort | head`: the reader has what it wanted
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        raise
    except BrokenPipeError:  # `--help | head` closed the pipe while absl printed the help
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except flags.Error as e:
        missing = list(dict.fromkeys(  # (a tool run twice in one process lists them twice)
            re.findall(r"Flag --(\w+) must have a value other than None", str(e))))
        if missing:
            message = ", ".join(f"--{m}" for m in missing) + (
                " is required" if len(missing) == 1 else " are required")
        else:
            message = _plain_value_error(one_line(e))
        unknown = e.flagname if isinstance(e, flags.UnrecognizedFlagError) else None
        if unknown in THEIR_FLAGS:
            message = f"Unknown command line flag '{unknown}': here it is {THEIR_FLAGS[unknown]}"
        if missing or isinstance(e, flags.UnrecognizedFlagError):
            message += " (--helpshort lists the flags)"
        _exit(name, f"error: {message}", USAGE)


def _plain_value_error(message):
    """absl's words for a bad boolean or number, as a sentence."""
    message = re.sub(r"\('Non-boolean argument to boolean flag', '(.*)'\)$",
                     r"'\1' is not a boolean (true, false, 1 or 0)", message)
    message = re.sub(r"could not convert string to float: (.*)$", r"\1 is not a number", message)
    return re.sub(r"invalid literal for int\(\) with base 10: (.*)$", r"\1 is not a whole number",
                  message)


def _exit(name, line, status):
    sys.stdout.flush()
    print(f"{name}: {line}", file=sys.stderr, flush=True)
    sys.exit(status)
