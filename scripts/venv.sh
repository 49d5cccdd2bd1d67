# Sourced by demo.sh and test.sh in the checkout's root, with the extra to install ("demo",
# "test"): sets up the virtual environment of $PYTHON (default python3) and sets PY to its
# python. python3's is .venv; another Python's is .venv-py<version> beside it, so that runs on
# two Pythons rebuild neither (PYTHON=python3.12 bash scripts/test.sh -m "not slow").
PYTHON=${PYTHON:-python3}
version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
VENV=.venv
if [ "$(version "$PYTHON")" != "$(version python3)" ]; then
    VENV=.venv-py$(version "$PYTHON")
fi
"$PYTHON" -m venv "$VENV"
PY=$VENV/bin/python
$PY -m pip install -q --upgrade pip
$PY -m pip install -q -e ".[$1]"
