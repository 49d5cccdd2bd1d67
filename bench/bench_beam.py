"""The record builder on Apache Beam against the local builder, on the same input shards.

    python bench/bench_beam.py --shards=8 --mb_per_shard=2 --max_seq_length=512 --dupe_factor=2

Generates an English-like corpus (bench_data.generate_corpus) as `--shards` files and a
SentencePiece model (a --workdir of an earlier run reuses them), then builds the same records
four ways: the local builder with --num_workers 1 and 2, and `--runner=DirectRunner
--direct_running_mode=multi_processing` with --direct_num_workers 1 and 2. For each: seconds in
process (from the tool's last log line) and wall-clock, instances per second, peak resident
memory of the tool's process and of its largest worker process (sampled every 20 ms; the
tool's stderr filter left out), and whether the output bytes equal the local builder's. Then a
sizing model for Wikipedia + BookCorpus from the measured figures (printed as JSON, and as a
Markdown table with --markdown).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_data import ROOT, generate_corpus  # noqa: E402

# The corpus ALBERT was pretrained on (Lan et al. 2019, as BERT: English Wikipedia 2,500M words
# and BookCorpus 800M words); about 16 GB of text as the paper's appendix and RoBERTa put it.
CORPUS_GB = 16.0
# The paper's advice for the builder: input shards of about 100 MB (README "At full scale").
SHARD_MB = 100
FILTER_CODE = "noise = sys.argv[1:]"


def _sample_peaks(proc, peaks, done):
    """Largest RSS seen per process of `proc`'s tree until `done` is set."""
    root = psutil.Process(proc.pid)
    while not done.is_set():
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    if p.pid != root.pid and FILTER_CODE in " ".join(p.cmdline()):
                        continue  # the tool's stderr filter (albert_tf.startup)
                    rss = p.memory_info().rss
                except psutil.Error:
                    continue
                peaks[p.pid] = max(peaks.get(p.pid, 0), rss)
        except psutil.Error:
            pass
        time.sleep(0.02)


def run_builder(inputs, output, spm, args, extra):
    cmd = [sys.executable, "-m", "albert_tf.create_pretraining_data", f"--input_file={inputs}",
           f"--output_file={output}", f"--spm_model_file={spm}",
           f"--max_seq_length={args.max_seq_length}", f"--dupe_factor={args.dupe_factor}",
           *extra]
    peaks, done = {}, threading.Event()
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    sampler = threading.Thread(target=_sample_peaks, args=(proc, peaks, done))
    sampler.start()
    err = proc.communicate()[1]
    done.set()
    sampler.join()
    wall = time.time() - start
    if proc.returncode:
        sys.stderr.write(err[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")
    m = re.findall(r"Wrote (\d+) instances from .* in ([\d.]+) s", err)
    instances, seconds = int(m[-1][0]), float(m[-1][1])
    workers = {pid: rss for pid, rss in peaks.items() if pid != proc.pid}
    return {"seconds": seconds, "wall_s": round(wall, 2), "instances": instances,
            "instances_per_s": round(instances / seconds),
            "peak_mb_tool_process": round(peaks.get(proc.pid, 0) / 2**20),
            "peak_mb_largest_worker": round(max(workers.values(), default=0) / 2**20)}


def digests(directory):
    return {n: hashlib.sha256(open(os.path.join(directory, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(directory))}


def sizing(per_mb_cpu_s, instances_per_mb, bytes_per_instance, overhead, dupe_factors,
           workers):
    """Wikipedia + BookCorpus from the measured per-megabyte figures (one copy of the text):
    CPU-hours of the local builder; wall time on N Beam workers with the measured Beam
    overhead, N capped by the number of 100 MB shards (a shard is built by one worker)."""
    mb = CORPUS_GB * 1000
    shards = int(mb // SHARD_MB)
    out = []
    for dupe in dupe_factors:
        cpu_h = per_mb_cpu_s * mb * dupe / 3600
        row = {"dupe_factor": dupe, "instances_M": round(instances_per_mb * mb * dupe / 1e6, 1),
               "output_GB": round(instances_per_mb * mb * dupe * bytes_per_instance / 1e9, 1),
               "cpu_hours": round(cpu_h, 2), "shards": shards}
        row.update({f"wall_min_{n}_workers": round(cpu_h * overhead / min(n, shards) * 60, 1)
                    for n in workers})
        out.append(row)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--mb_per_shard", type=float, default=2.0)
    p.add_argument("--max_seq_length", type=int, default=512)
    p.add_argument("--dupe_factor", type=int, default=2)
    p.add_argument("--vocab_size", type=int, default=8000)
    p.add_argument("--workdir", default=None)
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="bench_beam_")
    os.makedirs(work, exist_ok=True)
    shards = [os.path.join(work, f"shard-{i:03d}.txt") for i in range(args.shards)]
    for i, path in enumerate(shards):  # a --workdir of an earlier run keeps its corpus
        if not os.path.exists(path):
            generate_corpus(path, args.mb_per_shard, seed=1000 + i)
    spm = os.path.join(work, "spm.model")
    if not os.path.exists(spm):
        from albert_tf.data.vocab import train_sentencepiece
        train_sentencepiece(shards[0], spm[:-len(".model")], args.vocab_size, overwrite=True)
    text_mb = sum(os.path.getsize(s) for s in shards) / 1e6
    inputs = os.path.join(work, "shard-*.txt")
    runs = {"local, 1 worker": ["--num_workers=1"], "local, 2 workers": ["--num_workers=2"]}
    for n in (1, 2):
        runs[f"Beam DirectRunner multi_processing, {n} worker{'s' if n > 1 else ''}"] = [
            "--runner=DirectRunner", "--direct_running_mode=multi_processing",
            f"--direct_num_workers={n}"]
    results, reference = {}, None
    for name, extra in runs.items():
        out = os.path.join(work, re.sub(r"\W+", "_", name))
        shutil.rmtree(out, ignore_errors=True)
        results[name] = run_builder(inputs, os.path.join(out, "train.tfrecord"), spm, args, extra)
        reference = reference or digests(out)
        results[name]["same_bytes_as_local"] = digests(out) == reference
    local = results["local, 1 worker"]
    output_bytes = sum(os.path.getsize(os.path.join(work, "local_1_worker", n)) for n in reference)
    per_mb_cpu_s = local["seconds"] / (text_mb * args.dupe_factor)
    overhead = results["Beam DirectRunner multi_processing, 1 worker"]["seconds"] / local["seconds"]
    model = sizing(per_mb_cpu_s, local["instances"] / (text_mb * args.dupe_factor),
                   output_bytes / local["instances"], overhead, (1, 40), (1, 16, 64, 160))
    summary = {"text_mb": round(text_mb, 2), "shards": args.shards,
               "max_seq_length": args.max_seq_length, "dupe_factor": args.dupe_factor,
               "cpus": os.cpu_count(), "runs": results,
               "beam_overhead_1_worker": round(overhead, 2),
               "cpu_s_per_mb_per_copy": round(per_mb_cpu_s, 3),
               "output_bytes_per_instance": round(output_bytes / local["instances"]),
               "sizing_wikipedia_bookcorpus": model}
    print(json.dumps(summary, indent=1))
    if args.markdown:
        print("| builder | in process | wall | instances/s | peak MB, tool | peak MB, worker "
              "| bytes = local |\n|---|---:|---:|---:|---:|---:|---|")
        for name, r in results.items():
            print(f"| {name} | {r['seconds']:.2f} s | {r['wall_s']:.2f} s | "
                  f"{r['instances_per_s']:,} | {r['peak_mb_tool_process']} | "
                  f"{r['peak_mb_largest_worker'] or '–'} | {r['same_bytes_as_local']} |")


if __name__ == "__main__":
    main()
