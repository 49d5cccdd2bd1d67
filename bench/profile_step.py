"""Where the time of one ALBERT-base pretraining step, or of one serving call, goes, by TF op
type (CPU host trace).

  python bench/profile_step.py --precision=bf16 --steps=2 --top=25
  python bench/profile_step.py --target=serving --precision=bf16 --text=short --batch_size=1

Runs our full step (MLM + SOP, LAMB), or the run_classifier serving export on raw texts
(bench_inference.py's), under tf.profiler and sums the executed op events of the host plane by
op type, so a change can be judged by which ops it removes or speeds up. For serving, the
matmuls are also summed by projection over the layers.
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

import bench_inference  # noqa: E402
import bench_pretraining  # noqa: E402

PROJECTIONS = ("query", "key", "value", "attention_output", "intermediate", "ffn_output",
               "embedding_hidden_mapping_in", "pooler")


def op_times(logdir):
    """{op type: total ms} and {op name: total ms} over the traced TF op events."""
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    by_type, by_name = collections.Counter(), collections.Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        names = {k: m.name for k, m in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names[event.metadata_id]  # "scope/op_name:OpType" for an op
                if name == "CpuExecutable::ExecuteAsyncOnStream":
                    name = op_type = "XLA-compiled functions"
                elif ":" not in name or "::" in name:
                    continue
                else:
                    op_type = name.rsplit(":", 1)[-1]
                by_type[op_type] += event.duration_ps / 1e9
                by_name[name] += event.duration_ps / 1e9
    return by_type, by_name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--by_name", action="store_true", help="also list the slowest op names")
    parser.add_argument("--target", default="step", choices=["step", "serving"])
    parser.add_argument("--text", default="short", choices=["short", "long"],
                        help="serving: sentences of 20-30 or 110-126 tokens")
    args = parser.parse_args()
    if args.target == "step":
        step = bench_pretraining.ours(bench_pretraining.make_batch(args.batch_size, 128, 20),
                                      args.precision)
    else:
        workdir = tempfile.mkdtemp()
        spm, texts = bench_inference.text_setup(workdir)
        serve = bench_inference.text_ours(workdir, spm, args.precision)
        batch = (texts[args.text] * args.batch_size)[:args.batch_size]
        step = lambda: serve(batch)  # noqa: E731
    for _ in range(2):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    print(f"{args.target}: {(time.perf_counter() - start) / args.steps * 1000:.1f} ms a call "
          "unprofiled")
    logdir = tempfile.mkdtemp()
    tf.profiler.experimental.start(logdir)
    for _ in range(args.steps):
        step()
    tf.profiler.experimental.stop()
    by_type, by_name = op_times(logdir)
    total = sum(by_type.values())
    print(f"{args.precision}: {total / args.steps:.0f} ms of op time per step "
          "(both cores' ops summed)")
    for op_type, ms in by_type.most_common(args.top):
        print(f"  {op_type:40s} {ms / args.steps:8.1f} ms  {100 * ms / total:5.1f}%")
    if args.target == "serving":
        matmuls = collections.Counter()
        for name, ms in by_name.items():
            if "MatMul" in name:
                scopes = [p.rsplit("_", 1)[0] for p in name.split("/")]
                matmuls[next((p for p in scopes if p in PROJECTIONS), "other")] += ms
        print("matmuls by projection:")
        for projection, ms in matmuls.most_common():
            print(f"  {projection:40s} {ms / args.steps:8.1f} ms")
    if args.by_name:
        for name, ms in by_name.most_common(args.top):
            print(f"  {ms / args.steps:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
