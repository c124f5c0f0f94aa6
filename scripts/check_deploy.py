"""Static checks of deploy/ (run by scripts/check-deploy.sh, which installs the tools and renders
the kustomizations first).

    python check_deploy.py --root REPO --rendered FILE [--rendered FILE ...] --versions 1.30.0,...

Checks, each failure naming the file, the object and the field at fault:
- manifests: every rendered object passes `kubernetes-validate --strict` for every supported
  Kubernetes version; instances of the CRDs in deploy/crds are validated against those schemas
  instead; kinds from other operators' CRDs (OPERATOR_KINDS) are skipped with a note. Every
  Deployment runs a workspace binary, non-root with a read-only root filesystem, no privilege
  escalation, ALL capabilities dropped, seccomp RuntimeDefault, CPU and memory requests, and
  grpc.health.v1 readiness and liveness probes.
- crd-examples: the project's NodePools, NodeClaims and EC2NodeClasses (examples/) are accepted
  by the CRD schemas in deploy/crds (the crds crate's validator, watcher/crds/tests/python).
- dashboard: deploy/grafana/dovetail.json loads, and every metric it queries is registered by
  some service's code (`Registry::with_prefix` + `register`, read from the Rust sources).
- dockerfile: every COPY source of deploy/Dockerfile exists, the build context
  (Dockerfile.dockerignore) keeps every workspace member, and its BINARIES are exactly the
  workspace's binaries.

A service whose crate is still a placeholder (its Cargo.toml description says so) has no binary
or metrics yet: what deploy/ says about it is reported as NOT CHECKED instead of failing; once
the crate is built, the same checks apply to it.

Exit status 0 when every check passes, 1 otherwise.
"""

import argparse
import fnmatch
import glob
import json
import os
import re
import shlex
import subprocess
import sys

import kubernetes_validate
import yaml

# Kinds of other operators' CRDs that deploy/ may render; no schema is available offline.
OPERATOR_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}

# The checks, in the order they run.
CHECKS = ["manifests", "crd-examples", "dashboard", "dockerfile"]

# Kinds whose instances the CRD schemas validate, and the example folders searched for them.
EXAMPLE_DIRS = ["examples"]


class Report:
    """Collects failures and notes; prints them as they come."""

    def __init__(self):
        self.failures = []

    def fail(self, check, where, message):
        line = f"FAIL [{check}] {where}: {message}"
        self.failures.append(line)
        print(line)

    def note(self, check, message):
        print(f"NOTE [{check}] {message}")


# === Workspace facts ===


class Workspace:
    """Members, binaries and placeholder crates of the Cargo workspace at `root`."""

    def __init__(self, root):
        out = subprocess.run(
            ["cargo", "metadata", "--no-deps", "--offline", "--format-version", "1",
             "--manifest-path", os.path.join(root, "Cargo.toml")],
            check=True, capture_output=True, text=True).stdout
        meta = json.loads(out)
        self.root = os.path.realpath(root)
        self.members = []
        self.binaries = {}
        self.placeholders = set()
        for pkg in meta["packages"]:
            rel = os.path.relpath(os.path.dirname(os.path.realpath(pkg["manifest_path"])), self.root)
            self.members.append(rel)
            if "placeholder" in (pkg.get("description") or "").lower():
                self.placeholders.add(pkg["name"])
            for target in pkg["targets"]:
                if "bin" in target["kind"]:
                    self.binaries[target["name"]] = pkg["name"]

    def service_of(self, name):
        """`dovetail-watcher` / `dovetail_watcher` -> `watcher`."""
        return re.sub(r"^dovetail[-_]", "", name).split("_")[0]

    def is_placeholder(self, service):
        return service in self.placeholders


# === manifests ===


def crd_schemas(root):
    """{"group/version/Kind": openAPIV3Schema} of deploy/crds."""
    schemas = {}
    for path in sorted(glob.glob(os.path.join(root, "deploy", "crds", "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for version in spec["versions"]:
                    key = f"{spec['group']}/{version['name']}/{spec['names']['kind']}"
                    schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


def describe(doc):
    meta = doc.get("metadata") or {}
    name = meta.get("name", "?")
    if meta.get("namespace"):
        name = f"{meta['namespace']}/{name}"
    return f"{doc.get('kind', '?')} {name}"


def field_path(parts):
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(root)"


def check_workload(report, where, doc, workspace, binaries_seen):
    """Security context, requests, probes and binary of each Deployment's containers."""
    pod = doc["spec"]["template"]["spec"]
    pod_sc = pod.get("securityContext") or {}
    for i, c in enumerate(pod.get("containers", [])):
        at = f"spec.template.spec.containers[{i}]"
        sc = c.get("securityContext") or {}

        def effective(key):
            return sc.get(key, pod_sc.get(key))

        if effective("runAsNonRoot") is not True:
            report.fail("manifests", where, f"{at}.securityContext.runAsNonRoot must be true")
        if sc.get("readOnlyRootFilesystem") is not True:
            report.fail("manifests", where, f"{at}.securityContext.readOnlyRootFilesystem must be true")
        if sc.get("allowPrivilegeEscalation") is not False:
            report.fail("manifests", where, f"{at}.securityContext.allowPrivilegeEscalation must be false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            report.fail("manifests", where, f"{at}.securityContext.capabilities.drop must hold ALL")
        if (effective("seccompProfile") or {}).get("type") != "RuntimeDefault":
            report.fail("manifests", where, f"{at}.securityContext.seccompProfile.type must be RuntimeDefault")
        requests = (c.get("resources") or {}).get("requests") or {}
        for resource in ("cpu", "memory"):
            if resource not in requests:
                report.fail("manifests", where, f"{at}.resources.requests.{resource} is missing")
        for probe in ("readinessProbe", "livenessProbe"):
            if "grpc" not in (c.get(probe) or {}):
                report.fail("manifests", where, f"{at}.{probe} must be a grpc (grpc.health.v1) probe")
        command = c.get("command") or []
        if not command:
            report.fail("manifests", where, f"{at}.command must name the dovetail binary to run")
            continue
        binary = command[0]
        binaries_seen.add(binary)
        if binary not in workspace.binaries:
            service = workspace.service_of(binary)
            if workspace.is_placeholder(service):
                report.note("manifests", f"{where}: {at}.command runs {binary}, NOT CHECKED: crate "
                            f"{service} is still a placeholder")
            else:
                report.fail("manifests", where, f"{at}.command runs {binary!r}, which is not a binary "
                            f"of the workspace ({', '.join(sorted(workspace.binaries))})")


def check_manifests(report, rendered, versions, schemas, workspace):
    """Returns (CRD instances to validate by schema, binaries the Deployments run)."""
    instances = []
    binaries_seen = set()
    for path in rendered:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        if not docs:
            report.fail("manifests", path, "renders no object")
        for n, doc in enumerate(docs, 1):
            where = f"{os.path.basename(path)}: document {n} ({describe(doc)})"
            api, kind = doc.get("apiVersion"), doc.get("kind")
            if f"{api}/{kind}" in schemas:
                instances.append((where, doc))
                continue
            if (api, kind) in OPERATOR_KINDS:
                report.note("manifests", f"{where}: {api} {kind} has no schema offline; not validated")
                continue
            for version in versions:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    report.fail("manifests", where,
                                f"Kubernetes {version}: {field_path(list(e.path))}: {e.message}")
                except kubernetes_validate.SchemaNotFoundError:
                    report.fail("manifests", where,
                                f"Kubernetes {version} has no {api} {kind} (wrong apiVersion or kind?)")
            if kind == "Deployment":
                check_workload(report, where, doc, workspace, binaries_seen)
    return instances, binaries_seen


# === crd-examples ===


def example_instances(root, schemas):
    found = []
    for base in EXAMPLE_DIRS:
        pattern = os.path.join(root, base, "**", "*.y*ml")
        for path in sorted(glob.glob(pattern, recursive=True)):
            with open(path) as f:
                try:
                    docs = list(yaml.safe_load_all(f))
                except yaml.YAMLError as e:
                    found.append((os.path.relpath(path, root), {"unparsable": str(e)}))
                    continue
            for n, doc in enumerate(docs, 1):
                if isinstance(doc, dict) and f"{doc.get('apiVersion')}/{doc.get('kind')}" in schemas:
                    where = f"{os.path.relpath(path, root)}: document {n} ({describe(doc)})"
                    found.append((where, doc))
    return found


def check_crd_instances(report, root, schemas, instances):
    validator = os.path.join(root, "watcher", "crds", "tests", "python", "validate.py")
    docs = []
    for where, doc in instances:
        if "unparsable" in doc:
            report.fail("crd-examples", where, f"cannot be parsed: {doc['unparsable']}")
        else:
            docs.append((where, doc))
    if not docs:
        report.fail("crd-examples", "examples/", "no NodePool, NodeClaim or EC2NodeClass found")
        return
    request = {"schemas": schemas,
               "documents": [{"id": where, "object": doc} for where, doc in docs]}
    out = subprocess.run([sys.executable, validator], input=json.dumps(request),
                         capture_output=True, text=True)
    if out.returncode != 0:
        report.fail("crd-examples", validator, f"validator failed: {out.stderr.strip()}")
        return
    for result in json.loads(out.stdout):
        for error in result["errors"]:
            report.fail("crd-examples", result["id"], f"{error['path']}: {error['message']}")
    print(f"ok [crd-examples] {len(docs)} CRD instances accepted by deploy/crds")


# === dashboard ===

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                "or", "unless", "offset", "inf", "nan"}
SUFFIXES = ("", "_total", "_bucket", "_sum", "_count", "_created")


def rust_sources(root):
    """The workspace's .rs files, without build output or VCS folders."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("target", ".git", "node_modules") and not d.startswith(".")]
        for name in files:
            if name.endswith(".rs"):
                yield os.path.join(folder, name)


def exported_metrics(root):
    """{metric family name: source file} registered with prometheus-client in the workspace."""
    families = {}
    for path in rust_sources(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        prefixes = re.findall(r'(?:Registry::with_prefix|sub_registry_with_prefix)\(\s*"([A-Za-z0-9_]+)"', text)
        if not prefixes:
            continue
        names = re.findall(r'\.register(?:_with_unit)?\(\s*"([A-Za-z0-9_]+)"', text)
        for prefix in prefixes:
            for name in names:
                families[f"{prefix}_{name}"] = os.path.relpath(path, root)
    return families


def promql_metrics(expr):
    """Metric names an expression reads."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = []
    for m in re.finditer(r"(?<![\w$.])([A-Za-z_:][A-Za-z0-9_:]*)\b(\s*\()?", text):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in PROMQL_WORDS:
            continue
        names.append(name)
    return names


def dashboard_exprs(dash):
    """(where, expr, names) for every query of the dashboard."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets") or []:
                if t.get("expr"):
                    out.append((f"panel {p.get('title')!r} target {t.get('refId')}", t["expr"],
                                promql_metrics(t["expr"])))
            walk(p.get("panels") or [])

    walk(dash.get("panels") or [])
    for v in (dash.get("templating") or {}).get("list") or []:
        query = v.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if v.get("type") == "query" and isinstance(query, str):
            m = re.match(r"\s*label_values\(\s*([^,)]+)", query)
            names = promql_metrics(m.group(1)) if m else promql_metrics(query)
            out.append((f"variable {v.get('name')!r}", query, names))
    return out


def check_dashboard(report, root, workspace):
    path = os.path.join(root, "deploy", "grafana", "dovetail.json")
    try:
        with open(path) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        report.fail("dashboard", path, f"does not load: {e}")
        return
    families = exported_metrics(root)
    exported = {family + suffix: family for family in families for suffix in SUFFIXES}
    queries = dashboard_exprs(dash)
    if not queries:
        report.fail("dashboard", path, "queries nothing")
    checked = 0
    for where, expr, names in queries:
        if not names:
            report.fail("dashboard", f"{path}: {where}", f"reads no metric: {expr}")
        for name in names:
            if name in exported:
                checked += 1
                continue
            service = workspace.service_of(name) if name.startswith("dovetail_") else None
            if service and workspace.is_placeholder(service):
                report.note("dashboard", f"{where}: {name} NOT CHECKED: crate {service} is still a placeholder")
                continue
            report.fail("dashboard", f"{path}: {where}",
                        f"{name} is not exported by any service (known: {', '.join(sorted(families))})")
    print(f"ok [dashboard] {checked} metric reads checked against {len(families)} exported families")


# === dockerfile ===


def dockerfile_instructions(path):
    with open(path) as f:
        lines = f.read().split("\n")
    out, current = [], ""
    for line in lines:
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        word, _, rest = current.partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


def ignored(rel, patterns):
    """The .dockerignore pattern that excludes the path `rel` (or one of its parents), if any."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        p = pattern.strip("/")
        if p.startswith("**/"):
            if any(fnmatch.fnmatch(part, p[3:]) for part in parts):
                return pattern
        elif any(fnmatch.fnmatch(prefix, p) for prefix in prefixes):
            return pattern
    return None


def check_dockerfile(report, root, workspace, binaries_seen):
    path = os.path.join(root, "deploy", "Dockerfile")
    if not os.path.exists(path):
        report.fail("dockerfile", path, "missing")
        return
    ignore_path = path + ".dockerignore"
    patterns = []
    if os.path.exists(ignore_path):
        with open(ignore_path) as f:
            patterns = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    binaries = None
    for word, rest in dockerfile_instructions(path):
        if word == "ARG" and rest.startswith("BINARIES="):
            binaries = shlex.split(rest.partition("=")[2])[0].split()
        if word in ("COPY", "ADD"):
            args = shlex.split(rest)
            if any(a.startswith("--from") for a in args):
                continue
            sources = [a for a in args if not a.startswith("--")][:-1]
            if not sources:
                report.fail("dockerfile", path, f"{word} {rest}: no source")
            for src in sources:
                if not glob.glob(os.path.join(root, src)):
                    report.fail("dockerfile", path, f"{word} source {src!r} does not exist in the "
                                "build context (the repository root)")
                elif src not in (".", "./"):
                    rel = os.path.normpath(src)
                    if ignored(rel, patterns):
                        report.fail("dockerfile", path, f"{word} source {src!r} is excluded by "
                                    f"{os.path.basename(ignore_path)}")
    for member in workspace.members:
        rel = "." if member == "." else member
        hit = ignored(rel, patterns) if rel != "." else None
        if hit:
            report.fail("dockerfile", ignore_path, f"excludes workspace member {member} ({hit!r})")
    for needed in ("Cargo.toml", "Cargo.lock", "migrations"):
        if ignored(needed, patterns):
            report.fail("dockerfile", ignore_path, f"excludes {needed}, which the build needs")
    if binaries is None:
        report.fail("dockerfile", path, "no ARG BINARIES=\"...\" naming the binaries to build")
        return
    for b in binaries:
        if b in workspace.binaries:
            continue
        service = workspace.service_of(b)
        if workspace.is_placeholder(service):
            report.note("dockerfile", f"BINARIES names {b}, NOT CHECKED: crate {service} is still a placeholder")
        else:
            report.fail("dockerfile", path, f"BINARIES names {b!r}, which is not a binary of the "
                        f"workspace ({', '.join(sorted(workspace.binaries))})")
    for b in sorted(set(workspace.binaries) - set(binaries)):
        report.fail("dockerfile", path, f"BINARIES misses the workspace binary {b!r} "
                    f"(package {workspace.binaries[b]})")
    for b in sorted(binaries_seen - set(binaries)):
        report.fail("dockerfile", path, f"the manifests run {b!r}, which the image does not contain")
    print(f"ok [dockerfile] binaries {' '.join(binaries)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--rendered", action="append", default=[])
    parser.add_argument("--versions", required=True)
    parser.add_argument("--only", default=",".join(CHECKS),
                        help=f"comma-separated checks to run, of {', '.join(CHECKS)}")
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - set(CHECKS)
    if unknown:
        parser.error(f"--only: unknown checks {sorted(unknown)}")
    # Without the manifests check, the rendered objects are still read (the Dockerfile check
    # compares their binaries) but not validated against Kubernetes' schemas.
    versions = [v for v in args.versions.split(",") if v] if "manifests" in only else []

    report = Report()
    workspace = Workspace(args.root)
    schemas = crd_schemas(args.root)
    if not schemas:
        report.fail("crd-examples", "deploy/crds", "no CustomResourceDefinition found")
    instances, binaries_seen = check_manifests(report, args.rendered, versions, schemas, workspace)
    if versions and not report.failures:
        print(f"ok [manifests] {len(args.rendered)} renderings valid for Kubernetes {', '.join(versions)}")
    if "crd-examples" in only:
        check_crd_instances(report, args.root, schemas, instances + example_instances(args.root, schemas))
    if "dashboard" in only:
        check_dashboard(report, args.root, workspace)
    if "dockerfile" in only:
        check_dockerfile(report, args.root, workspace, binaries_seen)
    if report.failures:
        print(f"\n{len(report.failures)} deploy check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
