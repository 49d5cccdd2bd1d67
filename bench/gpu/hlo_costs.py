"""What each kernel of a compiled step reads and writes, from XLA's optimized HLO text: joins a
profile's kernel times (summed by name) to the fusions they ran, so each kernel's bytes over its
time says how far it is from the copy bandwidth, and the kinds sum to a floor for the step: its
matmuls' and attention's FLOPs at the measured matmul peak plus its memory-bound kernels' bytes
at the measured copy bandwidth (`floor`).

  python3 bench/gpu/hlo_costs.py OPTIMIZED_HLO.txt[.gz] [PROFILE.json]

Without a profile it prints what each kind of kernel moves (`static_report`): for a module
compiled without a GPU (compile_offline.py), the bytes its memory-bound kernels read and write.
"""
import collections
import gzip
import json
import re
import sys

BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
         "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "f8e4m3fn": 1, "f8e5m2": 1}
_ARRAY = re.compile(r"\b(" + "|".join(BYTES) + r")\[([\d,]*)\]")
_INSTR = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*?) ([\w\-]+)\((.*)$")
_COMP = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$")
_LHS_CONTRACTING = re.compile(r'lhs_contracting_dim(?:s=\{|ensions":\s*\[)([\d,"\s]*)')
_BNTS = re.compile(
    r'"intermediate_tensor_shape":\s*\{"element_type":\s*"\w+",\s*"dimensions":\s*\[([\d",\s]+)\]')


def array_bytes(text):
    """Bytes of every array shape written in `text` (a shape or a list of operands)."""
    total = 0
    for dtype, dims in _ARRAY.findall(text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * BYTES[dtype]
    return total


def normalize(name):
    return re.sub(r"[.\-]", "_", name)


def _operands(rest):
    """The operand list of an instruction line (up to the matching parenthesis)."""
    depth, out = 1, []
    for ch in rest:
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            break
        out.append(ch)
    return "".join(out)


def kernels(hlo_text):
    """{normalized instruction name: dict(bytes, kind, ops)} for the fusions and custom calls of
    every computation that is not itself fused (the ones that become kernels)."""
    comps, current, body = {}, None, []
    for line in hlo_text.splitlines():
        m = _COMP.match(line)
        if m and not line.startswith(" "):
            current, body = m.group(1), []
            comps[current] = body
        elif current is not None and line.strip() != "}":
            body.append(line)
    shapes, found = {}, {}
    for lines in comps.values():
        for line in lines:
            m = _INSTR.match(line)
            if m:
                shapes[m.group(1)] = m.group(2)
    for comp, lines in comps.items():
        if comp.startswith(("fused_", "wrapped_")) or "fusion" in comp and "computation" in comp:
            continue
        for line in lines:
            m = _INSTR.match(line)
            if not m or m.group(3) not in ("fusion", "custom-call", "copy", "transpose",
                                           "reduce", "scatter", "gather", "convert"):
                continue
            name, result, op, rest = m.groups()
            operands = _operands(rest)
            read = array_bytes(operands)
            if read == 0:  # operands printed without their shapes
                read = sum(array_bytes(shapes.get(o.strip().lstrip("%"), ""))
                           for o in operands.split(","))
            kind = re.search(r"kind=(\w+)", rest)
            target = re.search(r'custom_call_target="([^"]+)"', rest)
            backend = re.search(r'"kind":"(__\w+)"', rest)
            calls = re.search(r"calls=%?([\w.\-]+)", rest)
            body = comps.get(calls.group(1), []) if calls else []
            found[normalize(name)] = dict(
                name=name, op=op, read=read, written=array_bytes(result),
                kind=(target.group(1) if target else backend.group(1) if backend
                      else kind.group(1) if kind else op),
                ops=_opcodes(body), flops=_flops(result, rest, operands, body, shapes))
    return found


def _dims(shape_text):
    m = _ARRAY.search(shape_text)
    return [int(d) for d in filter(None, m.group(2).split(","))] if m else []


def _product(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def _dot_flops(result, rest, lhs_shape):
    """2 x the output's elements x the contracted size (a dot, or cuBLAS's custom call, whose
    first result is the product)."""
    m = _LHS_CONTRACTING.search(rest)
    lhs = _dims(lhs_shape)
    dims = m.group(1).replace('"', "").split(",") if m else []
    contracted = [lhs[int(d)] for d in dims if d.strip()]
    return 2 * _product(_dims(result)) * _product(contracted)


def _flops(result, rest, operands, body, shapes):
    """The multiply-adds a kernel runs, counted as 2 FLOPs each: a GEMM's (cuBLAS's custom call or
    the dot inside a Triton GEMM fusion) or cuDNN flash attention's (forward: Q·K and P·V;
    backward: Q·K again, then dV, dP, dQ and dK)."""
    first = operands.split(",")[0].strip().lstrip("%")
    if "__cublas" in rest:
        return _dot_flops(result, rest, shapes.get(first, ""))
    bnts = _BNTS.search(rest)
    if "__cudnn$fmha" in rest and bnts:
        b, n, t, s = (int(d) for d in bnts.group(1).replace('"', "").split(","))
        passes = 5 if "Backward" in rest else 2
        return 2 * passes * b * n * t * s * _dims(shapes.get(first, ""))[-1]
    flops = 0
    for line in body:
        m = _INSTR.match(line)
        if m and m.group(3) == "dot":
            lhs = _operands(m.group(4)).split(",")[0].strip().lstrip("%")
            flops += _dot_flops(m.group(2), m.group(4), shapes.get(lhs, ""))
    return flops


def _opcodes(lines):
    counts = collections.Counter()
    for line in lines:
        m = _INSTR.match(line)
        if m and m.group(3) not in ("parameter", "constant", "bitcast", "broadcast", "tuple",
                                    "get-tuple-element"):
            counts[m.group(3)] += 1
    return " ".join(f"{op}x{n}" if n > 1 else op for op, n in counts.most_common(8))


def category(kernel_name, info):
    low = kernel_name.lower()
    if info is None:
        if "cudnn" in low or "fmha" in low or "flash" in low:
            return "attention (cuDNN)"
        if any(k in low for k in ("gemm", "xmma", "cutlass", "sm90", "wgmma")):
            return "matmul (cuBLAS)"
        return "other"
    kind = info["kind"]
    if "triton_gemm" in kind or "gemm" in kind or "cublas" in kind:
        return "matmul"
    if "cudnn" in kind:
        return "attention (cuDNN)"
    if "transpose" in info["ops"] or info["op"] == "transpose":
        return "transpose fusions"
    if kind == "kInput" or "reduce" in info["ops"]:
        return "reduction fusions"
    if kind == "kLoop" or info["op"] in ("copy", "convert"):
        return "elementwise fusions"
    return "other"


def report(times, counts, steps, hlo_text, bandwidth_gbs=None, top=50):
    """Lines: each kernel's ms per step, count, GB moved and GB/s; then totals by category with
    the bytes each category moves and, with `bandwidth_gbs`, its time at that bandwidth."""
    table = kernels(hlo_text)
    total_ns = sum(times.values())
    lines = ["%8s %6s %5s %8s %8s  %-20s %s" % ("ms/step", "share", "n", "GB", "GB/s",
                                                "category", "kernel: ops")]
    by_cat = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for kernel, ns in sorted(times.items(), key=lambda kv: -kv[1]):
        info = table.get(normalize(kernel))
        n = max(1, counts[kernel] // steps)
        moved = (info["read"] + info["written"]) * n / 1e9 if info else 0.0
        ms = ns / steps / 1e6
        cat = category(kernel, info)
        by_cat[cat][0] += ms
        by_cat[cat][1] += moved
        by_cat[cat][2] += n
        if len(lines) <= top:
            lines.append("%8.3f %5.1f%% %5d %8.3f %8.0f  %-20s %s: %s" % (
                ms, 100 * ns / total_ns, n, moved, moved / (ms / 1e3) if ms and moved else 0,
                cat, kernel[:60], info["ops"][:80] if info else ""))
    lines.append("by category (ms per step, kernels, GB moved%s):" % (
        ", ms at %.0f GB/s" % bandwidth_gbs if bandwidth_gbs else ""))
    for cat, (ms, gb, n) in sorted(by_cat.items(), key=lambda kv: -kv[1][0]):
        floor = " %8.3f" % (gb / bandwidth_gbs * 1e3) if bandwidth_gbs and gb else ""
        lines.append("  %-22s %8.3f ms %5d %8.2f GB%s" % (cat, ms, n, gb, floor))
    return lines, {cat: dict(ms=v[0], gb=v[1], kernels=v[2]) for cat, v in by_cat.items()}


MEMORY_BOUND = ("reduction fusions", "elementwise fusions", "transpose fusions")


def static_report(hlo_text, bandwidth_gbs=None):
    """Lines: kernels and GB moved by category, the memory-bound kinds together and, with
    `bandwidth_gbs`, their time at that bandwidth; and {category: dict(kernels, gb)}."""
    by_cat = collections.defaultdict(lambda: dict(kernels=0, gb=0.0))
    for name, info in kernels(hlo_text).items():
        cat = by_cat[category(name, info)]
        cat["kernels"] += 1
        cat["gb"] += (info["read"] + info["written"]) / 1e9
    bound = sum(by_cat[c]["gb"] for c in MEMORY_BOUND if c in by_cat)
    rows = sorted(by_cat.items(), key=lambda kv: -kv[1]["gb"]) + [
        ("memory-bound together", dict(kernels=sum(by_cat[c]["kernels"] for c in MEMORY_BOUND
                                                   if c in by_cat), gb=bound))]
    lines = []
    for cat, v in rows:  # the copy bandwidth bounds the memory-bound kinds only
        bound = cat in MEMORY_BOUND or cat == "memory-bound together"
        at = " %8.3f ms at the copy bandwidth" % (v["gb"] / bandwidth_gbs * 1e3) if (
            bandwidth_gbs and bound) else ""
        lines.append("  %-22s %5d kernels %8.2f GB%s" % (cat, v["kernels"], v["gb"], at))
    return lines, dict(by_cat)


def floor(hlo_text, tflops, bandwidth_gbs):
    """What the step cannot run faster than on a GPU with that matmul peak and copy bandwidth:
    {matmul_ms, attention_ms (cuDNN's FLOPs at the matmul peak), memory_ms (the memory-bound
    kernels' bytes at the copy bandwidth), floor_ms (their sum)}."""
    flops, gb = collections.Counter(), 0.0
    for name, info in kernels(hlo_text).items():
        cat = category(name, info)
        flops[cat] += info["flops"]
        if cat in MEMORY_BOUND:
            gb += (info["read"] + info["written"]) / 1e9
    row = dict(matmul_ms=flops["matmul"] / tflops / 1e9,
               attention_ms=flops["attention (cuDNN)"] / tflops / 1e9,
               memory_ms=gb / bandwidth_gbs * 1e3)
    row["floor_ms"] = sum(row.values())
    return {k: round(v, 3) for k, v in row.items()}


def main():
    hlo_path = sys.argv[1]
    opener = gzip.open if hlo_path.endswith(".gz") else open
    hlo = opener(hlo_path, "rt").read()
    if len(sys.argv) < 3:
        print("\n".join(static_report(hlo)[0]))
        return
    prof = json.load(open(sys.argv[2]))
    lines, _ = report(collections.Counter(prof["times_ns"]), collections.Counter(prof["counts"]),
                      prof["steps"], hlo, prof.get("bandwidth_gbs"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
