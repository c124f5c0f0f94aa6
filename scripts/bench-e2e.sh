#!/usr/bin/env bash
# The end-to-end figures of issues 15 and 27: a burst of 1,000 pending pods (or `bench-e2e.sh
# 10000`: 10,000) through the three services (watcher, two planners, actuator --cloud aws on
# moto_server, ledger on Postgres, simulated cluster) to the CreateFleet calls sent (also after
# the batch window closed) and to all pods bound (also after the last Node registered). Prints;
# asserts nothing.
#
#   bash scripts/bench-e2e.sh [--release] [PODS] [nextest arguments...]
#
# `--release` builds and runs everything with the release profile: the test and the service
# binaries it starts (any DOVETAIL_{WATCHER,PLANNER,ACTUATOR}_BIN set for a debug build is
# ignored, so `integration_tests::binary` takes the release ones). The issue's targets are for
# release builds. `DOVETAIL_BENCH_LOG=info` keeps the services' logs in
# $TMPDIR/dovetail-bench-<pods>-logs. Needs what scripts/test.sh installs (DOVETAIL_MOTO_SERVER,
# Postgres on 127.0.0.1:5432).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=()
if [ "${1:-}" = "--release" ]; then
  shift
  profile=(--cargo-profile release)
  unset DOVETAIL_WATCHER_BIN DOVETAIL_PLANNER_BIN DOVETAIL_ACTUATOR_BIN
fi
if [ -z "${DOVETAIL_MOTO_SERVER:-}" ]; then
  DOVETAIL_MOTO_SERVER="$(bash scripts/moto.sh | tail -1)"
  export DOVETAIL_MOTO_SERVER
fi
export DOVETAIL_TEST_POSTGRES="${DOVETAIL_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}"
pods="${1:-1000}"
shift || true
# --workspace (filtered by -E), not -p: a per-package selection resolves other dependency features
# and rebuilds the AWS SDK. The `bench` profile lifts the end-to-end tests' time limit.
cargo nextest run --workspace "${profile[@]}" --profile bench --run-ignored ignored-only \
  -E "test(=burst_of_${pods}_pods_figures)" --no-capture "$@"
