//! `dovetail plan --server` prints exactly what the in-process planner prints.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use planner_service::api::{PlannerService, ServiceOptions};
use planner_service::config::{Auth, Config};
use planner_service::metrics::Metrics;

const NOW: &str = "2026-11-30T08:00:00Z";

const CATALOG: &str = "instanceTypes:
  - name: m5.large
    cpu: \"2\"
    memory: 8Gi
    pods: 29
    architecture: amd64
    offerings:
      - {zone: us-east-1a, capacityType: on-demand, price: 0.096, available: true}
      - {zone: us-east-1a, capacityType: spot, price: 0.035, available: true}
  - name: m5.xlarge
    cpu: \"4\"
    memory: 16Gi
    pods: 58
    architecture: amd64
    offerings:
      - {zone: us-east-1b, capacityType: on-demand, price: 0.192, available: true}
";

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
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

async fn start_planner(auth: Auth) -> planner_service::server::Running {
    let metrics = Metrics::new();
    let service = PlannerService::new(
        Arc::new(|r: &str| planner::catalog::aws::builtin(r).map_err(|e| e.to_string())),
        metrics.clone(),
        ServiceOptions::default(),
    );
    let config = Config {
        request_timeout: Duration::from_secs(120),
        auth,
        instance: "cli-test".into(),
        ..Config::for_tests()
    };
    let running = planner_service::server::start(&config, service, metrics)
        .await
        .expect("planner starts");
    running.set_serving().await;
    running
}

fn args(example: &str, output: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "plan",
        "-f",
        &repo(example),
        "--now",
        NOW,
        "--output",
        output,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_and_local_plans_are_byte_identical() {
    let server = start_planner(Auth::Disabled).await;
    // A dead replica first: the call must fail over to the live one.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let servers = format!("{dead},{}", server.grpc_addr);
    for example in ["examples/realistic", "examples/minimal"] {
        for output in ["json", "table"] {
            let local = dovetail(args(example, output, &[])).await;
            assert!(
                local.status.success(),
                "{}",
                String::from_utf8_lossy(&local.stderr)
            );
            let remote = dovetail(args(example, output, &["--server", &servers])).await;
            assert!(
                remote.status.success(),
                "{}",
                String::from_utf8_lossy(&remote.stderr)
            );
            assert!(!local.stdout.is_empty());
            assert_eq!(
                String::from_utf8_lossy(&remote.stdout),
                String::from_utf8_lossy(&local.stdout),
                "{example} --output {output}"
            );
        }
    }
    // Catalog files travel inline.
    let dir = std::env::temp_dir().join(format!("dovetail-cli-remote-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let catalog = dir.join("types.yaml");
    std::fs::write(&catalog, CATALOG).expect("write catalog");
    let catalog = catalog.display().to_string();
    let local = dovetail(args(
        "examples/minimal",
        "json",
        &["--instance-types", &catalog],
    ))
    .await;
    assert!(
        local.status.success(),
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );
    let remote = dovetail(args(
        "examples/minimal",
        "json",
        &["--instance-types", &catalog, "--server", &servers],
    ))
    .await;
    assert!(
        remote.status.success(),
        "{}",
        String::from_utf8_lossy(&remote.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&remote.stdout),
        String::from_utf8_lossy(&local.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_errors_are_clear() {
    let server = start_planner(Auth::Bearer("s3cret".into())).await;
    let addr = server.grpc_addr.to_string();
    let denied = dovetail(args("examples/minimal", "json", &["--server", &addr])).await;
    assert_eq!(denied.status.code(), Some(1));
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(err.contains("Unauthenticated"), "{err}");
    let ok = dovetail(args(
        "examples/minimal",
        "json",
        &["--server", &addr, "--token", "s3cret"],
    ))
    .await;
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let bad = dovetail(args(
        "examples/minimal",
        "json",
        &["--server", "no-port-here"],
    ))
    .await;
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("no-port-here"), "{err}");
}
