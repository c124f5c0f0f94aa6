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

echo "== python env (official kubernetes client for the simulator's foreign-client tests; jsonschema for the CRD schema tests)"
DOVETAIL_PYTHON="$(bash scripts/python-env.sh | tail -1)"
export DOVETAIL_PYTHON

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== tests"
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
else
  cargo test --workspace --locked --no-fail-fast
fi
