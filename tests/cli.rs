//! End-to-end tests of the `dovetail` binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const NOW: &str = "2026-11-30T08:00:00Z";

fn dovetail(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(args)
        .output()
        .expect("dovetail runs")
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

/// A scratch file unique to this test process and name.
fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write scratch file");
    path
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn a_malformed_manifest_exits_2_naming_file_document_and_field() {
    let bad = scratch(
        "bad.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: [{name: a, resources: {requests: {cpu: lots}}}]\n",
    );
    let bad = bad.display().to_string();
    let o = dovetail(&["plan", "-f", &bad, "--output", "json", "--now", NOW]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        o.stdout.is_empty(),
        "nothing is planned from a half-read input"
    );
    let want = format!(
        "error: {bad}: document 2 (Deployment default/web): spec.template.spec.containers[0].resources.requests.cpu: invalid quantity \"lots\""
    );
    assert!(stderr(&o).starts_with(&want), "{}", stderr(&o));
}

#[test]
fn a_missing_file_and_a_bad_flag_value_exit_2() {
    let o = dovetail(&["plan", "-f", "/nonexistent/dovetail.yaml", "--now", NOW]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/nonexistent/dovetail.yaml"),
        "{}",
        stderr(&o)
    );

    let minimal = repo("examples/minimal");
    let o = dovetail(&["plan", "-f", &minimal, "--now", "tomorrow"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--now: invalid RFC 3339 time \"tomorrow\""),
        "{}",
        stderr(&o)
    );

    let o = dovetail(&[
        "plan",
        "-f",
        &minimal,
        "--instance-types",
        "/nonexistent/types.yaml",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--instance-types /nonexistent/types.yaml"),
        "{}",
        stderr(&o)
    );

    let o = dovetail(&["plan", "-f", &minimal, "--preference-policy", "Sometimes"]);
    assert_eq!(o.status.code(), Some(2), "clap usage error");
}

#[test]
fn unknown_kinds_warn_on_stderr_and_the_plan_still_runs() {
    let file = scratch(
        "unknown.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a}]}\n",
    );
    let file = file.display().to_string();
    let o = dovetail(&["plan", "-f", &file, "--output", "json", "--now", NOW]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("warning: skipped 1 object of kind v1 Service not used for planning (first: {file}: document 1 (Service web))")),
        "{err}"
    );
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert!(plan.get("summary").is_some());
}

#[test]
fn a_v1beta1_expiry_in_a_v1_node_pool_is_a_warning_naming_what_v1_uses() {
    let file = scratch(
        "legacy-expiry.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}\n  disruption: {expireAfter: 168h}\n",
    );
    let file = file.display().to_string();
    let o = dovetail(&["plan", "-f", &file, "--output", "json", "--now", NOW]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("warning: {file}: document 1 (NodePool default): NodePool default: spec.disruption.expireAfter (168h) is not read by karpenter.sh/v1 and is ignored; v1 uses spec.template.spec.expireAfter (in force: 720h)")),
        "{err}"
    );
}

#[test]
fn json_output_is_the_contract_shape_and_byte_for_byte_deterministic() {
    let realistic = repo("examples/realistic");
    let args = ["plan", "-f", &realistic, "--output", "json", "--now", NOW];
    let first = dovetail(&args);
    assert!(first.status.success(), "{}", stderr(&first));
    let second = dovetail(&args);
    assert_eq!(first.stdout, second.stdout, "same input, same bytes");
    let text = String::from_utf8(first.stdout).expect("UTF-8");
    assert!(text.ends_with("}\n"), "pretty JSON with a trailing newline");
    assert!(
        text.starts_with("{\n  \"nodeClaims\": ["),
        "2-space indent, camelCase: {text}"
    );
    let plan: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    for key in [
        "nodeClaims",
        "existingNodes",
        "unschedulable",
        "disruptions",
        "summary",
    ] {
        assert!(plan.get(key).is_some(), "missing {key}");
    }
    for key in [
        "pendingPods",
        "scheduledPods",
        "newNodeClaims",
        "costPerHour",
        "lowerBoundCostPerHour",
    ] {
        assert!(plan["summary"].get(key).is_some(), "missing summary.{key}");
    }
}

#[test]
fn standard_input_and_table_output() {
    let text = std::fs::read_to_string(repo("examples/minimal/cluster.yaml")).expect("example");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["plan", "-f", "-", "--output", "table", "--now", NOW])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dovetail runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write stdin");
    let o = child.wait_with_output().expect("dovetail finishes");
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Summary: "), "{out}");
    assert!(
        out.contains("Notes:"),
        "catalog notes are shown in the table: {out}"
    );
}

#[test]
fn a_bad_document_on_stdin_is_named_stdin() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["plan", "-f", "-", "--output", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dovetail runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"metadata: {name: x}\n")
        .expect("write stdin");
    let o = child.wait_with_output().expect("dovetail finishes");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: <stdin>: document 1: apiVersion: missing"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn crds_prints_the_crds_exactly_as_deploy_holds_them() {
    let o = dovetail(&["crds"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let printed = String::from_utf8(o.stdout).expect("utf-8");
    let mut deployed = String::new();
    for name in [
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
        "karpenter.sh_nodeoverlays.yaml",
        "autoscaling.x-k8s.io_capacitybuffers.yaml",
    ] {
        deployed.push_str(
            &std::fs::read_to_string(repo(&format!("deploy/crds/{name}"))).expect("deploy/crds"),
        );
    }
    assert_eq!(printed, deployed);
    assert_eq!(
        printed
            .matches("\nkind: CustomResourceDefinition\n")
            .count(),
        5
    );
}

#[test]
fn crds_output_dir_writes_one_file_per_crd() {
    let dir = std::env::temp_dir().join(format!("dovetail-cli-crds-{}", std::process::id()));
    let o = dovetail(&["crds", "--output-dir", &dir.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for name in [
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
        "karpenter.sh_nodeoverlays.yaml",
        "autoscaling.x-k8s.io_capacitybuffers.yaml",
    ] {
        let written = std::fs::read_to_string(dir.join(name)).expect("written");
        let deployed =
            std::fs::read_to_string(repo(&format!("deploy/crds/{name}"))).expect("deploy");
        assert_eq!(written, deployed, "{name}");
    }
}

/// Inputs `dovetail plan` refused only partly, or not at all, before it read through the
/// running system's conversion: each is refused with exit 2, naming the file, the document,
/// the object and the field, and nothing is planned.
#[test]
fn hostile_and_mistaken_inputs_exit_2_naming_where() {
    let pool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n";
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers: [{name: a, resources: {requests: {cpu: 100m}}}]\n";
    let cases = [
        (
            "4x4Ei",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n    - {name: a, resources: {requests: {memory: 4Ei}}}\n    - {name: b, resources: {requests: {memory: 4Ei}}}\n".to_string(),
            "document 1 (Pod default/big): spec.containers[0].resources.requests.memory: invalid quantity \"4Ei\"",
        ),
        (
            "cpu-sum",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n    - {name: a, resources: {requests: {cpu: \"5000000000000000\"}}}\n    - {name: b, resources: {requests: {cpu: \"5000000000000000\"}}}\n".to_string(),
            "document 1 (Pod default/big): spec.containers: the requests of cpu sum to",
        ),
        (
            "host-port",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a, ports: [{containerPort: 80, hostPort: 70000}]}]\n".to_string(),
            "document 1 (Pod default/p): spec.containers[*].ports[*].hostPort: must be between 1 and 65535, got 70000",
        ),
        (
            "two-deployments",
            format!("{deploy}---\n{deploy}"),
            "document 2 (Deployment default/web): metadata.name: duplicate Deployment default/web",
        ),
        (
            "no-class",
            pool.replace("      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n", "      expireAfter: 720h\n"),
            "document 1 (NodePool default): spec.template.spec.nodeClassRef.group: Required value",
        ),
        (
            "replicas",
            deploy.replace("replicas: 3", "replicas: 1000001"),
            "document 1 (Deployment default/web): spec.replicas: the input expands to at least 1000001 pods, more than the limit of 1000000 (--max-pods)",
        ),
    ];
    for (name, text, want) in cases {
        let file = scratch(&format!("edge-{name}.yaml"), &text)
            .display()
            .to_string();
        let o = dovetail(&["plan", "-f", &file, "--output", "json", "--now", NOW]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{name}: nothing is planned");
        let want = format!("error: {file}: {want}");
        assert!(stderr(&o).starts_with(&want), "{name}: {}", stderr(&o));
    }
}
