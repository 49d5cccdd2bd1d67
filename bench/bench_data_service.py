"""Dynamic-masking input through tf.data service against the in-process pipeline (sequences/s).

    python bench/bench_data_service.py --seq_length=128 --batch_size=32 --seconds=10 --repeats=3

Builds records from the bundled corpus (as bench/bench_input.py), then, each `--repeats` times,
counts the masked sequences per second the trainer's side receives: (a) the in-process
pipeline on one core (`taskset`), (b) on every core, (c) through a dispatcher and one worker
pinned to one core, (d) through two workers, one per core. Servers are `python -m
albert_tf.data_service` processes; the reader is this process. On a machine with two cores, (c)
against (a) is the service's overhead per core and (d) against (c) its scaling.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from bench_input import build_records, sequences_per_second  # noqa: E402
from conftest import free_ports  # noqa: E402

from albert_tf.data.pipeline import pretraining_dataset  # noqa: E402
from albert_tf.data.service import wait_for_workers  # noqa: E402

TOOL = [sys.executable, "-m", "albert_tf.data_service"]


def start_service(cores):
    """A dispatcher and one worker per entry of `cores` (each pinned there); (address,
    processes)."""
    port, *ports = free_ports(1 + len(cores))
    addresses = [f"localhost:{p}" for p in ports]
    procs = [subprocess.Popen(TOOL + [f"--dispatcher_port={port}",
                                      f"--worker_addresses={','.join(addresses)}"],
                              cwd=ROOT, stderr=subprocess.DEVNULL)]
    for core, worker_port in zip(cores, ports):
        procs.append(subprocess.Popen(
            ["taskset", "-c", str(core)] + TOOL + [f"--dispatcher_address=localhost:{port}",
                                                  f"--worker_port={worker_port}"],
            cwd=ROOT, stderr=subprocess.DEVNULL))
    address = f"localhost:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            wait_for_workers(address, 5)
            return address, procs
        except ConnectionError:
            if time.monotonic() > deadline:
                raise


def in_process_rate(options, seconds, core=None):
    """The in-process rate, pinned to `core` in a child process when given."""
    if core is None:
        return sequences_per_second(pretraining_dataset(**options), options["batch_size"],
                                    seconds)
    code = (f"import sys; sys.argv = {sys.argv!r}; sys.path[:0] = [{ROOT!r}, "
            f"{os.path.join(ROOT, 'bench')!r}]; import bench_data_service as b; "
            f"print(b.in_process_rate({options!r}, {seconds}))")
    out = subprocess.run(["taskset", "-c", str(core), sys.executable, "-c", code], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.path.join(ROOT, "data", "corpus", "*.txt"))
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="bench_data_service_")
    files, count = build_records(workdir, args.corpus, args.seq_length, args.predictions,
                                 args.vocab_size, 1)
    print(f"{count} records of {args.seq_length} tokens, batch {args.batch_size}, "
          f"dynamic masking, {os.cpu_count()} cores")
    options = dict(input_patterns=files, batch_size=args.batch_size,
                   max_seq_length=args.seq_length, max_predictions_per_seq=args.predictions,
                   is_training=True, seed=1, dynamic_masking=True, vocab_size=args.vocab_size)
    rows = {"in-process, 1 core": [], "in-process, all cores": [],
            "service, 1 worker (1 core)": [], "service, 2 workers (1 core each)": []}
    for _ in range(args.repeats):
        rows["in-process, 1 core"].append(in_process_rate(options, args.seconds, core=0))
        rows["in-process, all cores"].append(in_process_rate(options, args.seconds))
        for name, cores in (("service, 1 worker (1 core)", [1]),
                            ("service, 2 workers (1 core each)", [0, 1])):
            address, procs = start_service(cores)
            try:
                rows[name].append(sequences_per_second(
                    pretraining_dataset(**options, data_service=address),
                    args.batch_size, args.seconds))
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
    base = sorted(rows["in-process, 1 core"])[len(rows["in-process, 1 core"]) // 2]
    print("| input | sequences/s (runs) | median ÷ in-process on 1 core |")
    print("|---|---|---|")
    for name, rates in rows.items():
        median = sorted(rates)[len(rates) // 2]
        print(f"| {name} | {', '.join(f'{r:,.0f}' for r in rates)} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
