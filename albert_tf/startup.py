"""What every command-line tool does first, before TensorFlow loads: Ctrl-C while it starts
ends with its one line, and its stderr goes without TensorFlow's known harmless noise.

TensorFlow's CUDA build prints on a machine without a GPU, before any of its logging can be
configured, that it found no CUDA driver and an `E`-level "failed call to cuInit"; on CPUs its
oneDNN ops log an `E`-level line when they meet int64 tensors (the tokenizer's). Healthy, yet
they read like faults. `quiet_stderr()` (part of `start_tool()`)
passes the process's stderr through a small filter process that drops exactly the lines below
and forwards everything else, in order, also after a crash. ALBERT_TF_STDERR=all keeps them.
"""

import atexit
import os
import signal
import subprocess
import sys

NOISE = (
    "All log messages before absl::InitializeLog() is called",
    "Could not find cuda drivers on your machine",
    "failed call to cuInit",
    "oneDNN custom operations are on",
    "This TensorFlow binary is optimized to use available CPU instructions",
    "rebuild TensorFlow with the appropriate compiler flags",
    "oneDNN supports DT_INT64 only on platforms with AVX-512",
    "oneDNN supports DT_INT32 only on platforms with AVX-512",
    "Unable to register cuDNN factory", "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory", "computation placer already registered",
    # Apache Beam (create_pretraining_data --runner=...): its optional Google Cloud clients, and
    # the local SDK worker processes' start and end, logged before they read any option.
    "apitools not found, and bigquery client libraries",
    "No module named google.cloud.bigquery_storage_v1", "No semi_persistent_directory found",
    "INFO:apache_beam.runners.worker.", "INFO:__main__:Python sdk harness",
    "INFO:__main__:Logging handler created", "INFO:__main__:semi_persistent_directory",
    "INFO:__main__:Pipeline_options",
    # The tf.data service dispatcher's last words on its config (our own line says it).
    "It will not recover its state on restart.",
    # TensorFlow's checkpoint writer, at every save (our own line names the checkpoint).
    "Sharding callback duration:",
    # XLA's first compilation on the CPU (our own line says where XLA runs), and TensorFlow's
    # allocator note at its first large allocation.
    "initialized for platform Host (this does not guarantee that XLA will be used)",
    "StreamExecutor [0]: Host, Default Version", "Compiled cluster using XLA!",
    "disabling MLIR crash reproducer", "Memory patch applied: M_TRIM_THRESHOLD",
    # TensorFlow's persistent XLA cache (TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR),
    # at each program it loads: a text-format attempt on its binary entries, and XLA:CPU's
    # tuning hints (prefer-no-gather/scatter, not instruction sets) named as missing features.
    "Error parsing text-format tensorflow.XlaSerializedCacheEntry",
    "Target machine feature +prefer-no-",
    # The LiteRT converter, at each .tflite an export writes (our own line names the file): its
    # options, its reading of the SavedModel it converts, its op count, and the interpreter's
    # CPU delegate when the LiteRT report scores the file.
    "] Ignored output_format.", "] Ignored drop_control_dependency.",
    "] Reading SavedModel from: ", "] Reading meta graph with tags { serve }",
    "] Reading SavedModel debug info (if present) from: ",
    "MLIR V1 optimization pass is not enabled", "] Restoring SavedModel bundle.",
    "] Running initialization op on SavedModel bundle at path: ",
    "] SavedModel load for tags { serve }; Status: success: OK.",
    "] Estimated count of arithmetic ops: ", "] CharacterSet built (lower_case_nfd_strip_accents",
    "INFO:tensorflow:Assets written to: ",
    "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
)
# Lines that open a multi-line dump, each dropped with it up to its last line (or "": its blank
# line): the tf.data service servers' configuration protos (python -m albert_tf.data_service
# logs what they serve), and the LiteRT converter's list of the tensorflow-text ops a
# string-in .tflite holds (the exports register their kernels).
DUMPS = (("] Worker registered with dispatcher running at ", ""),
         ("] Started tf.data service dispatcher in ", ""),
         ("need TFLite custom op implementation(s):",
          "See instructions: https://www.tensorflow.org/lite/guide/ops_custom"))
_FILTER = """
import sys
split = sys.argv.index("--")
noise, rest = sys.argv[1:split], sys.argv[split + 1:]
dumps = [(start.encode(), end.encode()) for start, end in zip(rest[::2], rest[1::2])]
out = sys.stdout.buffer
dropping, until = 0, b""
for line in sys.stdin.buffer:
    if dropping:
        dropping = 0 if (until in line if until else not line.strip()) else dropping - 1
        continue
    for start, end in dumps:
        if start in line:
            dropping, until = 40, end
            break
    else:
        if not any(n.encode() in line for n in noise):
            out.write(line)
            out.flush()
"""


def start_tool():
    """Called first thing by each tool run as a program."""
    _rerun_if_a_checkout_is_taken_for_the_package()
    signal.signal(signal.SIGINT, _stopped_while_starting)
    quiet_stderr()


def _rerun_if_a_checkout_is_taken_for_the_package():
    """`python -m albert_tf.run_classifier` from the folder above a checkout named albert_tf:
    Python takes that folder (it has no __init__.py) for the package, ahead of the installed one,
    and runs the checkout's shim run_classifier.py, which then imports itself. The same command
    again with -P (the working directory off sys.path) finds the installed package."""
    package = sys.modules.get("albert_tf")
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if (package is None or getattr(package, "__file__", None) or sys.flags.safe_path
            or spec is None or not spec.name.startswith("albert_tf.")):
        return
    os.execv(sys.executable, [sys.orig_argv[0], "-P", *sys.orig_argv[1:]])


def tool_name(program=None):
    """The tool's name in its one-line messages: `program` (default sys.argv[0]) without
    directory and extension."""
    return os.path.splitext(os.path.basename(program or sys.argv[0]))[0]


def _stopped_while_starting(signum, frame):
    """Ctrl-C during the imports (seconds, mostly TensorFlow's): before cli.run hands SIGINT
    back to Python, no flag is parsed and nothing written, so the tool just ends."""
    os.write(2, f"{tool_name()}: stopped: {signal.Signals(signum).name} while starting; nothing "
                f"was written\n".encode())
    os._exit(128 + signum)


def ready():
    """Python's own SIGINT handling (KeyboardInterrupt, the trainer's handlers) from here on."""
    if signal.getsignal(signal.SIGINT) is _stopped_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def quiet_stderr():
    """Routes fd 2 through the filter for the rest of the process."""
    if os.environ.get("ALBERT_TF_STDERR") == "all" or "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    original = os.dup(2)
    read_end, write_end = os.pipe()
    # Its own session: Ctrl-C at a terminal signals the whole foreground process group, and the
    # filter must outlive the tool to pass on its last lines; it ends when the pipe closes.
    child = subprocess.Popen([sys.executable, "-c", _FILTER, *NOISE, "--",
                              *[part for dump in DUMPS for part in dump]],
                             stdin=read_end, stdout=original, close_fds=True,
                             start_new_session=True)
    os.close(read_end)
    os.dup2(write_end, 2)
    os.close(write_end)

    def restore():
        sys.stderr.flush()
        os.dup2(original, 2)  # the pipe's last writer closes: the filter drains it and exits
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    atexit.register(restore)
