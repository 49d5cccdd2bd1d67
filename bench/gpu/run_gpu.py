"""Runs the modules of bench/gpu/dump_hlo.py with jaxlib's XLA on a GPU (no TensorFlow there).

  python3 bench/gpu/run_gpu.py attention HLO_DIR
      fused vs plain attention: outputs and gradients on the same random inputs with padding,
      timings by sequence length, and the dropout probe (masks forward = backward, new masks
      on each execution, rate).
  python3 bench/gpu/run_gpu.py steps HLO_DIR [--only a,b] [--peers] [--profile NAME]
      whole pretraining steps (gpu_step_bench.py), torch.compile peers on the same shapes, and a
      per-kernel profile of one step.
"""
import argparse
import collections
import glob
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_step_bench  # noqa: E402
from gpu_step_bench import compile_hlo, run_hlo, torch_peer  # noqa: E402

_random_arg = gpu_step_bench.make_arg


def _feature_args():
    """gpu_step_bench.make_arg, but the [batch, seq] int32 inputs, in the module's parameter
    order input_mask, input_type_ids, input_word_ids, are what a real batch holds (random
    masks would make cuDNN skip the masked keys)."""
    seen = []

    def make_arg(dtype, shape, rng, meta):
        if dtype == "s32" and shape == (meta.get("batch"), meta.get("seq")) and len(seen) < 2:
            seen.append(shape)
            b, s = shape
            if len(seen) == 1:
                return np.ones(shape, np.int32)
            return (np.arange(s)[None] >= s // 2).astype(np.int32).repeat(b, 0)
        return _random_arg(dtype, shape, rng, meta)
    return make_arg


def run_step(path, iters, out):
    gpu_step_bench.make_arg = _feature_args()
    return run_hlo(path, iters, out)


def compare_steps(d, a, b):
    """One step of two modules from the same state and batch: loss, and the relative
    difference of every variable's update (new - old, all variables together)."""
    import gzip
    import jax
    jax.config.update("jax_enable_x64", True)
    res = {}
    for name in (a, b):
        path = os.path.join(d, name + ".hlo.gz")
        hlo = gzip.open(path, "rt").read()
        meta = json.load(open(path.replace(".hlo.gz", ".json")))
        exe, dev = compile_hlo(open(path.replace(".hlo.gz", ".hlo.pb"), "rb").read())
        make_arg, rng = _feature_args(), np.random.default_rng(0)
        host = [make_arg(dt, sh, rng, meta) for dt, sh in gpu_step_bench.entry_params(hlo)]
        outs = exe.execute_sharded([jax.device_put(x, dev) for x in host])
        outs = [np.asarray(o[0]) for o in outs.disassemble_into_single_device_arrays()]
        alias = gpu_step_bench.aliases(hlo)
        deltas = [(outs[o].astype(np.float64) - host[p].astype(np.float64)).ravel()
                  for o, p in sorted(alias.items()) if outs[o].dtype.kind == "f"]
        res[name] = (float(outs[0]), np.concatenate(deltas))
    (la, da), (lb, db) = res[a], res[b]
    print(json.dumps({"compare_steps": [a, b], "loss": [la, lb],
                      "update_rel_diff": float(np.linalg.norm(da - db) / np.linalg.norm(da)),
                      "update_norm": float(np.linalg.norm(da))}), flush=True)


def _load(d, name):
    import jax
    exe, dev = compile_hlo(open(os.path.join(d, name + ".hlo.pb"), "rb").read())
    meta = json.load(open(os.path.join(d, name + ".json")))

    def run(args):
        args = [jax.device_put(a, dev) for a in args]
        outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
        outs = [o[0] for o in outs]
        jax.block_until_ready(outs)
        return outs
    return run, meta


def _inputs(m, rng, dtype):
    import ml_dtypes
    dt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    b, t, s, n, h = m["b"], m["t"], m["s"], m["n"], m["h"]
    q = rng.normal(0, 1, (b, t, n, h)).astype(dt)
    k, v = (rng.normal(0, 1, (b, s, n, h)).astype(dt) for _ in range(2))
    kv_len = rng.integers(s // 2, s + 1, (b,)).astype(np.int32)
    q_len = kv_len if t == s else np.full((b,), t, np.int32)
    dout = rng.normal(0, 1, (b, t, n, h)).astype(np.float32)
    dout = (dout * (np.arange(t)[None, :] < q_len[:, None])[:, :, None, None]).astype(dt)
    return [q, k, v, q_len, kv_len, dout], q_len, kv_len


def _timed(run, args, iters=20):
    for _ in range(3):
        run(args)
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        run(args)
        ts.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(ts))


def attention_checks(d):
    for pair in sorted({os.path.basename(p).rsplit("_", 1)[0]
                        for p in glob.glob(os.path.join(d, "att_*_fused.json"))}):
        if pair == "att_dropout":
            continue
        res = {}
        for kind in ("plain", "fused"):
            try:
                run, m = _load(d, f"{pair}_{kind}")
                args, q_len, kv_len = _inputs(m, np.random.default_rng(0), m["dtype"])
                outs = [np.asarray(o).astype(np.float32) for o in run(args)]
                res[kind] = outs
                print(json.dumps({"pair": pair, "kind": kind, "ms": _timed(run, args),
                                  "shape": [m["b"], m["t"], m["s"], m["n"], m["h"]],
                                  "dtype": m["dtype"]}), flush=True)
            except Exception as e:  # noqa: BLE001
                print(pair, kind, "failed:", type(e).__name__, str(e)[:1500], flush=True)
        if len(res) < 2:
            continue
        t, s = m["t"], m["s"]
        q_rows = (np.arange(t)[None, :] < q_len[:, None])[:, :, None, None]
        kv_rows = (np.arange(s)[None, :] < kv_len[:, None])[:, :, None, None]
        for i, (name, rows) in enumerate(zip(["out", "dq", "dk", "dv"],
                                             [q_rows, q_rows, kv_rows, kv_rows])):
            a, b = res["plain"][i] * rows, res["fused"][i] * rows
            print(json.dumps({"pair": pair, "compare": name,
                              "rel_err": float(np.linalg.norm(a - b) / np.linalg.norm(a)),
                              "max_abs": float(np.abs(a - b).max()),
                              "nan": bool(np.isnan(res["fused"][i]).any())}), flush=True)
    dropout_probe(d)


def dropout_probe(d):
    """q = k = 0 makes every probability 1/S; v and dout one-hot read the dropped probabilities
    back: out[t, j] = P'[t, j] and dv[s, j] = P'[j, s] for j < H."""
    import ml_dtypes
    try:
        run, m = _load(d, "att_dropout_fused")
    except Exception as e:  # noqa: BLE001
        print("dropout probe failed to compile:", type(e).__name__, str(e)[:1500])
        return
    b, t, s, n, h = m["b"], m["t"], m["s"], m["n"], m["h"]
    bf = ml_dtypes.bfloat16
    eye = np.zeros((s, h), np.float32)
    eye[np.arange(h), np.arange(h)] = 1
    v = np.broadcast_to(eye[None, :, None, :], (b, s, n, h)).astype(bf)
    dout = np.broadcast_to(eye[None, :t, None, :], (b, t, n, h)).astype(bf)
    zeros = np.zeros((b, t, n, h), bf)
    lengths = np.full((b,), s, np.int32)
    masks = []
    for _ in range(2):
        out, dq, dk, dv = [np.asarray(o).astype(np.float32) for o in
                           run([zeros, zeros, v, lengths, lengths, dout])]
        fwd = out[:, :h] != 0                                # [b, t<h, n, j]: P'[t, j] kept
        bwd = np.transpose(dv[:, :h], (0, 3, 2, 1)) != 0     # dv[b, s, n, j] → [b, j, n, s]
        masks.append(fwd)
        kept = out[:, :h][fwd]
        print(json.dumps({"dropout_probe": True, "dropped_fraction": float(1 - fwd.mean()),
                          "forward_equals_backward_mask": bool((fwd == bwd).all()),
                          "mismatch_fraction": float((fwd != bwd).mean()),
                          "kept_value_times_S": float(kept.mean() * s) if kept.size else None}),
              flush=True)
    print(json.dumps({"dropout_probe": True, "masks_differ_between_executions":
                      bool((masks[0] != masks[1]).any())}), flush=True)


def profile(path, steps=5):
    """Per-kernel GPU time of `steps` executions of a step module, summed by kernel name."""
    import jax
    import gzip
    from gpu_step_bench import entry_params, aliases
    meta = json.load(open(path.replace(".hlo.gz", ".json")))
    hlo = gzip.open(path, "rt").read()
    exe, dev = compile_hlo(open(path.replace(".hlo.gz", ".hlo.pb"), "rb").read())
    rng = np.random.default_rng(0)
    make_arg = _feature_args()
    args = [jax.device_put(make_arg(dt, sh, rng, meta), dev) for dt, sh in entry_params(hlo)]
    alias = aliases(hlo)

    def once():
        outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
        for o, p in alias.items():
            args[p] = outs[o][0]
        jax.block_until_ready(outs)
    for _ in range(3):
        once()
    logdir = "/tmp/prof_" + meta["name"]
    jax.profiler.start_trace(logdir)
    for _ in range(steps):
        once()
    jax.profiler.stop_trace()
    xplane = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1]
    data = jax.profiler.ProfileData.from_file(xplane)
    totals, counts = collections.Counter(), collections.Counter()
    for plane in data.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if "stream" not in line.name.lower() or "memcpy" in line.name.lower():
                continue
            for ev in line.events:
                totals[ev.name] += ev.duration_ns
                counts[ev.name] += 1
    total = sum(totals.values())
    print(json.dumps({"profile": meta["name"], "gpu_ms_per_step": total / steps / 1e6}))
    for name, ns in totals.most_common(45):
        print("%8.3f ms %5.1f%% x%-4d %s" % (ns / steps / 1e6, 100 * ns / total,
                                             counts[name] // steps, name[:110]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["attention", "dropout", "steps", "compare"])
    ap.add_argument("hlo_dir")
    ap.add_argument("--only", default="")
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--profile", default="")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    if a.what == "attention":
        attention_checks(a.hlo_dir)
        return
    if a.what == "dropout":
        dropout_probe(a.hlo_dir)
        return
    if a.what == "compare":
        for pair in a.only.split(";"):
            compare_steps(a.hlo_dir, *pair.split(","))
        return
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    out = []
    paths = sorted(glob.glob(os.path.join(a.hlo_dir, "step_*.hlo.gz")))
    if a.only:
        paths = [p for p in paths if os.path.basename(p).split(".")[0] in a.only.split(",")]
    for path in paths:
        try:
            run_step(path, a.iters, out)
        except Exception as e:  # noqa: BLE001
            print("HLO run failed:", path, type(e).__name__, str(e)[:2000], flush=True)
    _table(out)
    for name in filter(None, a.profile.split(",")):
        try:
            profile(os.path.join(a.hlo_dir, name + ".hlo.gz"))
        except Exception as e:  # noqa: BLE001
            print("profile failed:", name, type(e).__name__, str(e)[:1500], flush=True)
    if a.peers:
        shapes = {}
        for path in paths:
            m = json.load(open(path.replace(".hlo.gz", ".json")))
            shapes.setdefault((m["config"], m["batch"], m["seq"]), m)
        for m in shapes.values():
            try:
                torch_peer(m, a.iters, out, compile_=True)
            except Exception as e:  # noqa: BLE001
                print("torch peer failed:", type(e).__name__, str(e)[:500], flush=True)
        _table(out)


def _table(out):
    print("\n%-62s %-24s %9s %10s %8s" % ("what", "name", "step_ms", "seq/s", "TFLOP/s"))
    for r in out:
        print("%-62s %-24s %9.2f %10.1f %8.1f" % (r["what"][:62], r.get("name", ""),
                                                 r.get("step_ms", 0), r.get("seq_per_s", 0),
                                                 r["tflops"]), flush=True)


if __name__ == "__main__":
    main()
