"""Runs the modules of bench/gpu/dump_hlo.py with jaxlib's XLA on a GPU (no TensorFlow there).

  python3 bench/gpu/run_gpu.py attention HLO_DIR
      fused vs plain attention: outputs and gradients on the same random inputs with padding,
      timings by sequence length, and the dropout probe (masks forward = backward, new masks
      on each execution, rate).
  python3 bench/gpu/run_gpu.py steps HLO_DIR [--only a,b] [--peers] [--profile NAME]
      whole pretraining steps (gpu_step_bench.py), torch.compile peers on the same shapes, and a
      per-kernel profile of one step.
  python3 bench/gpu/run_gpu.py variants HLO_DIR --only a,b [--ceilings] [--peers] [--profile a]
      each module's memory, one step against the first of its shape, its time and, with
      --ceilings, its floor (bench/gpu/README.md).
  python3 bench/gpu/run_gpu.py largest HLO_DIR --only a,b [--peers]
      each module (our step dumped at the batch compile_offline.py `largest` found) compiled
      and run; with --peers, the eager transformers step's largest batch at the same config
      and sequence.
"""
import argparse
import collections
import glob
import itertools
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_step_bench  # noqa: E402
import hlo_costs  # noqa: E402
from gpu_step_bench import (DT, USABLE_SHARE, bisect_batch, compile_hlo,  # noqa: E402
                            read_proto, run_hlo, stepper, torch_peak_gib, torch_peer)

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


def _finetuning_args(meta):
    """Feeds a fine-tuning module's feature parameters by the kinds its meta names (masks of
    ones, two segments, ids, labels and positions in range); the rest as _random_arg."""
    kinds = [f[1:] for f in meta["features"]]
    index = itertools.count()

    def make_arg(dtype, shape, rng, m):
        i = next(index)
        if i >= len(kinds):
            return _random_arg(dtype, shape, rng, m)
        kind = kinds[i]
        if kind[0] == "mask":
            return np.ones(shape, DT[dtype])
        if kind[0] == "segments":
            return np.broadcast_to(np.arange(shape[-1]) >= shape[-1] // 2, shape).astype(DT[dtype])
        hi = {"ids": kind[-1], "label": kind[-1], "position": m["seq"]}[kind[0]]
        return rng.integers(0, hi, shape).astype(DT[dtype])
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
        exe, dev = compile_hlo(read_proto(path[:-len(".hlo.gz")]))
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


def memory_stats(exe):
    """XLA's compiled memory statistics of an executable in GiB (peak: arguments + outputs −
    donated + temporaries), {} where this jaxlib gives none."""
    try:
        stats = exe.get_compiled_memory_stats()
    except Exception:  # noqa: BLE001
        return {}
    got = {}
    for field in ("argument", "output", "alias", "temp", "generated_code"):
        value = getattr(stats, field + "_size_in_bytes", None)
        if value is not None:
            got[field + "_gib"] = value / 2 ** 30
    if all(k + "_gib" in got for k in ("argument", "output", "alias", "temp")):
        got["peak_gib"] = (got["argument_gib"] + got["output_gib"] - got["alias_gib"]
                           + got["temp_gib"])
    return got


def optimized_hlo(exe):
    try:
        return "\n".join(m.to_string() for m in exe.hlo_modules())
    except Exception as e:  # noqa: BLE001
        print("no optimized HLO:", type(e).__name__, e, flush=True)
        return ""


def variants(d, names, iters, out, profile_names=(), dump_dir="", ceilings=None):
    """Each module in `names` order: compiled memory, one step from the same state and batch as
    the first module of its shape (loss, relative difference of the update), the median step
    time, and for `profile_names` the kernels' times joined to the bytes they move; with
    `dump_dir`, their optimized HLO and profile there. With the measured `ceilings` (matmul
    TFLOP/s, copy GB/s), each step's floor (hlo_costs.floor) and the share of it the step
    reaches (floor / step time)."""
    first = {}
    for name in names:
        try:
            row = _variant(d, name, iters, first, name in profile_names, dump_dir, ceilings)
            out.append(row)
            print(json.dumps(row), flush=True)
        except Exception as e:  # noqa: BLE001
            print("variant failed:", name, type(e).__name__, str(e)[:1500], flush=True)


def _variant(d, name, iters, first, profiled, dump_dir, ceilings):
    import gzip
    import jax
    from gpu_step_bench import aliases, entry_params, step_flops
    jax.config.update("jax_enable_x64", True)
    stem = os.path.join(d, name)
    meta = json.load(open(stem + ".json"))
    hlo = gzip.open(stem + ".hlo.gz", "rt").read()
    t0 = time.perf_counter()
    exe, dev = compile_hlo(read_proto(stem))
    row = dict(what="albert_tf step (TF->HLO, XLA on %s)" % dev.platform, name=name,
               batch=meta["batch"], seq=meta["seq"], compile_s=time.perf_counter() - t0,
               **memory_stats(exe))
    make_arg = _finetuning_args(meta) if "features" in meta else _feature_args()
    rng = np.random.default_rng(0)
    host = [make_arg(dt, sh, rng, meta) for dt, sh in entry_params(hlo)]
    args = [jax.device_put(x, dev) for x in host]
    alias = aliases(hlo)
    once = stepper(exe, args, alias)
    outs = once()
    row["loss"] = float(np.asarray(outs[0][0]))
    delta = np.concatenate([(np.asarray(outs[o][0]) - host[p]).ravel().astype(np.float32)
                            for o, p in sorted(alias.items()) if host[p].dtype.kind == "f"])
    key = (meta.get("task"), meta["config"], meta["batch"], meta["seq"])
    if key in first:
        base_name, base_loss, base_delta = first[key]
        row.update(against=base_name, base_loss=base_loss, update_rel_diff=float(
            np.linalg.norm(delta - base_delta) / np.linalg.norm(base_delta)))
    else:
        first[key] = (name, row["loss"], delta)
    for _ in range(3):
        once()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        once()
        times.append(time.perf_counter() - t)
    med = float(np.median(times))
    row.update(step_ms=med * 1e3, min_ms=min(times) * 1e3, flops=step_flops(meta),
               seq_per_s=meta["batch"] * (meta.get("choices") or 1) / med)
    row["tflops"] = row["flops"] / med / 1e12
    text = optimized_hlo(exe) if ceilings or profiled else ""
    if ceilings:
        row["floor"] = hlo_costs.floor(text, *ceilings)
        row["of_floor"] = row["floor"]["floor_ms"] / row["step_ms"]
    if profiled:
        kernel_report(text, once, name, dump_dir, ceilings[1] if ceilings else None)
    return row


def peer_largest(meta, out):
    """The largest batch (a multiple of 8) whose eager transformers step at `meta`'s config and
    sequence peaks within USABLE_SHARE of the GPU's memory, found as compile_offline.py finds
    ours (doubling, then bisection)."""
    import torch
    limit = USABLE_SHARE * torch.cuda.get_device_properties(0).total_memory / 2 ** 30
    peaks = {}

    def fits(batch):
        peaks[batch] = torch_peak_gib(meta, batch)
        print(json.dumps(dict(peer=meta["config"], seq=meta["seq"], batch=batch,
                              peak_gib=peaks[batch], limit_gib=limit)), flush=True)
        return peaks[batch] is not None and peaks[batch] <= limit

    low, high = bisect_batch(fits)
    row = dict(what="largest batch: transformers AlbertForPreTraining, eager, bf16 autocast",
               name=meta["config"], seq=meta["seq"], largest_batch=low,
               peak_gib=peaks.get(low), first_over=high, first_over_peak_gib=peaks[high],
               limit_gib=limit, tflops=0.0)
    out.append(row)
    print(json.dumps(row), flush=True)


def kernel_report(text, once, name, dump_dir, bandwidth_gbs):
    """The kernels' times of `once` by name, joined to what the optimized HLO `text` says each
    moves."""
    import gzip
    times_ns, counts, steps = kernel_times(once, name)
    lines, cats = hlo_costs.report(times_ns, counts, steps, text, bandwidth_gbs)
    print(json.dumps({"profile": name, "gpu_ms_per_step": sum(times_ns.values()) / steps / 1e6,
                      "categories": cats}))
    print("\n".join(lines), flush=True)
    if dump_dir:
        with gzip.open(os.path.join(dump_dir, name + ".opt.hlo.gz"), "wt") as f:
            f.write(text)
        with open(os.path.join(dump_dir, name + ".profile.json"), "w") as f:
            json.dump(dict(times_ns=times_ns, counts=counts, steps=steps,
                           bandwidth_gbs=bandwidth_gbs), f)


def kernel_times(once, label, steps=5):
    """Per-kernel GPU time of `steps` calls of `once`, summed by kernel name (jax.profiler)."""
    import jax
    once()
    logdir = "/tmp/prof_" + label
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
    return dict(totals), dict(counts), steps


def copy_bandwidth(out):
    """Device-to-device copy of 4 GiB through torch: bytes read and written per second."""
    import torch
    a = torch.empty(2 ** 31, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        b.copy_(a)
    torch.cuda.synchronize()
    gbs = 2 * a.numel() * 2 * 10 / (time.perf_counter() - t) / 1e9
    row = dict(what="device copy (torch), GB/s read+written", gbs=gbs, tflops=0.0)
    out.append(row)
    print(json.dumps(row), flush=True)
    del a, b
    torch.cuda.empty_cache()
    return gbs


def torch_finetuning_peer(meta, iters, out, compile_=True, device="cuda"):
    """transformers' AlbertFor{SequenceClassification,QuestionAnswering,MultipleChoice} on the
    module's shape: bf16 autocast, AdamW, torch.compile; its step time and peak memory."""
    import torch
    import transformers
    cfg = transformers.AlbertConfig(
        vocab_size=meta["vocab"], embedding_size=meta["emb"], hidden_size=meta["hidden"],
        num_hidden_layers=meta["layers"], num_attention_heads=max(1, meta["hidden"] // 64),
        intermediate_size=meta["inter"], hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, num_labels=2)
    task = meta["task"]
    cls = {"classifier": transformers.AlbertForSequenceClassification,
           "squad": transformers.AlbertForQuestionAnswering,
           "race": transformers.AlbertForMultipleChoice}[task]
    model = cls(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    b, s, c = meta["batch"], meta["seq"], meta.get("choices") or 0
    lead = (b, c) if c else (b,)
    ids = torch.randint(5, meta["vocab"], lead + (s,), device=device)
    tt = (torch.arange(s, device=device) >= s // 2).long().expand(*lead, s)
    labels = ({"start_positions": torch.randint(0, s, (b,), device=device),
               "end_positions": torch.randint(0, s, (b,), device=device)} if task == "squad"
              else {"labels": torch.randint(0, c or 2, (b,), device=device)})
    fwd = torch.compile(model) if compile_ else model
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, token_type_ids=tt, attention_mask=torch.ones_like(ids),
                       **labels).loss
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    sync()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    med = float(np.median(times))
    row = dict(what="transformers %s %s bf16 autocast%s" % (
        transformers.__version__, cls.__name__, " + torch.compile" if compile_ else ""),
        name=meta["name"], batch=b, seq=s, step_ms=med * 1e3, min_ms=min(times) * 1e3,
        seq_per_s=b * (c or 1) / med, flops=gpu_step_bench.step_flops(meta),
        peak_gib=torch.cuda.max_memory_allocated() / 2 ** 30 if device == "cuda" else None)
    row["tflops"] = row["flops"] / med / 1e12
    out.append(row)
    print(json.dumps(row), flush=True)


def _load(d, name):
    import jax
    exe, dev = compile_hlo(read_proto(os.path.join(d, name)))
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


def profile(path):
    """Each kernel's GPU time in a step module, joined to the bytes its fusion moves
    (`kernel_report`, as `variants --profile` prints it)."""
    import jax
    import gzip
    from gpu_step_bench import entry_params, aliases
    meta = json.load(open(path.replace(".hlo.gz", ".json")))
    hlo = gzip.open(path, "rt").read()
    exe, dev = compile_hlo(read_proto(path[:-len(".hlo.gz")]))
    rng = np.random.default_rng(0)
    make_arg = _feature_args()
    args = [jax.device_put(make_arg(dt, sh, rng, meta), dev) for dt, sh in entry_params(hlo)]
    once = stepper(exe, args, aliases(hlo))
    for _ in range(2):
        once()
    kernel_report(optimized_hlo(exe), once, meta["name"], "", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["attention", "dropout", "steps", "compare", "variants",
                                     "largest"])
    ap.add_argument("hlo_dir")
    ap.add_argument("--only", default="")
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--profile", default="")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dump", default="", help="variants: folder for optimized HLO, profiles")
    ap.add_argument("--ceilings", action="store_true",
                    help="variants: the bf16 matmul and device-copy ceilings first, then each "
                    "step's floor and the share of it the step reaches")
    a = ap.parse_args()
    if a.what == "attention":
        attention_checks(a.hlo_dir)
        return
    if a.what == "dropout":
        dropout_probe(a.hlo_dir)
        return
    if a.what == "variants":
        out = []
        ceilings = None
        if a.ceilings:
            ceilings = gpu_step_bench.matmul_ceiling(out), copy_bandwidth(out)
        names = a.only.split(",")
        variants(a.hlo_dir, names, a.iters, out, a.profile.split(","), a.dump, ceilings)
        _table(out)
        if a.peers:
            shapes = {}
            for name in names:
                m = json.load(open(os.path.join(a.hlo_dir, name + ".json")))
                shapes.setdefault((m.get("task"), m["config"], m["batch"], m["seq"]), m)
            for m in shapes.values():
                try:
                    (torch_finetuning_peer if "task" in m else torch_peer)(
                        m, a.iters, out, compile_=True)
                except Exception as e:  # noqa: BLE001
                    print("torch peer failed:", type(e).__name__, str(e)[:500], flush=True)
                gpu_step_bench.free_cuda()
            _table(out)
        return
    if a.what == "largest":
        out, shapes = [], {}
        names = a.only.split(",")
        variants(a.hlo_dir, names, 1, out)
        for name in names:
            m = json.load(open(os.path.join(a.hlo_dir, name + ".json")))
            shapes.setdefault((m["config"], m["seq"]), m)
        for m in shapes.values() if a.peers else ():
            peer_largest(m, out)
        _table(out)
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
            gpu_step_bench.free_cuda()
        _table(out)


def _table(out):
    print("\n%-62s %-24s %9s %10s %8s %9s %9s" % ("what", "name", "step_ms", "seq/s", "TFLOP/s",
                                                   "floor_ms", "of_floor"))
    for r in out:
        floor = r.get("floor", {}).get("floor_ms")
        print("%-62s %-24s %9.2f %10.1f %8.1f %9s %9s" % (
            r["what"][:62], r.get("name", ""), r.get("step_ms", 0), r.get("seq_per_s", 0),
            r["tflops"], "%.2f" % floor if floor else "", "%.0f%%" % (100 * r["of_floor"])
            if floor else ""), flush=True)


if __name__ == "__main__":
    main()
