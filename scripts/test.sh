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
