//! Karpenter's settings reach the plan, in-process and through a planner service: `dovetail
//! plan --reserved-enis --vm-memory-overhead-percent --shifted-zones --ignore-dra-requests` (the
//! pod's `resource_claims` and the option travel on the wire; the snapshot's zonal
//! shift travels on the wire as `ClusterSnapshot.shifted_zones`), and the plan's JSON says which
//! options it was made with. The inputs are the scenario folders of `planner-manifests`
//! (`settings-*`, `zonal-shift-launch`), whose expectations cite the AWS provider's sources.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use planner_service::api::{PlannerService, ServiceOptions};
use planner_service::config::{Auth, Config};
use planner_service::metrics::Metrics;
use serde_json::Value;

/// `name`'s input: a folder of the manifest scenarios, or `karpenter/<area>/<name>` of the
/// Karpenter conformance suite.
fn scenario(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("planner/manifests/tests");
    match name.strip_prefix("karpenter/") {
        Some(rest) => root.join("karpenter").join(rest),
        None => root.join("scenarios").join(name),
    }
    .join("input.yaml")
    .display()
    .to_string()
}

async fn dovetail(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_dovetail"))
            .args(&args)
            .env_remove("DOVETAIL_TOKEN")
            .output()
            .expect("dovetail runs")
    })
    .await
    .expect("joined")
}

async fn plan(input: &str, extra: &[&str], server: Option<&str>) -> Value {
    let mut args: Vec<String> = [
        "plan",
        "-f",
        &scenario(input),
        "--now",
        "2026-01-01T00:00:00Z",
        "--output",
        "json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    if let Some(s) = server {
        args.extend(["--server".to_string(), s.to_string()]);
    }
    let out = dovetail(args).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON plan")
}

fn zones_of_claims(plan: &Value) -> Vec<Value> {
    plan["nodeClaims"]
        .as_array()
        .expect("nodeClaims")
        .iter()
        .map(|c| c["zones"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_and_zonal_shifts_reach_the_plan_locally_and_remotely() {
    let metrics = Metrics::new();
    let service = PlannerService::new(
        Arc::new(|r: &str| planner::catalog::aws::builtin(r).map_err(|e| e.to_string())),
        metrics.clone(),
        ServiceOptions::default(),
    );
    let config = Config {
        request_timeout: Duration::from_secs(120),
        auth: Auth::Disabled,
        instance: "cli-settings".into(),
        ..Config::for_tests()
    };
    let running = planner_service::server::start(&config, service, metrics)
        .await
        .expect("planner starts");
    running.set_serving().await;
    let server = running.grpc_addr.to_string();

    for remote in [None, Some(server.as_str())] {
        // Defaults: one m5.large for 25 pods, and the plan says Karpenter's defaults.
        let p = plan("settings-reserved-enis", &[], remote).await;
        assert_eq!(p["summary"]["newNodeClaims"], 1, "{remote:?}");
        assert_eq!(p["options"]["reservedEnis"], 0);
        assert_eq!(p["options"]["vmMemoryOverheadPercent"], 0.075);
        assert_eq!(p["options"]["preferencePolicy"], "Respect");
        // One ENI reserved: 20 pods per m5.large, two claims.
        let p = plan("settings-reserved-enis", &["--reserved-enis", "1"], remote).await;
        assert_eq!(p["summary"]["newNodeClaims"], 2, "{remote:?}");
        assert_eq!(p["options"]["reservedEnis"], 1);
        // 10% VM overhead: the 6800Mi pod no longer fits m5.large.
        let p = plan(
            "settings-vm-memory-overhead",
            &["--vm-memory-overhead-percent", "0.1"],
            remote,
        )
        .await;
        assert_eq!(
            p["nodeClaims"][0]["instanceTypes"],
            serde_json::json!(["m5.xlarge"]),
            "{remote:?}"
        );
        assert_eq!(p["options"]["vmMemoryOverheadPercent"], 0.1);
        // us-east-1a shifted away from: the claim avoids it, the pinned pod waits.
        let p = plan(
            "zonal-shift-launch",
            &["--shifted-zones", "us-east-1a"],
            remote,
        )
        .await;
        assert_eq!(
            zones_of_claims(&p),
            [serde_json::json!(["us-east-1b"])],
            "{remote:?}"
        );
        assert_eq!(p["unschedulable"][0]["pod"], "default/pinned");
        let p = plan("zonal-shift-launch", &[], remote).await;
        assert!(
            p["unschedulable"].as_array().expect("list").is_empty(),
            "{remote:?}: {p}"
        );
        // Karpenter's ignoreDRARequests, true by default: the pod with a ResourceClaim gets
        // nothing; --ignore-dra-requests=false allocates its claim from the input's
        // cluster-wide ResourceSlice (through the wire too, when remote) and plans it.
        let dra = "karpenter/dra/container-claims-ignored";
        let p = plan(dra, &[], remote).await;
        assert_eq!(p["options"]["ignoreDraRequests"], true, "{remote:?}");
        assert_eq!(p["summary"]["newNodeClaims"], 0, "{remote:?}: {p}");
        assert_eq!(
            p["unschedulable"][0]["reason"],
            "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter",
            "{remote:?}"
        );
        let p = plan(dra, &["--ignore-dra-requests=false"], remote).await;
        assert_eq!(p["options"]["ignoreDraRequests"], false, "{remote:?}");
        assert_eq!(p["summary"]["newNodeClaims"], 1, "{remote:?}: {p}");
    }
    // A bad setting is refused, naming the flag.
    let out = dovetail(vec![
        "plan".into(),
        "-f".into(),
        scenario("settings-reserved-enis"),
        "--vm-memory-overhead-percent".into(),
        "7.5".into(),
    ])
    .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--vm-memory-overhead-percent"), "{err}");
    running.shutdown(Duration::ZERO).await.expect("shutdown");
}
