"""Pretraining batches made by tf.data service workers: the record reading and masking leave the
trainer's host.

The policy is static sharding (`ShardingPolicy.HINT`) over the dispatcher's fixed worker list:
worker k of N reads the same file order as the in-process pipeline (serialized records, cheap),
keeps the batches whose index is k mod N and parses and masks only those, seeded by the batch
index as in-process. The trainer is the one consumer of a coordinated job: it reads the workers
in rounds, one batch from each (a busy worker may miss a round and send its batch in a later
one), puts the batches back in index order with a small window and so receives batches 0, 1,
2, … as in-process: the same batches, masks included, as a run without the service. Before the
job starts the trainer waits until every worker of the list serves. A worker lost or restarted
leaves a gap that the window cannot close, which stops the run instead of training quietly on
part of the data. A resumed run starts a new job at the batch
after its checkpoint (the workers skip what came before without masking it).
"""

import contextlib
import errno
import re
import socket
import threading
import time
import uuid

import tensorflow as tf

SERVICE = tf.data.experimental.service
# In the error the trainer's order check raises (training.failures turns it into one line).
OUT_OF_ORDER = "tf.data service sent batch"


class ServiceUnavailable(ConnectionError):
    """The dispatcher does not answer, or its workers do not all serve."""
    exit_status = 1  # the command-line tools' status for it (albert_tf.cli)


def split_address(address, flag="data_service_address"):
    """'[grpc://]host:port' → ('host', port); a clear error for anything else."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--{flag}={address} is not host:port (e.g. localhost:5050)")
    return host.strip("[]"), int(port)


def check_dispatcher(address, timeout=10.0):
    """Raises ServiceUnavailable, naming the address, when nothing answers there: without it the
    first batch would wait forever."""
    host, port = split_address(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ServiceUnavailable(
            f"no tf.data service dispatcher answers at {address} ({e.strerror or e}); start "
            f"one with python -m albert_tf.data_service --dispatcher_port={port} "
            f"--worker_addresses=...") from None


def shard_for_workers(batches):
    """Keeps, on worker k of N, the batches with index k mod N (`batches` yields (index,
    batch)); in-process, where nothing rewrites the hint, it is an error by design."""
    return batches.shard(tf.data.experimental.SHARD_HINT, tf.data.experimental.SHARD_HINT)


def _rounds(dataset, address):
    """`dataset` (infinite) served in rounds: one element from each worker, in turn."""
    return dataset.apply(SERVICE.distribute(
        processing_mode=SERVICE.ShardingPolicy.HINT,
        service=address if "://" in address else f"grpc://{address}",
        job_name=f"albert_tf-{uuid.uuid4().hex}", consumer_index=0, num_consumers=1))


def wait_for_workers(address, timeout):
    """The number of workers in the dispatcher's list, once all of them serve; ServiceUnavailable
    after `timeout` seconds. Each worker answers its shard index and the shard count; a round
    of probes with every index in it means every worker is there."""
    hint = tf.data.experimental.SHARD_HINT
    probe = (tf.data.Dataset.range(2**40).shard(hint, hint).take(2).batch(2)
             .map(tf.autograph.experimental.do_not_convert(
                 lambda pair: tf.stack([pair[0], pair[1] - pair[0]]))).repeat())
    found, error, stop = {}, [], threading.Event()

    def poll():
        try:
            while not stop.is_set():
                answers = iter(_rounds(probe, address))
                index, count = (int(v) for v in next(answers))
                indices = {index} | {int(next(answers)[0]) for _ in range(count - 1)}
                found.update(count=count, serving=len(indices), ready=len(indices) == count)
                if found["ready"]:
                    return
                time.sleep(0.5)
        except tf.errors.OpError as e:
            error.append(e)
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    thread.join(timeout)
    stop.set()
    if error:
        raise ServiceUnavailable(f"the tf.data service at {address} failed: "
                                 f"{error[0].message.splitlines()[0]}")
    if not found.get("ready"):
        serving = (f"{found['serving']} of its {found['count']} workers serve"
                   if found else "no worker serves")
        raise ServiceUnavailable(
            f"the tf.data service at {address}: {serving} after {timeout:.0f} s; start every "
            f"worker of the dispatcher's --worker_addresses (python -m albert_tf.data_service "
            f"--dispatcher_address={address} --worker_port=...)")
    return found["count"]


def read_from_service(batches, address, first_index, timeout):
    """Sends `batches` ((index, batch) pairs, sharded by `shard_for_workers`) to the service at
    `address`; the trainer's side yields the batches in index order from `first_index`. Waits
    up to `timeout` seconds for the workers."""
    check_dispatcher(address)
    workers = wait_for_workers(address, timeout)
    return in_index_order(_rounds(batches, address), first_index,
                          LATE_ROUNDS * workers).prefetch(tf.data.AUTOTUNE)


# A worker that misses a round (busy when the trainer asked) sends its batch in a later one.
LATE_ROUNDS = 4


def in_index_order(pairs, first_index, window):
    """The batches of `pairs` ((index, batch), each index once, none more than `window` places
    early) in index order from `first_index`. An index that is early by more, or comes twice,
    is a batch lost or repeated: an error with OUT_OF_ORDER in its message."""
    spec = pairs.element_spec[1]
    empty = tf.nest.map_structure(lambda s: tf.zeros([window, *s.shape], s.dtype), spec)
    positions = tf.range(window, dtype=tf.int64)

    @tf.autograph.experimental.do_not_convert
    def step(state, pair):
        due, held, slots = state
        index, batch = pair
        slot = index % window
        fits = (index >= due) & (index < due + window) & ~tf.gather(held, slot)
        check = tf.debugging.Assert(fits, [tf.strings.format(
            OUT_OF_ORDER + " {} where batch {} was due", (index, due))])
        with tf.control_dependencies([check]):
            slots = tf.nest.map_structure(
                lambda stack, t: tf.tensor_scatter_nd_update(stack, [[slot]], t[None]),
                slots, batch)
            held = tf.tensor_scatter_nd_update(held, [[slot]], [True])
        in_turn = (due + positions) % window                       # slots from the due one on
        ready = tf.gather(held, in_turn)
        count = tf.argmin(tf.concat([tf.cast(ready, tf.int32), [0]], 0), output_type=tf.int64)
        out = tf.nest.map_structure(lambda stack: tf.gather(stack, in_turn[:count]), slots)
        held = tf.scatter_nd(in_turn[:, None], ready & (positions >= count), [window])
        return (due + count, held, slots), out
    start = (tf.constant(first_index, tf.int64), tf.zeros([window], tf.bool), empty)
    return pairs.scan(start, step).unbatch()


def start_dispatcher(port, worker_addresses, work_dir=None):
    """A dispatcher for static sharding over `worker_addresses` (a worker's position in the
    list is its shard), running in this process."""
    with _server_errors(port, "dispatcher"):
        return SERVICE.DispatchServer(SERVICE.DispatcherConfig(
            port=port, worker_addresses=list(worker_addresses), work_dir=work_dir,
            fault_tolerant_mode=bool(work_dir)))


def start_worker(dispatcher_address, port, worker_address):
    """A worker of the dispatcher at `dispatcher_address`, running in this process;
    `worker_address` as the dispatcher's list spells it."""
    with _server_errors(port, "worker", dispatcher_address, worker_address):
        return SERVICE.WorkerServer(SERVICE.WorkerConfig(
            dispatcher_address=dispatcher_address.split("://")[-1],
            worker_address=worker_address, port=port))


@contextlib.contextmanager
def _server_errors(port, role, dispatcher_address=None, worker_address=None):
    """A server's start that fails on the user's setup (a port it cannot listen on, a worker
    the dispatcher does not list) as a ValueError that says which; other failures unchanged."""
    _check_port_free(port, role)
    try:
        yield
    except RuntimeError as e:
        message = str(e)
        if "Could not start gRPC server" in message:
            raise ValueError(f"the tf.data service {role} cannot listen on port {port}") from None
        if "Failed to assign an index for worker" in message:
            listed = re.search(r"Configured workers list: (\[.*?\])", message)
            raise ValueError(
                f"the dispatcher at {dispatcher_address} does not take this worker as "
                f"{worker_address}: its --worker_addresses are "
                f"{listed.group(1) if listed else 'others'}, or a worker already serves as "
                f"{worker_address}. Give --worker_address as the dispatcher lists it "
                f"(one worker per entry)") from None
        raise


def _check_port_free(port, role):
    """gRPC servers share a port (SO_REUSEPORT): a second one would start beside the first."""
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "")):
        try:
            probe = socket.socket(family)
        except OSError:  # no IPv6 on this host
            continue
        with probe:
            try:
                probe.bind((host, port))
            except OSError as e:
                held = ": another process holds it" if e.errno == errno.EADDRINUSE else ""
                raise ValueError(f"the tf.data service {role} cannot listen on port {port} "
                                 f"({e.strerror}{held})") from None
        return
