"""How a training run stops other than by finishing: the errors the command-line tools turn into
one line and an exit status, the stop request a signal makes, and the messages naming the input
file or the worker at fault."""

import contextlib
import os
import re
import signal
import sys
import threading
import time

import tensorflow as tf
from absl import logging

from albert_tf.data.pipeline import OUT_OF_VOCABULARY, find_out_of_vocabulary
from albert_tf.data.records import find_corrupt_record, short_tf_message
from albert_tf.data.service import OUT_OF_ORDER
from albert_tf.startup import tool_name


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN or infinite loss."""
    exit_status = 1


class CorruptInputError(RuntimeError):
    """A training or eval record could not be read."""
    exit_status = 1


class WorkerLostError(RuntimeError):
    """Another worker of a multi-worker job died; the collectives were aborted."""
    exit_status = 1


class InputServiceError(RuntimeError):
    """A tf.data service worker was lost (or missing) while training."""
    exit_status = 1


class OutOfMemoryError(RuntimeError):
    """The training step ran out of device memory (TensorFlow's ResourceExhaustedError)."""
    exit_status = 1


class Interrupted(Exception):
    """Training stopped on SIGINT or SIGTERM after saving a checkpoint; nothing after training
    (evaluation, prediction, export) runs. A command-line tool exits with 128 + the signal."""

    def __init__(self, message, signum):
        super().__init__(message)
        self.exit_status = 128 + signum


# What the collectives of a multi-worker job raise once a peer is gone (TF's health check
# aborts them within seconds).
COLLECTIVE_FAILURES = (tf.errors.UnavailableError, tf.errors.CancelledError,
                        tf.errors.AbortedError, tf.errors.DeadlineExceededError,
                        tf.errors.InternalError)


class StopRequest:
    """Turns SIGTERM/SIGINT into a request to stop after the current steps and save (or, for a
    server, a wait that ends)."""

    def __init__(self):
        self.requested, self.signum = None, None
        self._signalled = threading.Event()
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        if self.requested is None:  # said at once: an evaluation may take a while to end
            logging.warning("%s received: stopping once the steps or the evaluation under way "
                            "end, after saving a checkpoint", signal.Signals(signum).name)
        self.requested, self.signum = signal.Signals(signum).name, signum
        self._signalled.set()

    def wait(self, seconds):
        """Whether a stop was requested, waiting up to `seconds` for one."""
        return self._signalled.wait(seconds)

    def restore(self):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def interrupted(stop, step, saved):
    """The Interrupted that ends training at `step` on a stop request (`stop`'s, else another
    worker's), `saved` its checkpoint; the log says so too."""
    why = stop.requested or "a stop request of another worker"
    logging.warning("Stopping at step %d on %s, after saving %s", step, why, saved)
    return Interrupted(f"stopped at step {step} on {why}; nothing after training ran. Rerun "
                       f"the same command to resume from {saved}", stop.signum or signal.SIGTERM)


def service_gap_message(error, address, step, last_checkpoint):
    """The line for the trainer's order check failing (data.service), or None for another
    error."""
    found = re.search(OUT_OF_ORDER + r" (\d+) where batch (\d+) was due", error.message or "")
    if not found:
        return None
    return (f"the tf.data service at {address} sent batch {found[1]} where batch {found[2]} was "
            f"due: one of its workers was lost, restarted or is not serving. Training stopped "
            f"after step {step} without saving; last checkpoint: {last_checkpoint or 'none'}. "
            f"Start every worker of the dispatcher's --worker_addresses, then rerun the same "
            f"command to {rerun_to(last_checkpoint)}.")


class Watchdog:
    """Ends the process with `message()` as its one line (status 1) when the code inside
    `with watchdog:` runs longer than `timeout` seconds (None: never): a tf.data service whose
    workers are all gone leaves the trainer waiting for a batch forever, inside a TensorFlow op
    that nothing can interrupt."""

    def __init__(self, timeout, message, expire=None):
        self.timeout, self.message = timeout, message
        self.expire = expire or _exit_with
        self._since, self._done = None, threading.Event()
        if timeout:
            threading.Thread(target=self._watch, daemon=True).start()

    def __enter__(self):
        self._since = time.monotonic()

    def __exit__(self, *error):
        self._since = None

    def stop(self):
        self._done.set()

    def _watch(self):
        while not self._done.wait(min(self.timeout, 5.0)):
            since = self._since
            if since is not None and time.monotonic() - since > self.timeout:
                self.expire(self.message())
                return


def service_watchdog(dataset_fn, step, last_checkpoint):
    """The Watchdog of a run fed by the tf.data service (none otherwise): it stops the run when
    no step finishes for the dataset_fn's `data_service_timeout` (the service's workers gone).
    `step()` and `last_checkpoint()` are read when it does."""
    address = getattr(dataset_fn, "data_service", None)
    timeout = getattr(dataset_fn, "data_service_timeout", None)

    def message():
        last = last_checkpoint()
        return (f"no training step finished in {timeout:.0f} s (after step {step()}) "
                f"while the batches come from the tf.data service at {address}: its workers "
                f"are gone or stalled (or a step compiles for longer: raise "
                f"--data_service_timeout). Last checkpoint: {last or 'none'}. Start the "
                f"workers, then rerun the same command to {rerun_to(last)}.")
    return Watchdog(timeout if address else None, message)


def _exit_with(message):
    sys.stdout.flush()
    os.write(2, f"{tool_name()}: error: {message}\n".encode())
    os._exit(1)


def bad_record(error):
    """A record that cannot be read, or that holds ids outside the vocabulary."""
    return (isinstance(error, tf.errors.DataLossError)
            or OUT_OF_VOCABULARY in (error.message or ""))


def corrupt_where(error, dataset_fn, kind):
    """Names the file (and record) that `error` met, reading the dataset_fn's `input_files`."""
    files = getattr(dataset_fn, "input_files", ())
    vocab_size = getattr(dataset_fn, "vocab_size", None)
    if isinstance(error, tf.errors.InvalidArgumentError):
        found = find_out_of_vocabulary(files, vocab_size) if vocab_size else None
        return (f"{found[0]} record {found[1]} holds token id {found[2]} but the config's "
                f"vocab_size is {vocab_size}: were the records built with another vocabulary?"
                if found else f"{kind} batch: {OUT_OF_VOCABULARY}")
    found = find_corrupt_record(files)
    return (f"{found[0]} is corrupt after its first {found[1]} records ({found[2]})" if found
            else f"{kind} record is corrupt ({short_tf_message(error.message)})")


def rerun_to(last_checkpoint):
    """What rerunning the same command does."""
    return "resume from that checkpoint" if last_checkpoint else "start again"


def corrupt_input_message(error, dataset_fn, step, last_checkpoint):
    where = corrupt_where(error, dataset_fn, "a training")
    return (f"{where}{'' if where.endswith('?') else '.'} Training stopped after step {step} "
            f"without saving; last good "
            f"checkpoint: {last_checkpoint or 'none'}. Replace or remove the file, then rerun the "
            f"same command to {rerun_to(last_checkpoint)}.")


def failure_detail(error):
    """Why the collectives were aborted and which tasks the error names."""
    message = str(getattr(error, "message", error))
    why = next((line.split("aborted by:", 1)[1].strip() for line in message.splitlines()
                if "aborted by:" in line), type(error).__name__)
    tasks = sorted(set(re.sub(r"/replica:\d+", "", t)
                       for t in re.findall(r"/job:\w+/(?:replica:\d+/)?task:\d+", message)))
    return why + (f"; tasks named: {', '.join(tasks)}" if tasks else "")


@contextlib.contextmanager
def training_failures(dataset_fn, num_workers, step, last_checkpoint):
    """Turns what training raises on a gap in the tf.data service's batches, an unreadable
    training record or (with several workers) a lost worker into the run's one-line errors;
    `step()` and `last_checkpoint()` are read then."""
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        last = last_checkpoint()
        gap = service_gap_message(e, getattr(dataset_fn, "data_service", None), step(), last)
        if gap:
            raise InputServiceError(gap) from e
        if not bad_record(e):
            raise
        raise CorruptInputError(corrupt_input_message(e, dataset_fn, step(), last)) from e
    except COLLECTIVE_FAILURES as e:
        if num_workers == 1:
            raise
        raise WorkerLostError(
            f"a worker of the job stopped or became unreachable after step {step()} "
            f"({failure_detail(e)}). Last checkpoint: {last_checkpoint() or 'none'}. Restart "
            f"every worker with the same command to resume from it.") from e


@contextlib.contextmanager
def out_of_memory(memory, step, last_checkpoint):
    """TensorFlow's ResourceExhaustedError in a training step as the run's one line, naming
    the micro-batch that fits (`memory`: a step_memory.StepMemory)."""
    try:
        yield
    except tf.errors.ResourceExhaustedError as e:
        raise OutOfMemoryError(memory.out_of_memory(step, last_checkpoint)) from e


@contextlib.contextmanager
def eval_failures(dataset_fn, step):
    """An unreadable eval record as the run's one-line error, naming the file."""
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        if not bad_record(e):
            raise
        raise CorruptInputError(
            f"{corrupt_where(e, dataset_fn, 'an eval')}. Evaluation at step {step} stopped; "
            f"replace or remove the file, then rerun the same command.") from e
