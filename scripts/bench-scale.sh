#!/usr/bin/env bash
# The scale run of issue 27 (integration-tests/tests/scale.rs, modelled on Karpenter's perf
# suite): the whole system as real processes on the simulated cluster takes 10,000 pending pods
# in one burst, then the Deployment is scaled to 10% and the system consolidates. Prints time to
# all bound, CreateFleet calls, planner CPU per batch, peak RSS of watcher, planners and
# actuator, ledger writes per second on Postgres, and cost ÷ proven bound after each
# consolidation round. Asserts nothing.
#
#   bash scripts/bench-scale.sh [PODS] [nextest arguments...]     (default 10000)
#
# Release builds throughout (the test and the services it starts; a DOVETAIL_*_BIN set for a
# debug build is ignored). `DOVETAIL_BENCH_LOG=info` keeps the services' info logs. Needs what
# scripts/test.sh installs (DOVETAIL_MOTO_SERVER, Postgres on 127.0.0.1:5432).
set -euo pipefail
cd "$(dirname "$0")/.."
unset DOVETAIL_WATCHER_BIN DOVETAIL_PLANNER_BIN DOVETAIL_ACTUATOR_BIN
if [ -z "${DOVETAIL_MOTO_SERVER:-}" ]; then
  DOVETAIL_MOTO_SERVER="$(bash scripts/moto.sh | tail -1)"
  export DOVETAIL_MOTO_SERVER
fi
export DOVETAIL_TEST_POSTGRES="${DOVETAIL_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}"
if [ -n "${1:-}" ] && [ "${1#-}" = "$1" ]; then
  export DOVETAIL_SCALE_PODS="$1"
  shift
fi
cargo nextest run --workspace --cargo-profile release --profile bench --run-ignored ignored-only \
  -E "test(=scale_run_figures)" --no-capture "$@"
