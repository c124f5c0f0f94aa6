#!/usr/bin/env bash
# moto_server, the EC2/SSM stand-in of the cloud-aws tests (PyPI `moto[server]`), in its own
# venv: botocore pins python-dateutil<3 while the kubernetes client of scripts/python-env.sh
# wants >=3, so the two cannot share one environment.
#
#   bash scripts/moto.sh            installs (or reuses) it; prints the moto_server path last
#   bash scripts/moto.sh --start    also starts it on a free 127.0.0.1 port and prints
#                                   `<pid> http://127.0.0.1:<port>` last (kill the pid to stop it)
#
# The tests start their own servers from the binary; scripts/test.sh exports its path as
# DOVETAIL_MOTO_SERVER.
set -euo pipefail
MOTO_VERSION="5.2.5"
cache="${DOVETAIL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dovetail}"
venv="$cache/venv-moto"
py="$venv/bin/python"
bin="$venv/bin/moto_server"
if [ ! -x "$py" ]; then
  mkdir -p "$cache"
  python3 -m venv "$venv" >&2
fi
if ! { [ -x "$bin" ] && "$py" -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; }; then
  "$py" -m pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
fi
if [ "${1:-}" != "--start" ]; then
  echo "$bin"
  exit 0
fi
log="$(mktemp "${TMPDIR:-/tmp}/moto.XXXXXX")"
"$bin" -H 127.0.0.1 -p 0 >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  url="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)"
  if [ -n "$url" ]; then
    echo "moto_server log: $log" >&2
    echo "$pid $url"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    cat "$log" >&2
    exit 1
  fi
  sleep 0.2
done
kill "$pid"
echo "moto_server did not start; log: $log" >&2
exit 1
