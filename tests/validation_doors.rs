//! One validation for every door: each rule fed through `dovetail plan`, `dovetail plan
//! --server`, the gRPC `Plan` call and a gRPC `Session`. A broken catalog is refused everywhere,
//! naming the field. An object that breaks a rule is refused by the CLI, which reads the
//! manifests itself, and left out of the plan by both gRPC doors, which name the object and the
//! field in `PlanResponse.excluded` and plan the rest.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use planner::catalog::Catalog;
use planner::model::{ClusterSnapshot, PlanOptions};
use planner_client::{ClientConfig, PlannerClient};
use planner_service::api::{PlannerService, ServiceOptions};
use planner_service::config::Config;
use planner_service::metrics::Metrics;
use planner_wire::CatalogChoice;
use proto::v1 as pb;

const NOW: &str = "2026-11-30T08:00:00Z";
const NOW_UNIX: i64 = 1_796_025_600;

const CATALOG: &str = "instanceTypes:
  - name: m5.large
    cpu: \"2\"
    memory: 8Gi
    pods: 29
    architecture: amd64
    offerings:
      - {zone: us-east-1a, capacityType: on-demand, price: 0.096, available: true}
";

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: c
      resources: {requests: {cpu: 500m, memory: 1Gi}}
";

/// A rule: the manifests that break it, the same break on the model (for the gRPC doors), and
/// the field each door's refusal names.
struct Case {
    name: &'static str,
    manifests: String,
    catalog: String,
    break_model: fn(&mut ClusterSnapshot, &mut Catalog),
    /// What the CLI's message (both backends) must contain.
    cli_field: &'static str,
    /// The gRPC field violation (Plan); a Session names the same path after `snapshot.`. For
    /// an object's rule: the field inside the object both gRPC doors name in `excluded`.
    grpc_field: &'static str,
    /// For an object's rule: the object the gRPC doors leave out (kind, namespace/name).
    excluded: Option<(&'static str, &'static str)>,
}

fn pool_with(spec_extra: &str) -> String {
    POOL.replacen("spec:\n", &format!("spec:\n{spec_extra}"), 1)
}

fn cases() -> Vec<Case> {
    let base = format!("{POOL}---\n{POD}");
    vec![
        Case {
            name: "the same pod twice",
            manifests: format!("{base}---\n{POD}"),
            catalog: CATALOG.into(),
            break_model: |s, _| s.pods.push(s.pods[0].clone()),
            cli_field: "document 3 (Pod default/web): metadata.name: duplicate pod default/web",
            grpc_field: "name",
            excluded: Some(("Pod", "default/web")),
        },
        Case {
            name: "negative quantity",
            manifests: format!("{POOL}---\n{}", POD.replace("cpu: 500m", "cpu: \"-64\"")),
            catalog: CATALOG.into(),
            break_model: |s, _| s.pods[0].requests.cpu = -64_000,
            cli_field: "spec.containers[0].resources.requests.cpu",
            grpc_field: "requests.cpu",
            excluded: Some(("Pod", "default/web")),
        },
        Case {
            name: "weight 101",
            manifests: format!("{}---\n{POD}", pool_with("  weight: 101\n")),
            catalog: CATALOG.into(),
            break_model: |s, _| s.node_pools[0].weight = 101,
            cli_field: "spec.weight",
            grpc_field: "weight",
            excluded: Some(("NodePool", "default")),
        },
        Case {
            name: "restricted requirement key",
            manifests: format!(
                "{}---\n{POD}",
                POOL.replace(
                    "kubernetes.io/arch, operator: In, values: [amd64]",
                    "karpenter.sh/nodepool, operator: In, values: [other]"
                )
            ),
            catalog: CATALOG.into(),
            break_model: |s, _| {
                s.node_pools[0].requirements[0].key = "karpenter.sh/nodepool".into()
            },
            cli_field: "document 1 (NodePool default): spec.template.spec.requirements[0].key",
            grpc_field: "requirements[0].key",
            excluded: Some(("NodePool", "default")),
        },
        Case {
            name: "minValues 51",
            manifests: format!(
                "{}---\n{POD}",
                POOL.replace(
                    "operator: In, values: [amd64]",
                    "operator: Exists, minValues: 51"
                )
            ),
            catalog: CATALOG.into(),
            break_model: |s, _| s.node_pools[0].requirements[0].min_values = Some(51),
            cli_field: "min",
            grpc_field: "requirements[0].min_values",
            excluded: Some(("NodePool", "default")),
        },
        Case {
            name: "invalid budget cron",
            manifests: format!(
                "{}---\n{POD}",
                pool_with(
                    "  disruption:\n    budgets:\n      - {nodes: \"1\", schedule: \"61 * * * *\", duration: 1h}\n"
                )
            ),
            catalog: CATALOG.into(),
            break_model: |s, _| {
                let b = &mut s.node_pools[0].disruption.budgets[0];
                b.schedule = Some("61 * * * *".into());
                b.duration = Some(3600);
            },
            cli_field: "budgets[0].schedule",
            grpc_field: "disruption.budgets[0].schedule",
            excluded: Some(("NodePool", "default")),
        },
        Case {
            name: "expireAfter that would overflow",
            manifests: format!(
                "{}---\n{POD}",
                POOL.replace(
                    "      nodeClassRef",
                    "      expireAfter: 2562047h\n      nodeClassRef"
                )
            ),
            catalog: CATALOG.into(),
            break_model: |s, _| s.node_pools[0].expire_after = Some(i64::MAX),
            cli_field: "expire",
            grpc_field: "expire_after",
            excluded: Some(("NodePool", "default")),
        },
        Case {
            name: "duplicate NodePool names",
            manifests: format!("{base}---\n{POOL}"),
            catalog: CATALOG.into(),
            break_model: |s, _| s.node_pools.push(s.node_pools[0].clone()),
            cli_field: "document 3 (NodePool default): metadata.name: duplicate NodePool default",
            grpc_field: "name",
            excluded: Some(("NodePool", "default")),
        },
        Case {
            name: "hostPort out of range",
            manifests: format!(
                "{POOL}---\n{}",
                POD.replace(
                    "      resources:",
                    "      ports: [{containerPort: 80, hostPort: 70000}]\n      resources:"
                )
            ),
            catalog: CATALOG.into(),
            break_model: |s, _| {
                s.pods[0].host_ports.push(planner::model::HostPort {
                    ip: "0.0.0.0".into(),
                    protocol: "TCP".into(),
                    port: 70000,
                })
            },
            cli_field: "document 2 (Pod default/web): spec.containers[*].ports[*].hostPort: must be between 1 and 65535, got 70000",
            grpc_field: "host_ports[0].port",
            excluded: Some(("Pod", "default/web")),
        },
        Case {
            name: "catalog type with zero cpu",
            manifests: base.clone(),
            catalog: CATALOG.replace("cpu: \"2\"", "cpu: \"0\""),
            break_model: |_, c| c.instance_types[0].capacity.cpu = 0,
            cli_field: "instanceTypes[0].cpu",
            grpc_field: "catalog.instance_types[0].capacity.cpu",
            excluded: None,
        },
        Case {
            name: "catalog type with an unknown architecture",
            manifests: base.clone(),
            catalog: CATALOG.replace("architecture: amd64", "architecture: sparc"),
            break_model: |_, c| {
                c.instance_types[0]
                    .labels
                    .insert("kubernetes.io/arch".into(), "sparc".into());
            },
            cli_field: "instanceTypes[0].architecture",
            grpc_field: "catalog.instance_types[0].labels[\"kubernetes.io/arch\"]",
            excluded: None,
        },
        Case {
            name: "empty catalog",
            manifests: base.clone(),
            catalog: "instanceTypes: []\n".into(),
            break_model: |_, c| c.instance_types.clear(),
            cli_field: "instanceTypes",
            grpc_field: "catalog.instance_types",
            excluded: None,
        },
    ]
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-doors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
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

async fn start_planner() -> planner_service::server::Running {
    let metrics = Metrics::new();
    let service = PlannerService::new(
        Arc::new(|r: &str| planner::catalog::aws::builtin(r).map_err(|e| e.to_string())),
        metrics.clone(),
        ServiceOptions::default(),
    );
    let config = Config {
        request_timeout: Duration::from_secs(120),
        ..Config::for_tests()
    };
    let running = planner_service::server::start(&config, service, metrics)
        .await
        .expect("planner starts");
    running.set_serving().await;
    running
}

/// What a plan left out: (kind, namespace/name, field).
fn left_out(plan: &pb::PlanResponse) -> Vec<(&str, String, String)> {
    plan.excluded
        .iter()
        .map(|e| {
            let name = if e.namespace.is_empty() {
                e.name.clone()
            } else {
                format!("{}/{}", e.namespace, e.name)
            };
            (e.kind.as_str(), name, e.field.clone())
        })
        .collect()
}

fn field_violation(status: &tonic::Status) -> String {
    use tonic_types::StatusExt as _;
    let details = status.get_error_details();
    details
        .bad_request()
        .and_then(|b| b.field_violations.first())
        .map(|v| v.field.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_door_gives_the_same_verdict() {
    let server = start_planner().await;
    let addr = server.grpc_addr.to_string();
    let client = PlannerClient::connect(ClientConfig::new(vec![addr.clone()]))
        .await
        .expect("client");
    let dir = scratch();
    let mut good = planner_manifests::Reader::new();
    good.add_document_text(&format!("{POOL}---\n{POD}"), "base.yaml")
        .expect("base reads");
    let base = good.finish().expect("base is valid").snapshot;
    let base_catalog = planner::catalog::file::parse(CATALOG, "catalog.yaml").expect("catalog");

    for (i, case) in cases().into_iter().enumerate() {
        let manifests = dir.join(format!("case{i}.yaml"));
        let catalog = dir.join(format!("case{i}-catalog.yaml"));
        std::fs::write(&manifests, &case.manifests).expect("write");
        std::fs::write(&catalog, &case.catalog).expect("write");
        let args = |extra: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = ["plan", "-f"].iter().map(|s| s.to_string()).collect();
            a.push(manifests.display().to_string());
            a.extend(["--instance-types".into(), catalog.display().to_string()]);
            a.extend(["--now".into(), NOW.into(), "--output".into(), "json".into()]);
            a.extend(extra.iter().map(|s| s.to_string()));
            a
        };

        // The CLI, in-process and through --server.
        for extra in [&[][..], &["--server", &addr][..]] {
            let out = dovetail(args(extra)).await;
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{} {extra:?}: expected a refusal, got {err}",
                case.name
            );
            assert!(out.stdout.is_empty(), "{}: no plan on stdout", case.name);
            assert!(
                err.contains(case.cli_field),
                "{} {extra:?}: {err} does not name {}",
                case.name,
                case.cli_field
            );
        }

        // gRPC Plan with the same break on the model.
        let mut snapshot = base.clone();
        let mut cat = base_catalog.clone();
        (case.break_model)(&mut snapshot, &mut cat);
        let options = PlanOptions {
            now: NOW_UNIX,
            ..PlanOptions::default()
        };
        let req = planner_wire::to_wire::plan_request(
            &snapshot,
            &CatalogChoice::Inline(cat.clone()),
            &options,
        );
        let answer = client.plan_request(req).await;
        match case.excluded {
            Some(object) => {
                let plan =
                    answer.unwrap_or_else(|e| panic!("{}: the rest is planned: {e}", case.name));
                assert_eq!(
                    left_out(&plan),
                    [(object.0, object.1.to_string(), case.grpc_field.to_string())],
                    "{}",
                    case.name
                );
            }
            None => {
                let status = match answer {
                    Err(planner_client::Error::Rpc { status, .. }) => status,
                    other => panic!("{}: expected a refusal, got {other:?}", case.name),
                };
                assert_eq!(status.code(), tonic::Code::InvalidArgument, "{}", case.name);
                assert_eq!(field_violation(&status), case.grpc_field, "{}", case.name);
            }
        }

        // gRPC Session: a snapshot, then a batch.
        let wire_snapshot = planner_wire::to_wire::snapshot(&snapshot);
        let wire_catalog = planner_wire::to_wire::catalog(&cat);
        let updates = move || {
            tokio_stream::iter(vec![
                pb::ClusterUpdate {
                    sequence: 1,
                    update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
                        snapshot: Some(wire_snapshot.clone()),
                        catalog_source: Some(pb::session_snapshot::CatalogSource::Catalog(
                            wire_catalog.clone(),
                        )),
                        options: None,
                    })),
                },
                pb::ClusterUpdate {
                    sequence: 2,
                    update: Some(pb::cluster_update::Update::CloseBatch(pb::CloseBatch {
                        now: NOW_UNIX,
                    })),
                },
            ])
        };
        let mut stream = match client.session(updates).await {
            Ok(stream) => Ok(stream),
            Err(planner_client::Error::Rpc { status, .. }) => Err(status),
            Err(e) => panic!("{}: {e}", case.name),
        };
        match case.excluded {
            Some(object) => {
                let plan = match &mut stream {
                    Ok(s) => s.message().await,
                    Err(status) => Err(status.clone()),
                }
                .unwrap_or_else(|e| panic!("{}: the rest is planned: {e:?}", case.name))
                .expect("a plan");
                // The same pod twice has the same uid: the session keys objects by uid, so
                // the second is named by its uid.
                let field = if case.name == "the same pod twice" {
                    "uid"
                } else {
                    case.grpc_field
                };
                assert_eq!(
                    left_out(&plan),
                    [(object.0, object.1.to_string(), field.to_string())],
                    "{}",
                    case.name
                );
            }
            None => {
                let status = match stream {
                    Err(status) => status,
                    Ok(mut stream) => match stream.message().await {
                        Err(status) => status,
                        Ok(m) => panic!("{}: expected a refusal, got {m:?}", case.name),
                    },
                };
                assert_eq!(
                    status.code(),
                    tonic::Code::InvalidArgument,
                    "{}: {status:?}",
                    case.name
                );
                // The session names the field by its path in the client's own message (update
                // 1, a SessionSnapshot).
                assert_eq!(
                    field_violation(&status),
                    format!("snapshot.{}", case.grpc_field),
                    "{}",
                    case.name
                );
                assert!(
                    status.message().starts_with("session update 1: "),
                    "{}: {}",
                    case.name,
                    status.message()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
