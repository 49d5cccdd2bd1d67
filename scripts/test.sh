#!/usr/bin/env bash
# Sets up .venv (if needed) with the test extras and runs the whole test suite; PYTHON=python3.12
# runs it on that Python, in .venv-py3.12 (scripts/venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh test
# The TFLite Task Library and seqeval, each in its own environment (tests/side_envs.py).
$PY tests/side_envs.py
# One worker per core and one more, each taking whole files (module fixtures are built once per
# file), in the order conftest.LONGEST_FILES gives them (xdist would otherwise reorder them by
# test count). The extra worker computes while another waits on the processes its test started
# (2 cores: 11m34s with 3 or 4 workers, 12m48s with 2; docs/benchmarks.md).
# -rs: each skip's reason (a package with no build for this Python: tests/side_envs.py, peers()
# in tests/conftest.py).
# Test files or node ids among the arguments run instead of the whole suite.
targets=(tests)
for arg in "$@"; do
    case $arg in tests|tests/*|*.py|*::*) targets=() ;; esac
done
exec $PY -m pytest -q -rs -n "$($PY -c 'import os; print(os.cpu_count() + 1)')" --dist loadfile --no-loadscope-reorder "${targets[@]}" "$@"
