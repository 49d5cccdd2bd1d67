#!/usr/bin/env bash
# Sets up .venv (if needed) with the test extras and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
# The TFLite Task Library and seqeval, each in its own environment (tests/side_envs.py).
.venv/bin/python tests/side_envs.py
# One worker per core, each taking whole files (module fixtures are built once per file), in
# the order conftest.LONGEST_FILES gives them (xdist would otherwise reorder them by test count).
exec .venv/bin/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder tests "$@"
