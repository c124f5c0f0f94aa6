#!/usr/bin/env python3
"""End-to-end timing of `dovetail plan` on Karpenter's scheduling-benchmark workload as YAML.

Writes N pending pods as individual `v1 Pod` documents (what `kubectl get pods -o yaml` gives,
the heaviest input form), one NodePool + EC2NodeClass, and the 400 synthetic instance types of
Karpenter's benchmark as a `--instance-types` catalog file; then runs the release binary
`dovetail plan ... --output json` several times and prints wall time, user CPU, peak RSS, and
the plan's summary. This is the number a user feels: read manifests, plan, write JSON.

Usage: python3 scripts/bench-plan-e2e.py [PODS ...]   (default 10000)
Builds the release binary first; needs /usr/bin/time (Debian package `time`).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ZONES = ["test-zone-1", "test-zone-2", "test-zone-3"]
CPUS = ["100m", "250m", "500m", "750m", "1", "1500m"]
MEMS = ["100Mi", "250Mi", "500Mi", "1Gi", "2Gi", "4Gi"]
GROUPS = ["plain", "spread-zone", "spread-host", "affinity", "anti"]


class SplitMix:
    def __init__(self, seed):
        self.s = seed

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def range(self, lo, hi):
        return lo + self.next() % (hi - lo + 1)


def catalog():
    out = ["instanceTypes:"]
    for i in range(400):
        n = i + 1
        price = round(0.1 * n + 0.1 * (2 * n * 2**30) / 1e9, 6)
        out.append(f"  - name: fake-it-{i}")
        out.append(f'    cpu: "{n}"')
        out.append(f"    memory: {2 * n}Gi")
        out.append(f"    pods: {10 * n}")
        out.append("    overhead: {kubeReserved: {cpu: 100m, memory: 10Mi}}")
        out.append("    offerings:")
        for z, ct in [(ZONES[0], "spot"), (ZONES[1], "spot"), (ZONES[0], "on-demand"),
                      (ZONES[1], "on-demand"), (ZONES[2], "on-demand")]:
            out.append(f"      - {{zone: {z}, capacityType: {ct}, price: {price}}}")
    return "\n".join(out) + "\n"


POOL = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""


def pod(i, n, rng):
    group = i * 5 // n
    name = f"{GROUPS[group]}-{i}"
    cpu = CPUS[rng.range(0, 5)]
    mem = MEMS[rng.range(0, 5)]
    labels, extra = "", ""
    if group == 1:
        labels = "\n  labels: {app: spread-zone}"
        extra = ("\n  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone,"
                 " whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: spread-zone}}}")
    elif group == 2:
        labels = "\n  labels: {app: spread-host}"
        extra = ("\n  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: kubernetes.io/hostname,"
                 " whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: spread-host}}}")
    elif group == 3:
        labels = "\n  labels: {app: affinity}"
        extra = ("\n  affinity:\n    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
                 "      - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: affinity}}}")
    elif group == 4:
        app = f"anti-{i % 10}"
        labels = f"\n  labels: {{app: {app}}}"
        extra = ("\n  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
                 f"      - {{topologyKey: kubernetes.io/hostname, labelSelector: {{matchLabels: {{app: {app}}}}}}}")
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default{labels}\n"
            f"spec:\n  containers:\n  - name: app\n    image: registry.example/app:1\n"
            f"    resources: {{requests: {{cpu: {cpu}, memory: {mem}}}}}{extra}\n")


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [10000]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "dovetail"], cwd=root, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    binary = os.path.join(target, "release", "dovetail")
    print(f"{'pods':>6} {'yaml MB':>8} {'wall s (best of 3)':>19} {'user s':>7} {'peak RSS MB':>12} "
          f"{'claims':>7} {'scheduled':>9} {'cost/h':>9} {'LB/h':>9}")
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            rng = SplitMix(42)
            with open(os.path.join(d, "pods.yaml"), "w") as f:
                f.write("---\n".join(pod(i, n, rng) for i in range(n)))
            with open(os.path.join(d, "pool.yaml"), "w") as f:
                f.write(POOL)
            cat = os.path.join(d, "catalog.yaml")
            with open(cat, "w") as f:
                f.write(catalog())
            size_mb = sum(os.path.getsize(os.path.join(d, x)) for x in ("pods.yaml", "pool.yaml")) / 1e6
            best, user, rss, plan = None, None, 0.0, None
            for _ in range(3):
                t0 = time.perf_counter()
                r = subprocess.run(["/usr/bin/time", "-f", "%U %M", "-o", os.path.join(d, "time.txt"),
                                    binary, "plan", "-f", os.path.join(d, "pods.yaml"), "-f",
                                    os.path.join(d, "pool.yaml"), "--instance-types", cat,
                                    "--now", "2026-01-01T00:00:00Z", "--output", "json"],
                                   capture_output=True, text=True)
                wall = time.perf_counter() - t0
                if r.returncode != 0:
                    sys.exit(f"dovetail plan failed ({r.returncode}): {r.stderr}")
                plan = json.loads(r.stdout)
                with open(os.path.join(d, "time.txt")) as f:
                    u, m = f.read().split()[-2:]
                if best is None or wall < best:
                    best, user = wall, float(u)
                rss = max(rss, int(m) / 1024)  # KiB -> MiB, this process only
            s = plan["summary"]
            print(f"{n:>6} {size_mb:>8.1f} {best:>19.3f} {user:>7.3f} {rss:>12.1f} "
                  f"{s.get('newNodeClaims', 0):>7} {s.get('scheduledPods', 0):>9} "
                  f"{s.get('costPerHour', 0):>9.2f} {s.get('lowerBoundCostPerHour', 0):>9.2f}")


if __name__ == "__main__":
    main()
