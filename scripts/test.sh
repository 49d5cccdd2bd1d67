#!/usr/bin/env bash
# Sets up .venv (if needed) with the test extras and runs the whole test suite; PYTHON=python3.12
# runs it on that Python, in .venv-py3.12 (scripts/venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh test
# Test files or node ids among the arguments run instead of the whole suite: those of one file
# in this process (no workers to start), and the side environments only if a test needs one
# (tests/side_envs.py sets one up at its first use).
targets=(tests)
files=()
for arg in "$@"; do
    case $arg in tests|tests/*|*.py|*::*) targets=(); files+=("${arg%%::*}") ;; esac
done
# One worker per core and one more, each taking whole files (module fixtures are built once per
# file), in the order conftest.LONGEST_FILES gives them (xdist would otherwise reorder them by
# test count). The extra worker computes while another waits on the processes its test started
# (2 cores: 11m34s with 3 or 4 workers, 12m48s with 2; docs/benchmarks.md).
workers=$($PY -c 'import os; print(os.cpu_count() + 1)')
if [ ${#targets[@]} -gt 0 ]; then
    # The TFLite Task Library and seqeval, each in its own environment (tests/side_envs.py).
    $PY tests/side_envs.py
elif [ "$(printf '%s\n' "${files[@]}" | sort -u | wc -l)" = 1 ] && [ -f "${files[0]}" ]; then
    workers=0
fi
# -rs: each skip's reason (a package with no build for this Python: tests/side_envs.py, peers()
# in tests/conftest.py).
exec $PY -m pytest -q -rs -n "$workers" --dist loadfile --no-loadscope-reorder "${targets[@]}" "$@"
