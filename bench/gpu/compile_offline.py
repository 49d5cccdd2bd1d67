"""Compiles the modules of dump_hlo.py for a GPU on a machine without one: jaxlib's XLA with the
CUDA plugin compiles for a described GPU (bench/gpu/targets/*.txtpb) without touching a device.
What that gives, with no device time: XLA's compiled peak memory of a step, its optimized HLO,
the bytes each kind of kernel reads and writes (hlo_costs.static_report), which is the
memory-bound half of the step that the GPU profiles show, and the step's floor (hlo_costs.floor:
its FLOPs at the measured matmul peak plus those bytes at the copy bandwidth). Not the time:
XLA skips autotuning here, so its GEMM choices (cuBLAS or Triton, and what a Triton GEMM fuses)
differ from a GPU's.

  python bench/gpu/compile_offline.py modules HLO_DIR [--gpu h100|h200] [--only a,b]
      [--dump DIR]
  python bench/gpu/compile_offline.py largest [--gpu h100|h200] --tf_python PYTHON \\
      config:seq [config:seq ...]

`largest`: the largest batch whose compiled pretraining step (dump_hlo.py `steps`, 20 masked
positions, `--attention=auto`) fits USABLE_SHARE of the GPU's memory, by doubling then
bisection; PYTHON is an interpreter with TensorFlow and albert_tf (the project's venv).
Setup (its own venv: 270 MB download, 1.1 GB installed, no GPU needed; bench/gpu/README.md):
  python3 -m venv .venv-gpuaot && .venv-gpuaot/bin/pip install jax==0.10.2 jaxlib==0.10.2 \\
      jax-cuda12-plugin==0.10.2 jax-cuda12-pjrt==0.10.2
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no device: the CUDA plugin only compiles
os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")  # no CUDA runtime installed
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hlo_costs  # noqa: E402
from gpu_step_bench import USABLE_SHARE, bisect_batch, read_proto, stablehlo_text  # noqa: E402
from run_gpu import memory_stats, optimized_hlo  # noqa: E402

COPY_GBS = {"h100": 3352.0, "h200": 4287.0}  # H200: measured (docs/benchmarks.md); H100: spec
# bf16 8192^3 matmul, measured on the H200 (2026-11-27); an H100 SXM has the same tensor cores
# and clocks (not measured on one).
MATMUL_TFLOPS = {"h100": 805.7, "h200": 805.7}


def topology(gpu):
    from jax.experimental import topologies
    with open(os.path.join(HERE, "targets", gpu + ".txtpb")) as f:
        config = f.read()
    return topologies.get_topology_desc(platform="cuda", target_config=config,
                                        topology="1x1x1")


def compile_for(topo, proto):
    from jax._src import compiler
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(stablehlo_text(proto))
        return compiler.backend_compile_and_load(
            topo.devices[0].client, module, xc.DeviceList(tuple(topo.devices)),
            xc.CompileOptions(), [])


def compile_module(topo, stem, gpu, dump_dir=""):
    """{name, compile_s, *_gib, peak_gib, bytes by kind}; prints the bytes table."""
    t0 = time.perf_counter()
    exe = compile_for(topo, read_proto(stem))
    row = dict(what="offline compile for %s (no device)" % gpu, name=os.path.basename(stem),
               compile_s=time.perf_counter() - t0, **memory_stats(exe))
    text = optimized_hlo(exe)
    lines, cats = hlo_costs.static_report(text, COPY_GBS[gpu])
    row["gb_by_kind"] = {k: round(v["gb"], 3) for k, v in cats.items()}
    row["memory_bound_gb"] = round(sum(cats[c]["gb"] for c in hlo_costs.MEMORY_BOUND
                                       if c in cats), 3)
    row["floor"] = hlo_costs.floor(text, MATMUL_TFLOPS[gpu], COPY_GBS[gpu])
    if dump_dir:
        with gzip.open(os.path.join(dump_dir, row["name"] + ".opt.hlo.gz"), "wt") as f:
            f.write(text)
    print(json.dumps(row), flush=True)
    print("\n".join(lines), flush=True)
    print("  floor %(floor_ms).2f ms: matmuls %(matmul_ms).2f + attention %(attention_ms).2f at "
          % row["floor"] + "%.0f TFLOP/s, memory-bound %.2f at %.0f GB/s" % (
              MATMUL_TFLOPS[gpu], row["floor"]["memory_ms"], COPY_GBS[gpu]), flush=True)
    return row


def device_gib(gpu):
    with open(os.path.join(HERE, "targets", gpu + ".txtpb")) as f:
        for line in f:
            if "device_memory_size" in line:
                return int(line.split(":")[1]) / 2 ** 30
    raise ValueError(f"{gpu}: no device_memory_size in its target")


def largest_batch(topo, gpu, tf_python, config, seq):
    """The largest batch (a multiple of 8 from 8) whose step fits USABLE_SHARE of the GPU."""
    limit = USABLE_SHARE * device_gib(gpu)
    peaks = {}

    def fits(batch):
        with tempfile.TemporaryDirectory() as d:
            name = f"lb_{config}_{batch}x{seq}"
            dumped = subprocess.run(
                [tf_python, os.path.join(HERE, "dump_hlo.py"), d, "steps", "--attention=auto",
                 f"{name}={config}:{batch}:{seq}:20"], capture_output=True, text=True)
            if dumped.returncode:
                raise SystemExit(f"largest: dump_hlo.py failed for {config} at batch {batch}:\n"
                                 + dumped.stderr[-3000:])
            exe = compile_for(topo, read_proto(os.path.join(d, name + "_auto")))
        peaks[batch] = memory_stats(exe)["peak_gib"]
        print(json.dumps(dict(config=config, seq=seq, batch=batch, peak_gib=peaks[batch],
                              limit_gib=limit)), flush=True)
        return peaks[batch] <= limit

    low, high = bisect_batch(fits)
    return dict(what="largest batch, offline compile for %s" % gpu, config=config, seq=seq,
                largest_batch=low, peak_gib=peaks.get(low), limit_gib=limit,
                first_over=high, first_over_peak_gib=peaks[high])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["modules", "largest"])
    ap.add_argument("args", nargs="+", help="modules: HLO_DIR; largest: config:seq ...")
    ap.add_argument("--gpu", default="h200", choices=sorted(COPY_GBS))
    ap.add_argument("--only", default="", help="modules: names (file stems) to compile")
    ap.add_argument("--dump", default="", help="modules: folder for the optimized HLO")
    ap.add_argument("--tf_python", default="", help="largest (required): a Python with "
                    "TensorFlow and albert_tf")
    a = ap.parse_args()
    if a.what == "modules":
        names = _modules(a.args, a.only)
        if a.dump:
            _check_dump(a.dump, names)
        topo = topology(a.gpu)
        for name in names:
            compile_module(topo, name, a.gpu, a.dump)
        return
    specs = [_config_and_seq(spec) for spec in a.args]
    if not a.tf_python or not os.path.isfile(a.tf_python):
        raise SystemExit("largest: --tf_python is required: the path of a Python with "
                         f"TensorFlow and albert_tf (got {a.tf_python!r})")
    topo = topology(a.gpu)
    for config, seq in specs:
        print(json.dumps(largest_batch(topo, a.gpu, a.tf_python, config, seq)), flush=True)


def _modules(args, only):
    """The module stems to compile: HLO_DIR's (or `only`'s), each checked to exist."""
    if len(args) != 1:
        raise SystemExit(f"modules: one HLO_DIR, got {len(args)}: {' '.join(args)}")
    d = args[0]
    if not os.path.isdir(d):
        raise SystemExit(f"modules: no folder {d} (write one with dump_hlo.py)")
    names = only.split(",") if only else sorted(
        f[:-len(".hlo.pb.gz")] for f in os.listdir(d) if f.endswith(".hlo.pb.gz"))
    if not names:
        raise SystemExit(f"modules: {d} holds no .hlo.pb.gz module (write them with dump_hlo.py)")
    missing = [n for n in names if not os.path.exists(os.path.join(d, n + ".hlo.pb.gz"))]
    if missing:
        raise SystemExit(f"modules: not in {d}: {', '.join(missing)}")
    return [os.path.join(d, n) for n in names]


def _check_dump(dump_dir, stems):
    """--dump writes only new files: an existing folder's optimized HLO is refused, not replaced."""
    if not os.path.isdir(dump_dir):
        raise SystemExit(f"--dump: no folder {dump_dir}")
    there = [os.path.basename(s) + ".opt.hlo.gz" for s in stems
             if os.path.exists(os.path.join(dump_dir, os.path.basename(s) + ".opt.hlo.gz"))]
    if there:
        raise SystemExit(f"--dump: {dump_dir} already holds {', '.join(there)}; "
                         "move them or dump elsewhere")


def _config_and_seq(spec):
    config, _, seq = spec.partition(":")
    if not seq.isdigit():
        raise SystemExit(f"largest: {spec!r}: write config:seq, e.g. albert_base_v2:512")
    return config, int(seq)


if __name__ == "__main__":
    main()
