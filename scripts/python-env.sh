#!/usr/bin/env bash
# Creates (or reuses) the Python environment the tests use: a venv with the official `kubernetes`
# client (the simulator's foreign-client tests) and `jsonschema` (the CRD schema tests of
# watcher/crds), both from PyPI. Prints the path of its python on the last line.
# Usage: PY=$(bash scripts/python-env.sh | tail -1)
set -euo pipefail
KUBERNETES_CLIENT_VERSION="37.0.2"
JSONSCHEMA_VERSION="4.26.0"
cache="${DOVETAIL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dovetail}"
venv="$cache/venv-py"
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  mkdir -p "$cache"
  python3 -m venv "$venv" >&2
fi
if ! "$py" -c "import kubernetes, sys; sys.exit(kubernetes.__version__ != '$KUBERNETES_CLIENT_VERSION')" 2>/dev/null; then
  "$py" -m pip install --quiet --disable-pip-version-check "kubernetes==$KUBERNETES_CLIENT_VERSION" >&2
fi
if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('jsonschema') != '$JSONSCHEMA_VERSION')" 2>/dev/null; then
  "$py" -m pip install --quiet --disable-pip-version-check "jsonschema==$JSONSCHEMA_VERSION" >&2
fi
echo "$py"
