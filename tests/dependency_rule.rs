//! The dependency rule (ARCHITECTURE.md): the services, the simulator and the crates they share
//! never depend on the planner engine (`planner`) or the planner service, through any chain of
//! normal dependencies; the engine depends on no workspace crate but `common`; the wire
//! contract's client side (`proto`, `planner-client`) and the shared crates link no engine.
//! Read from `cargo metadata`'s resolved graph.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// The workspace's packages, and package name → the names of its normal (non-dev, non-build)
/// dependencies.
struct Graph {
    members: BTreeSet<String>,
    deps: BTreeMap<String, BTreeSet<String>>,
}

fn normal_graph() -> Graph {
    // The graph for this machine's platform (other platforms' crates are not downloaded).
    let rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let rustc = String::from_utf8_lossy(&rustc.stdout).into_owned();
    let host = rustc
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().expect("id"),
                p["name"].as_str().expect("name"),
            )
        })
        .collect();
    let members = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .map(|id| names[id.as_str().expect("id")].to_string())
        .collect();
    let mut graph = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve.nodes") {
        let name = names[node["id"].as_str().expect("id")].to_string();
        let deps: BTreeSet<String> = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k["kind"].is_null()))
            })
            .map(|d| names[d["pkg"].as_str().expect("pkg")].to_string())
            .collect();
        graph.entry(name).or_insert_with(BTreeSet::new).extend(deps);
    }
    Graph {
        members,
        deps: graph,
    }
}

/// Every package `root` reaches through normal dependencies.
fn reach(graph: &Graph, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(p) = todo.pop() {
        for d in graph.deps.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn services_and_shared_crates_never_reach_the_engine() {
    let graph = normal_graph();
    for krate in [
        "common",
        "proto",
        "cloud",
        "cloud-aws",
        "simulator",
        "watcher",
        "crds",
        "k8s-reader",
        "actuator",
        "planner-client",
        "service-shell",
        "test-support",
    ] {
        assert!(
            graph.members.contains(krate),
            "{krate} is not a workspace package any more"
        );
        let reached = reach(&graph, krate);
        for forbidden in ["planner", "planner-service", "planner-wire"] {
            assert!(
                !reached.contains(forbidden),
                "{krate} depends on {forbidden} (see `cargo tree -e normal -p {krate} -i {forbidden}`)"
            );
        }
    }
}

#[test]
fn the_engine_depends_on_no_service_or_wire_crate() {
    let graph = normal_graph();
    let reached = reach(&graph, "planner");
    let bad: Vec<&String> = reached
        .iter()
        .filter(|p| graph.members.contains(*p) && *p != "common")
        .collect();
    assert!(bad.is_empty(), "the engine depends on {bad:?}");
    // No Kubernetes types either: objects reach the engine as its model, converted by
    // `k8s-reader` and `planner-wire` (through `planner-manifests` for `dovetail plan`).
    for heavy in [
        "tokio",
        "tonic",
        "kube",
        "k8s-openapi",
        "aws-sdk-ec2",
        "sqlx",
        "prost",
    ] {
        assert!(!reached.contains(heavy), "the engine depends on {heavy}");
    }
}

/// `dovetail` without its `demo` feature (`cargo install --no-default-features`): plan, crds and
/// `--server` without the AWS SDK, the ledger's database drivers, a Kubernetes client or a
/// server stack.
#[test]
fn the_cli_without_the_demo_links_no_cloud_database_or_cluster_client() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "dovetail",
            "--no-default-features",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: BTreeSet<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    for heavy in [
        "aws-sdk-ec2",
        "aws-config",
        "sqlx",
        "kube-client",
        "kube-runtime",
        "axum",
        "planner-service",
        "actuator",
        "watcher",
        "simulator",
    ] {
        assert!(!crates.contains(heavy), "the slim dovetail links {heavy}");
    }
    // `plan` reads files through the running system's reader: Kubernetes' types and
    // `k8s-reader` are in the slim binary, a Kubernetes client is not.
    assert!(
        crates.contains("planner")
            && crates.contains("planner-client")
            && crates.contains("planner-manifests")
            && crates.contains("k8s-reader"),
        "{tree}"
    );
}
