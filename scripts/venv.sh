# Sourced by demo.sh and test.sh in the checkout's root, with the extra to install ("demo",
# "test"): sets up the virtual environment of $PYTHON (default python3) and sets PY to its
# python. python3's is .venv; another Python's is .venv-py<version> beside it, so that runs on
# two Pythons rebuild neither (PYTHON=python3.12 bash scripts/test.sh -m "not slow").
PYTHON=${PYTHON:-python3}
# python3.X that does not run (pyenv's shim refuses a version that is not the active one):
# pyenv's newest 3.X, where pyenv has one.
if ! "$PYTHON" -c "" 2>/dev/null && [[ $PYTHON =~ ^python(3\.[0-9]+)$ ]] && \
        command -v pyenv > /dev/null; then
    found=$(ls -d "$(pyenv root)/versions/${BASH_REMATCH[1]}".*/bin/"$PYTHON" 2>/dev/null |
            sort -V | tail -n 1)
    PYTHON=${found:-$PYTHON}
fi
version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
VENV=.venv
if [ "$(version "$PYTHON")" != "$(version python3)" ]; then
    VENV=.venv-py$(version "$PYTHON")
fi
"$PYTHON" -m venv "$VENV"
PY=$VENV/bin/python
$PY -m pip install -q --upgrade pip
# (setuptools' warning of folders named like the package: README's "One folder is a trap")
PYTHONWARNINGS="ignore:Editable installation" $PY -m pip install -q -e ".[$1]"
