#!/usr/bin/env python3
"""End-to-end timing of `dovetail plan` on Karpenter's scheduling-benchmark workload as YAML.

Writes N pending pods as individual `v1 Pod` documents (what `kubectl get pods -o yaml` gives,
the heaviest input form), one NodePool + EC2NodeClass, and the 400 synthetic instance types of
Karpenter's benchmark as a `--instance-types` catalog file; then runs the release binary
`dovetail plan ... --output json` several times and prints wall time, user CPU, peak RSS, and
the plan's summary. This is the number a user feels: read manifests, plan, write JSON.

Usage: python3 scripts/bench-plan-e2e.py [PODS ...]   (default 10000)
       python3 scripts/bench-plan-e2e.py --cluster NODES [--spread]
Builds the release binary first (or takes DOVETAIL_CLI_BIN, e.g. the release `dovetail` that
`cargo nextest run --workspace --cargo-profile release --no-run` leaves); needs /usr/bin/time
(Debian package `time`).

`--cluster NODES` times instead the whole plan of an existing cluster, the one of the planner's
disruption bench (`planner/engine/benches/disruption.rs --pods-per-node=12 --plan`): NODES
on-demand nodes of five c5/m5/r5 types over three zones, each with its NodeClaim and 12 bound
pods using about 70% of its cpu and memory, nothing pending, the built-in us-east-1 catalog;
`--spread` gives every pod a zone spread (maxSkew 10) over its app. Consolidation is what the
plan computes here.
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


# The disruption bench's node types: (name, vCPU, memory GiB, max pods, family, category,
# generation). Capacity and allocatable follow Karpenter's AWS formulas (7.5% VM memory
# overhead; kube-reserved cpu 6%/1%/0.5%/0.25% per core and 11 MiB per pod + 255 MiB; 100 MiB
# eviction threshold).
TYPES = [("m5.xlarge", 4, 16, 58, "m5", "m", 5), ("m5.2xlarge", 8, 32, 58, "m5", "m", 5),
         ("c5.2xlarge", 8, 16, 58, "c5", "c", 5), ("r5.xlarge", 4, 32, 58, "r5", "r", 5),
         ("m5.4xlarge", 16, 64, 234, "m5", "m", 5)]
BENCH_ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
NOW = 1_795_996_800  # the disruption bench's clock

CLUSTER_POOL = """apiVersion: karpenter.k8s.aws/v1
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
      expireAfter: 720h
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5, m5, r5]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets: [{nodes: "100%"}]
"""


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def shape(vcpu, gib, pods):
    """(cpu m, memory MiB) capacity and allocatable of a type, by Karpenter's AWS formulas."""
    reserved_cpu = 60 + (10 if vcpu > 1 else 0) + 5 * min(max(vcpu - 2, 0), 2) + 2.5 * max(vcpu - 4, 0)
    mem = int(gib * 1024 * (1 - 0.075))
    return (vcpu * 1000, mem), (int(vcpu * 1000 - reserved_cpu), mem - (11 * pods + 255) - 100)


def cluster_docs(nodes, per_node, spread):
    """The disruption bench's cluster as NodeClaim, Node and Pod documents."""
    rng = SplitMix(42)
    claims, pods = [], []
    for i in range(nodes):
        name_t, vcpu, gib, maxpods, family, category, gen = TYPES[i % len(TYPES)]
        zone = BENCH_ZONES[(i // len(TYPES)) % len(BENCH_ZONES)]
        node = f"ip-10-0-{i // 250}-{i % 250}.ec2.internal"
        pid = f"aws:///{zone}/i-{i:017x}"
        (cap_cpu, cap_mem), (al_cpu, al_mem) = shape(vcpu, gib, maxpods)
        created = rfc3339(NOW - rng.range(1, 500) * 3600)
        labels = (f"{{karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: {name_t}, "
                  f"topology.kubernetes.io/zone: {zone}, topology.kubernetes.io/region: us-east-1, "
                  f"karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64, kubernetes.io/os: linux, "
                  f"karpenter.k8s.aws/instance-family: {family}, karpenter.k8s.aws/instance-category: {category}, "
                  f"karpenter.k8s.aws/instance-generation: \"{gen}\", karpenter.k8s.aws/instance-cpu: \"{vcpu}\"")
        resources = (f"capacity: {{cpu: \"{cap_cpu}m\", memory: {cap_mem}Mi, pods: \"{maxpods}\"}}\n"
                     f"  allocatable: {{cpu: \"{al_cpu}m\", memory: {al_mem}Mi, pods: \"{maxpods}\"}}")
        claims.append(
            f"apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: default-{i}\n"
            f"  labels: {labels}}}\n  creationTimestamp: \"{created}\"\n"
            f"spec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n"
            f"  requirements:\n  - {{key: node.kubernetes.io/instance-type, operator: In, values: [{name_t}]}}\n"
            f"status:\n  nodeName: {node}\n  providerID: {pid}\n  {resources}\n")
        claims.append(
            f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n"
            f"  labels: {labels}, kubernetes.io/hostname: {node}, karpenter.sh/registered: \"true\", "
            f"karpenter.sh/initialized: \"true\"}}\n  creationTimestamp: \"{created}\"\n"
            f"spec:\n  providerID: {pid}\nstatus:\n  {resources}\n"
            f"  conditions:\n  - {{type: Ready, status: \"True\"}}\n")
        # ~70% of cpu and memory, split unevenly over the pods.
        target_cpu, target_mem = al_cpu * 7 // 10, al_mem * 7 // 10
        wc = [rng.range(1, 10) for _ in range(per_node)]
        wm = [rng.range(1, 10) for _ in range(per_node)]
        for j in range(per_node):
            app = f"app{(i * 7 + j) % 60}"
            started = rfc3339(NOW - rng.range(1, 50) * 3600)
            extra = ""
            if spread:
                extra = ("\n  topologySpreadConstraints:\n  - {maxSkew: 10, topologyKey: topology.kubernetes.io/zone,"
                         f" whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: {app}}}}}}}")
            pods.append(
                f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {app}-{i}-{j}\n  namespace: default\n"
                f"  labels: {{app: {app}}}\n"
                f"  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {app}, controller: true}}]\n"
                f"spec:\n  nodeName: {node}\n  containers:\n  - name: app\n    image: registry.example/app:1\n"
                f"    resources: {{requests: {{cpu: {target_cpu * wc[j] // sum(wc) // 10 * 10}m, "
                f"memory: {target_mem * wm[j] // sum(wm)}Mi}}}}{extra}\n"
                f"status:\n  phase: Running\n  startTime: \"{started}\"\n")
    return claims, pods


def run(binary, d, files, extra, runs=3):
    """Best wall time of `runs` runs of `dovetail plan`, its user CPU, the peak RSS, the plan."""
    best, user, rss, plan = None, None, 0.0, None
    for _ in range(runs):
        args = [binary, "plan"]
        for f in files:
            args += ["-f", f]
        t0 = time.perf_counter()
        r = subprocess.run(["/usr/bin/time", "-f", "%U %M", "-o", os.path.join(d, "time.txt")]
                           + args + extra + ["--output", "json"], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"dovetail plan failed ({r.returncode}): {r.stderr}")
        plan = json.loads(r.stdout)
        with open(os.path.join(d, "time.txt")) as f:
            u, m = f.read().split()[-2:]
        if best is None or wall < best:
            best, user = wall, float(u)
        rss = max(rss, int(m) / 1024)  # KiB -> MiB, this process only
    return best, user, rss, plan


def cluster_main(binary, nodes, spread):
    print(f"{'nodes':>6} {'pods':>6} {'spread':>6} {'yaml MB':>8} {'wall s (best of 3)':>19} {'user s':>7} "
          f"{'peak RSS MB':>12} {'decisions':>9} {'saves/h':>9}")
    with tempfile.TemporaryDirectory() as d:
        claims, pods = cluster_docs(nodes, 12, spread)
        files = {"pool.yaml": CLUSTER_POOL, "nodes.yaml": "---\n".join(claims), "pods.yaml": "---\n".join(pods)}
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        size_mb = sum(os.path.getsize(os.path.join(d, x)) for x in files) / 1e6
        best, user, rss, plan = run(binary, d, [os.path.join(d, x) for x in files], ["--now", rfc3339(NOW)])
        decisions = plan.get("disruptions", plan.get("decisions", []))
        saves = sum(x.get("savingsPerHour", 0) for x in decisions) if isinstance(decisions, list) else 0
        print(f"{nodes:>6} {len(pods):>6} {str(spread):>6} {size_mb:>8.1f} {best:>19.3f} {user:>7.3f} {rss:>12.1f} "
              f"{len(decisions) if isinstance(decisions, list) else '?':>9} {saves:>9.3f}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = os.environ.get("DOVETAIL_CLI_BIN")
    if not binary:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "dovetail"], cwd=root, check=True)
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
        binary = os.path.join(target, "release", "dovetail")
    if sys.argv[1:2] == ["--cluster"]:
        cluster_main(binary, int(sys.argv[2]), "--spread" in sys.argv[3:])
        return
    sizes = [int(a) for a in sys.argv[1:]] or [10000]
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
