r"""Starts a tf.data service dispatcher or worker, to read and mask pretraining batches away
from the trainer (run_pretraining --data_service_address).

    # one dispatcher, with the list of its workers (static sharding needs it)
    python -m albert_tf.data_service --dispatcher_port=5050 \
        --worker_addresses=host1:5051,host2:5051
    # on each worker host, with its address as the list spells it
    python -m albert_tf.data_service --dispatcher_address=host0:5050 --worker_port=5051 \
        --worker_address=host1:5051
    # then the trainer
    python -m albert_tf.run_pretraining ... --dynamic_masking --data_service_address=host0:5050

Each server runs until Ctrl-C or SIGTERM. The library behind it: `albert_tf.data.service`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

from absl import app, flags, logging

from albert_tf import cli
from albert_tf.data.service import (ServiceUnavailable, check_dispatcher, split_address,
                                    start_dispatcher, start_worker)
from albert_tf.training.failures import Interrupted, StopRequest

FLAGS = flags.FLAGS


def define_flags():
    """The entry point's flags (defined on demand so that importing this module is free)."""
    flags.DEFINE_integer("dispatcher_port", None, "Start a dispatcher on this port.")
    flags.DEFINE_list("worker_addresses", None,
                      "With --dispatcher_port: host:port of every worker, as each worker's "
                      "--worker_address spells it; a worker's position in the list is its shard.")
    flags.DEFINE_string("work_dir", None,
                        "With --dispatcher_port: a directory (local or gs://) where the "
                        "dispatcher journals its state, so that a restarted one carries on.")
    flags.DEFINE_string("dispatcher_address", None,
                        "Start a worker for the dispatcher at this host:port.")
    flags.DEFINE_integer("worker_port", None, "With --dispatcher_address: the worker's port.")
    flags.DEFINE_string("worker_address", None,
                        "With --dispatcher_address: this worker's host:port as the dispatcher's "
                        "--worker_addresses lists it (default localhost:<worker_port>).")


def main(_):
    dispatcher, worker = FLAGS.dispatcher_port is not None, FLAGS.dispatcher_address is not None
    if dispatcher == worker:
        raise app.UsageError("give --dispatcher_port (a dispatcher) or --dispatcher_address "
                             "with --worker_port (a worker)")
    if dispatcher:
        _check_port(FLAGS.dispatcher_port, "dispatcher_port")
        if not FLAGS.worker_addresses:
            raise app.UsageError("--worker_addresses is required with --dispatcher_port: the "
                                 "workers' host:port, each as its --worker_address spells it")
        for address in FLAGS.worker_addresses:
            split_address(address, "worker_addresses")
    else:
        split_address(FLAGS.dispatcher_address, "dispatcher_address")
        if FLAGS.worker_port is None:
            raise app.UsageError("--worker_port is required with --dispatcher_address")
        _check_port(FLAGS.worker_port, "worker_port")
        address = FLAGS.worker_address or f"localhost:{FLAGS.worker_port}"
        split_address(address, "worker_address")
    stop = StopRequest()
    try:
        if dispatcher:
            server = start_dispatcher(FLAGS.dispatcher_port, FLAGS.worker_addresses,
                                      FLAGS.work_dir)
            logging.info("tf.data service dispatcher on port %d for %d workers (%s), %s; "
                         "trainers pass --data_service_address=<this host>:%d",
                         FLAGS.dispatcher_port, len(FLAGS.worker_addresses),
                         ", ".join(FLAGS.worker_addresses),
                         f"journaling its state to {FLAGS.work_dir}" if FLAGS.work_dir else
                         "its state lost if it restarts (--work_dir keeps it)",
                         FLAGS.dispatcher_port)
        else:
            _wait_for_dispatcher(FLAGS.dispatcher_address, stop)
            server = start_worker(FLAGS.dispatcher_address, FLAGS.worker_port, address)
            logging.info("tf.data service worker %s serving the dispatcher at %s", address,
                         FLAGS.dispatcher_address)
        _serve_until_stopped(server, stop)
    finally:
        stop.restore()


def _check_port(port, flag):
    if not 0 < port < 65536:
        raise app.UsageError(f"--{flag}={port} is not a port (1..65535)")


def _serve_until_stopped(server, stop):
    """Waits in Python (a server's join() would not see signals) until SIGINT or SIGTERM;
    `server` stays referenced meanwhile (collected, it would stop)."""
    while not stop.wait(1.0):
        pass
    raise _stopped(stop)


def _stopped(stop):
    return Interrupted(f"stopped on {stop.requested}", stop.signum)


def _wait_for_dispatcher(address, stop):
    """Returns once something answers at the dispatcher's address: a worker may start first,
    and says once that it waits (TensorFlow's own retries would only log gRPC errors)."""
    said = False
    while True:
        try:
            check_dispatcher(address, timeout=5.0)
            break
        except ServiceUnavailable as e:
            if not said:
                logging.warning("%s; this worker waits for it", e)
                said = True
            if stop.wait(2.0):
                raise _stopped(stop)
    if said:
        logging.info("The dispatcher at %s answers", address)


def run(argv=None):
    define_flags()
    cli.run(main, argv=argv)


if __name__ == "__main__":
    run()
