#!/usr/bin/env bash
# Every benchmark against the peers installed here (pip install -e ".[bench]"), one after the
# other so they do not share the cores; the output goes to the terminal and bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
mkdir -p bench/results
out="bench/results/$(date -u +%Y-%m-%dT%H%M)-$(uname -m).txt"
{
  echo "# $(date -u)  $(uname -srm)  $(nproc) cores  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  for cmd in \
      "bench/bench_data.py --mb=2 --dupe_factor=5 --max_seq_length=128 --vocab_size=8000" \
      "bench/bench_input.py --seq_lengths=128,512 --batch_sizes=8,32 --seconds=3 --train_steps=2" \
      "bench/bench_pretraining.py --steps=3 --rounds=3" \
      "bench/bench_finetuning.py" \
      "bench/bench_inference.py --rounds=3 --text" \
      "bench/bench_serving.py --rounds=3"; do
    echo; echo "## python $cmd"; $PY $cmd 2>&1 | grep -v -E "^(I|W|E)[0-9]{4} |oneDNN|cuda|absl::Init|cpu_feature|To enable"
  done
} | tee "$out"
echo "Saved $out"
