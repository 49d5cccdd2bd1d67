"""The watch on a multi-worker start, a process of its own: TensorFlow builds
MultiWorkerMirroredStrategy holding the interpreter (no Python thread runs, no signal handler:
SIGTERM went unheard) and waits without end for a worker TF_CONFIG lists that was never started.

    python -m albert_tf.training.worker_wait PARENT_PID WAIT_S LOG_EVERY_S WORKERS

says on stderr every LOG_EVERY_S whom the parent waits for, and after WAIT_S kills it (SIGKILL:
the only signal it hears) with one line; the parent ends the watch by closing its stdin."""

import os
import select
import signal
import sys
import time


def main(argv):
    parent, wait, every, others = int(argv[1]), float(argv[2]), float(argv[3]), argv[4]
    start = time.monotonic()
    while not select.select([sys.stdin], [], [], every)[0]:
        waited = time.monotonic() - start
        if waited >= wait:
            sys.stderr.write(f"error: TF_CONFIG's other workers did not all connect in "
                             f"{waited:.0f} s ({others}): start each with its own task index, "
                             f"then rerun; stopping this worker\n")
            os.kill(parent, signal.SIGKILL)
            return
        sys.stderr.write(f"Waiting {waited:.0f} s for TF_CONFIG's other workers to connect "
                         f"({others}): every one must be started, each with its own task "
                         f"index; this worker stops after {wait:.0f} s\n")


if __name__ == "__main__":
    main(sys.argv)
