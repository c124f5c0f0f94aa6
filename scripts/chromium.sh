#!/usr/bin/env bash
# Headless Chromium (Debian's `chromium` package) for the `dovetail demo --serve` page test.
#
#   bash scripts/chromium.sh     installs it when missing (apt-get, as root or with sudo);
#                                prints the chromium path last
#
# scripts/test.sh exports that path as DOVETAIL_CHROMIUM; the web page test
# (tests/demo.rs) fails, naming this script, when it is not set.
set -euo pipefail
find_chromium() {
  command -v chromium || command -v chromium-browser || true
}
bin="$(find_chromium)"
if [ -z "$bin" ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  # Another apt run (e.g. on a shared machine) holds the lock for a while: wait for it.
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
  bin="$(find_chromium)"
fi
if [ -z "$bin" ]; then
  echo "chromium is not installed and could not be installed (apt-get install chromium)" >&2
  exit 1
fi
echo "$bin"
