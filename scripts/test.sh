#!/usr/bin/env bash
# The test command: installs what the tests need, starts it, then checks and tests everything.
# Works on a fresh rust-svc machine (Rust 1.95, Python 3, PostgreSQL running).
set -euo pipefail
cd "$(dirname "$0")/.."

# Reuse a build cache outside the clone when one can be kept, so CI does not rebuild every crate.
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
  if mkdir -p /var/cache/dovetail-target 2>/dev/null && [ -w /var/cache/dovetail-target ]; then
    export CARGO_TARGET_DIR=/var/cache/dovetail-target
  fi
fi

echo "== python env (scripts/python-requirements.txt: the kubernetes client, kubectl, jsonschema, ...)"
DOVETAIL_PYTHON="$(bash scripts/python-env.sh | tail -1)"
DOVETAIL_KUBECTL="$(dirname "$DOVETAIL_PYTHON")/kubectl"
export DOVETAIL_PYTHON DOVETAIL_KUBECTL

echo "== moto_server (EC2/SSM stand-in for the cloud-aws tests)"
DOVETAIL_MOTO_SERVER="$(bash scripts/moto.sh | tail -1)"
export DOVETAIL_MOTO_SERVER

echo "== chromium (headless, for the dovetail demo web page test)"
DOVETAIL_CHROMIUM="$(bash scripts/chromium.sh | tail -1)"
export DOVETAIL_CHROMIUM

echo "== postgres (the actuator's ledger tests: a database per test on 127.0.0.1:5432, trust auth)"
export DOVETAIL_TEST_POSTGRES="${DOVETAIL_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}"
if ! psql "$DOVETAIL_TEST_POSTGRES" -Atqc 'select 1' >/dev/null 2>&1; then
  # The machine's server may have stopped: start it as the machine's own start-up does.
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start >&2 || true
  sleep 2
fi
if ! psql "$DOVETAIL_TEST_POSTGRES" -Atqc 'select 1' >/dev/null 2>&1; then
  echo "Postgres is not reachable at $DOVETAIL_TEST_POSTGRES (set DOVETAIL_TEST_POSTGRES)" >&2
  exit 1
fi
# The Postgres-restart test runs its own server with initdb/pg_ctl on a free port.
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== deploy/ (kustomize renders, kubernetes-validate 1.30-1.33, cfn-lint, dashboard metrics, Dockerfile)"
bash scripts/check-deploy.sh

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== tests"
# The service binaries the process tests run: `cargo nextest run --workspace` builds them in the
# same invocation (their packages have integration tests), so the tests need not run a second
# `cargo build` with other feature unification (integration_tests::binary honours these).
bin_dir="${CARGO_TARGET_DIR:-$PWD/target}/debug"
export DOVETAIL_PLANNER_BIN="$bin_dir/dovetail-planner"
export DOVETAIL_WATCHER_BIN="$bin_dir/dovetail-watcher"
export DOVETAIL_ACTUATOR_BIN="$bin_dir/dovetail-actuator"
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
else
  cargo test --workspace --locked --no-fail-fast
fi
