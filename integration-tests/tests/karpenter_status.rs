//! Status, Events and metrics as Karpenter v1.14 writes them, read as its users read them
//! (`kubectl get -o yaml`, `kubectl describe`, a Prometheus text scrape), through the running
//! system: `dovetail-watcher`, two planners and `dovetail-actuator --cloud aws` as processes,
//! EC2 on moto_server, the simulated cluster (`integration_tests::system`).
//!
//! From Karpenter's code and tests:
//! - NodeClaim `Consolidatable` (`pkg/controllers/nodeclaim/disruption/consolidation.go`,
//!   `consolidation_test.go`: True once `consolidateAfter` has elapsed since the last pod
//!   event) and `DisruptionReason` (`pkg/controllers/disruption/queue.go` `markDisrupted`,
//!   `suite_test.go`: set on the candidates of a command that starts);
//! - the `DisruptionBlocked` Event on the Node and the NodeClaim of a node with
//!   `karpenter.sh/do-not-disrupt: "true"` (`pkg/controllers/disruption/events/events.go`
//!   `Blocked`, message from `pkg/controllers/state/statenode.go` `ValidateNodeDisruptable`);
//! - NodePool `NodeRegistrationHealthy=True` after a registration
//!   (`pkg/controllers/nodeclaim/lifecycle/registration.go`,
//!   `pkg/controllers/nodepool/registrationhealth/suite_test.go`);
//! - `karpenter_nodeclaims_created_total`, `karpenter_nodes_created_total`,
//!   `karpenter_voluntary_disruption_decisions_total`, `karpenter_nodeclaims_disrupted_total`,
//!   `karpenter_nodeclaims_terminated_total`, `karpenter_nodes_terminated_total` (actuator) and
//!   `karpenter_voluntary_disruption_eligible_nodes` (watcher), with Karpenter's labels
//!   (`pkg/metrics/metrics.go`, `pkg/controllers/disruption/metrics.go`);
//! - the pod latency metrics (`karpenter_pods_bound_duration_seconds`, the startup summary, the
//!   `provisioning_*` and scheduling-decision histograms, `pkg/controllers/metrics/pod/`), node
//!   termination metrics (`pkg/controllers/node/termination/metrics.go`), the disruption
//!   evaluation histogram and the consolidation move counter and score histogram of the
//!   planners (`pkg/controllers/disruption/metrics.go`).
//!
//! What moto cannot show: nothing here depends on EC2 beyond launching and terminating.
//! Fails when moto_server or kubectl is missing, unless `DOVETAIL_ALLOW_MISSING` names it.

use std::path::PathBuf;
use std::process::Stdio;

use integration_tests::process;
use integration_tests::system::{self, Options, System, WAIT};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::json;
use test_support::try_eventually;

const CPU: &str = "500m";
const MEMORY: &str = "512Mi";

fn kubectl() -> Option<PathBuf> {
    if let Ok(k) = std::env::var("DOVETAIL_KUBECTL")
        && !k.is_empty()
    {
        return Some(PathBuf::from(k));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file())
    })
}

async fn run(kubectl: &PathBuf, sys: &System, args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(kubectl)
        .arg(format!("--kubeconfig={}", sys.kubeconfig().display()))
        .arg("--request-timeout=10s")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ar(group: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind))
}

/// The value of the first sample of `family` whose labels contain every one of `labels`.
fn sample(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn karpenters_conditions_events_and_metrics_show_through_kubectl_and_scrapes()
-> anyhow::Result<()> {
    let Some(kubectl) = kubectl() else {
        test_support::missing_tool("kubectl", "set DOVETAIL_KUBECTL or put kubectl on PATH");
        return Ok(());
    };
    let mut opts = Options::new("karpenter-status");
    opts.disruption = Some(json!({
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "100%"}]
    }));
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    let result = scenario(&sys, &kubectl).await;
    if result.is_err() {
        sys.print_logs();
    }
    result?;
    sys.finish().await
}

async fn scenario(sys: &System, kubectl: &PathBuf) -> anyhow::Result<()> {
    sys.deploy("web", 24, CPU, MEMORY).await?;
    sys.wait_running("web", 24).await?;
    let big = sys.wait_agreement().await?;
    let actuator = sys.actuator_metrics.expect("the actuator serves metrics");

    // Registrations succeeded: the pool is NodeRegistrationHealthy (Unknown until then).
    let yaml = try_eventually(
        "NodeRegistrationHealthy=True",
        WAIT,
        system::POLL,
        || async move {
            let y = run(kubectl, sys, &["get", "nodepool", "default", "-o", "yaml"])
                .await
                .ok()?;
            // kubectl prints each condition's keys sorted, lastTransitionTime first.
            y.split("- lastTransitionTime")
                .any(|c| {
                    c.contains("type: NodeRegistrationHealthy") && c.contains("status: \"True\"")
                })
                .then_some(y)
        },
    )
    .await?;
    assert!(yaml.contains("reason: NodeRegistrationHealthy"), "{yaml}");

    // The 24 pods were seen pending, planned, bound and started: Karpenter's pod latency
    // metrics (`pkg/controllers/metrics/pod/controller.go`) count each once, from the pods'
    // own condition times.
    let pods = try_eventually(
        "karpenter_pods_* latency metrics of the 24 pods",
        WAIT,
        system::POLL,
        || async move {
            let t = process::scrape(sys.watcher_metrics).await.ok()?;
            let count = |family: &str| sample(&t, family, &[]).unwrap_or(0.0);
            (count("karpenter_pods_bound_duration_seconds_count") >= 24.0
                && count("karpenter_pods_startup_duration_seconds_count") >= 24.0)
                .then_some(t)
        },
    )
    .await?;
    for family in [
        "karpenter_pods_provisioning_bound_duration_seconds_count",
        "karpenter_pods_provisioning_startup_duration_seconds_count",
        "karpenter_pods_scheduling_decision_duration_seconds_count",
    ] {
        assert!(
            sample(&pods, family, &[]).is_some_and(|n| n >= 24.0),
            "{family}: {pods}"
        );
    }
    assert!(
        pods.contains("# TYPE karpenter_pods_startup_duration_seconds summary"),
        "{pods}"
    );
    assert!(
        sample(
            &pods,
            "karpenter_cluster_utilization_percent",
            &[r#"resource_type="cpu""#]
        )
        .is_some_and(|p| p > 0.0 && p <= 100.0),
        "{pods}"
    );

    let text = process::scrape(actuator).await?;
    let created = sample(
        &text,
        "karpenter_nodeclaims_created_total",
        &[
            r#"reason="provisioned""#,
            r#"nodepool="default""#,
            r#"min_values_relaxed="false""#,
        ],
    );
    assert!(
        created.is_some_and(|n| n >= big.instances as f64),
        "{big:?}\n{text}"
    );
    let nodes_created = sample(
        &text,
        "karpenter_nodes_created_total",
        &[r#"nodepool="default""#, "zone=\""],
    );
    assert!(nodes_created.is_some_and(|n| n >= 1.0), "{text}");

    // One node is kept from disruption: Karpenter's DisruptionBlocked Event on it and its claim.
    let nodes: Api<Node> = Api::all(sys.kube.clone());
    let kept = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .min()
        .expect("a node");
    let kept = kept.as_str();
    nodes
        .patch(
            kept,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
            ),
        )
        .await?;
    let message = r#"Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation"#;
    let described = try_eventually(
        "DisruptionBlocked on the Node",
        WAIT,
        system::POLL,
        || async move {
            let d = run(kubectl, sys, &["describe", "node", kept]).await.ok()?;
            (d.contains("DisruptionBlocked") && d.contains(message)).then_some(d)
        },
    )
    .await?;
    assert!(described.contains("Normal"), "{described}");
    let claims = Api::<DynamicObject>::all_with(sys.kube.clone(), &ar("karpenter.sh", "NodeClaim"));
    let kept_claim = claims
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|c| c.data.pointer("/status/nodeName").and_then(|v| v.as_str()) == Some(kept))
        .and_then(|c| c.metadata.name)
        .expect("the kept node's NodeClaim");
    let kept_claim = kept_claim.as_str();
    try_eventually(
        "DisruptionBlocked on the NodeClaim",
        WAIT,
        system::POLL,
        || async move {
            let d = run(kubectl, sys, &["describe", "nodeclaim", kept_claim])
                .await
                .ok()?;
            (d.contains("DisruptionBlocked") && d.contains(message)).then_some(())
        },
    )
    .await?;

    // Scale in: consolidation removes nodes; a claim being disrupted shows DisruptionReason.
    sys.scale("web", 2).await?;
    let big = &big;
    let reasons = std::sync::Mutex::new(std::collections::BTreeSet::<String>::new());
    let reasons = &reasons;
    let claims = &claims;
    try_eventually(
        "fewer instances after the scale-in",
        WAIT,
        system::POLL,
        || async move {
            if let Ok(l) = claims.list(&ListParams::default()).await {
                for c in &l.items {
                    for cond in c
                        .data
                        .pointer("/status/conditions")
                        .and_then(|v| v.as_array())
                        .into_iter()
                        .flatten()
                    {
                        if cond["type"] == "DisruptionReason" {
                            reasons
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .insert(cond["reason"].as_str().unwrap_or_default().to_string());
                        }
                    }
                }
            }
            match sys.agreement().await {
                Ok(a) if a.instances < big.instances => Some(a),
                _ => None,
            }
        },
    )
    .await?;
    sys.wait_running("web", 2).await?;
    sys.wait_agreement().await?;

    // The kept node is still there, still blocked; the claims left are Consolidatable.
    let yaml = try_eventually(
        "Consolidatable on the claims",
        WAIT,
        system::POLL,
        || async move {
            let y = run(
                kubectl,
                sys,
                &["get", "nodeclaim", kept_claim, "-o", "yaml"],
            )
            .await
            .ok()?;
            y.contains("type: Consolidatable").then_some(y)
        },
    )
    .await?;
    assert!(yaml.contains("reason: Consolidatable"), "{yaml}");

    let text = try_eventually(
        "Karpenter's disruption counters",
        WAIT,
        system::POLL,
        || async move {
            let t = process::scrape(actuator).await.ok()?;
            sample(
                &t,
                "karpenter_nodeclaims_terminated_total",
                &[r#"nodepool="default""#],
            )
            .is_some()
            .then_some(t)
        },
    )
    .await?;
    let decisions = sample(
        &text,
        "karpenter_voluntary_disruption_decisions_total",
        &[r#"consolidation_type=""#],
    );
    assert!(decisions.is_some_and(|n| n >= 1.0), "{text}");
    let disrupted = sample(
        &text,
        "karpenter_nodeclaims_disrupted_total",
        &[
            r#"nodepool="default""#,
            r#"consolidation_policy="when_empty_or_underutilized""#,
            r#"termination_mode="graceful""#,
        ],
    );
    assert!(disrupted.is_some_and(|n| n >= 1.0), "{text}");
    assert!(
        sample(
            &text,
            "karpenter_nodes_terminated_total",
            &[r#"nodepool="default""#]
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // Node termination as Karpenter measures it (`pkg/controllers/node/termination`,
    // `pkg/controllers/nodeclaim/lifecycle/metrics.go`).
    const TERMINATION: [&str; 4] = [
        "karpenter_nodes_drained_total",
        "karpenter_nodes_termination_duration_seconds_count",
        "karpenter_nodes_lifetime_duration_seconds_count",
        "karpenter_nodeclaims_termination_duration_seconds_count",
    ];
    try_eventually(
        "Karpenter's node termination metrics",
        WAIT,
        system::POLL,
        || async move {
            let t = process::scrape(actuator).await.ok()?;
            TERMINATION
                .iter()
                .all(|f| sample(&t, f, &[r#"nodepool="default""#]).is_some_and(|n| n >= 1.0))
                .then_some(())
        },
    )
    .await?;
    // Each plan timed its disruption methods (`pkg/controllers/disruption/controller.go`).
    let mut evaluated = 0.0;
    for p in sys.planners.iter().flatten() {
        let t = process::scrape(p.metrics).await?;
        evaluated += sample(
            &t,
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count",
            &[r#"reason="empty""#, r#"consolidation_type="empty""#],
        )
        .unwrap_or(0.0);
    }
    assert!(evaluated >= 1.0, "no plan timed its disruption methods");
    // The planners export Karpenter's consolidation move counter and score histogram
    // (`pkg/controllers/disruption/metrics.go`); every Underutilized decision counts as an
    // approved move of its pool's policy (`balanced.go` `ApproveCommand`). Only Balanced pools
    // are scored, and this pool is not one: no score is observed. (A family with no sample is
    // not in the exposition at all, so a planner that planned no move shows neither.)
    let mut moves = 0.0;
    for p in sys.planners.iter().flatten() {
        let t = process::scrape(p.metrics).await?;
        assert!(
            !t.contains("karpenter_consolidation_score_count{"),
            "a score observed for a pool that is not Balanced: {t}"
        );
        moves += sample(
            &t,
            "karpenter_consolidation_moves_total",
            &[
                r#"decision="approved""#,
                r#"nodepool="default""#,
                r#"policy="WhenEmptyOrUnderutilized""#,
            ],
        )
        .unwrap_or(0.0);
    }
    // Seen on a claim while it was being disrupted (from the taint until the NodeClaim is
    // gone: the drain and the instance's termination, seconds, polled every POLL).
    let reasons = reasons.lock().unwrap_or_else(|p| p.into_inner()).clone();
    eprintln!("DisruptionReason seen on claims being disrupted: {reasons:?}");
    assert!(!reasons.is_empty(), "no claim showed DisruptionReason");
    if reasons.contains("Underutilized") {
        assert!(
            moves >= 1.0,
            "an Underutilized decision ran, yet no move was counted"
        );
    }
    assert!(
        reasons
            .iter()
            .all(|r| ["Empty", "Underutilized"].contains(&r.as_str())),
        "{reasons:?}"
    );

    let watcher = process::scrape(sys.watcher_metrics).await?;
    for reason in ["drifted", "empty", "underutilized"] {
        assert!(
            sample(
                &watcher,
                "karpenter_voluntary_disruption_eligible_nodes",
                &[&format!("reason=\"{reason}\"")]
            )
            .is_some(),
            "{reason}: {watcher}"
        );
    }
    // `pkg/controllers/disruption/helpers.go` `BuildDisruptionBudgetMapping`: the default pool's
    // budget (Karpenter's default `nodes: 10%`, rounded up) per graceful reason.
    for reason in ["Empty", "Drifted", "Underutilized"] {
        assert!(
            sample(
                &watcher,
                "karpenter_nodepools_allowed_disruptions",
                &[r#"nodepool="default""#, &format!("reason=\"{reason}\"")]
            )
            .is_some(),
            "{reason}: {watcher}"
        );
    }
    Ok(())
}

/// The watcher (in-process) against the simulated API, streaming to a real `dovetail-planner`:
/// a claim whose node the NodePool's requirements no longer admit shows Karpenter's
/// `Drifted=True` (reason `RequirementsDrifted`, `pkg/controllers/nodeclaim/disruption/drift.go`,
/// `drift_test.go`); its pool has `consolidateAfter: Never`, so the Node and the NodeClaim get
/// the `Unconsolidatable` Event `NodePool "default" has consolidation disabled`
/// (`pkg/controllers/disruption/consolidation.go` `ShouldDisrupt`); and an EC2NodeClass the
/// planner leaves out (a negative `kubelet.maxPods`, which the CRD refuses, stored
/// skipping validation as a cluster with another schema would have stored it) shows
/// `PlannerValidationSucceeded=False` with the plan's reason and `Ready=False`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_unconsolidatable_and_an_excluded_class_show_on_the_objects() -> anyhow::Result<()> {
    use integration_tests::binary;
    use integration_tests::planner_process::PlannerProcess;
    use k8s_openapi::api::events::v1::Event;
    use kube::api::PostParams;
    use planner_client::{ClientConfig, PlannerClient};
    use std::sync::Arc;
    use std::time::Duration;
    use watcher::app::{self, Settings};

    const WAIT: Duration = Duration::from_secs(60);
    const POLL: Duration = Duration::from_millis(100);
    let bin = binary("planner-service", "dovetail-planner")?;
    let planner = PlannerProcess::start(&bin, &["--insecure-no-auth"]).await?;
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        controllers: false,
        ..Default::default()
    })
    .await?;
    let client = sim.kube_client()?;
    let classes =
        Api::<DynamicObject>::all_with(client.clone(), &ar("karpenter.k8s.aws", "EC2NodeClass"));
    for (name, kubelet) in [("default", json!({})), ("broken", json!({"maxPods": -1}))] {
        let class = json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
            "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "kubelet": kubelet,
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}
        });
        if name == "default" {
            classes
                .create(&PostParams::default(), &serde_json::from_value(class)?)
                .await?;
        } else {
            // The API server refuses it; stored as another schema's server would have.
            let kind = sim
                .store()
                .kinds()
                .find("karpenter.k8s.aws", "v1", "ec2nodeclasses")
                .expect("EC2NodeClasses are served");
            sim.store()
                .create_with(
                    &kind,
                    "",
                    class,
                    simulator::api::validation::Admission::Skip,
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    // What the actuator writes on a resolved class (it does not run here).
    classes
        .patch_status(
            "broken",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]}})),
        )
        .await?;
    let pools = Api::<DynamicObject>::all_with(client.clone(), &ar("karpenter.sh", "NodePool"));
    pools
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"disruption": {"consolidateAfter": "Never"}, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
            }}}
        }))?)
        .await?;
    let labels = json!({
        "karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.sh/capacity-type": "spot", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": "n1"
    });
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "n1", "labels": labels},
                "spec": {"providerID": "aws:///us-east-1a/i-0000000000000001"},
            }))?,
        )
        .await?;
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }})),
        )
        .await?;
    let claims = Api::<DynamicObject>::all_with(client.clone(), &ar("karpenter.sh", "NodeClaim"));
    claims
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-abcde", "labels": labels},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}
        }))?)
        .await?;
    claims
        .patch_status("default-abcde", &PatchParams::default(), &Patch::Merge(json!({"status": {
            "nodeName": "n1", "providerID": "aws:///us-east-1a/i-0000000000000001",
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        }})))
        .await?;

    let planners = PlannerClient::connect(ClientConfig::new(vec![planner.endpoint()])).await?;
    let mut settings = Settings::new("karpenter-status");
    settings.timings.batch_idle = Duration::from_millis(200);
    settings.timings.batch_max = Duration::from_secs(2);
    settings.timings.retry_after = Duration::from_millis(100);
    settings.status_every = Duration::from_millis(500);
    // A plan without new pending pods (as for consolidation) every second, so that a fixed
    // class is seen planned again soon.
    settings.timings.consolidate_every = Duration::from_secs(1);
    let running = app::start(
        client.clone(),
        Arc::new(planners),
        settings,
        watcher::metrics::Metrics::new(),
    );
    // A pending pod closes a batch, so that a plan is made.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "canary", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "app",
                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
        }))?,
    )
    .await?;
    pods.patch_status(
        "canary",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        }})),
    )
    .await?;

    let condition = |obj: &DynamicObject, t: &str| {
        obj.data
            .pointer("/status/conditions")
            .and_then(|v| v.as_array())
            .and_then(|l| l.iter().find(|c| c["type"] == t).cloned())
    };
    let claims = &claims;
    let drifted = try_eventually("Drifted on the claim", WAIT, POLL, || async move {
        let c = claims.get("default-abcde").await.ok()?;
        condition(&c, "Drifted")
    })
    .await?;
    assert_eq!(drifted["status"], "True", "{drifted}");
    assert_eq!(drifted["reason"], "RequirementsDrifted", "{drifted}");
    let launched = condition(&claims.get("default-abcde").await?, "Launched");
    assert!(launched.is_some(), "the actuator's conditions stay");
    // No registration seen yet (no actuator here): Karpenter's initial Unknown.
    let pools = &pools;
    let health = try_eventually(
        "NodeRegistrationHealthy on the pool",
        WAIT,
        POLL,
        || async move {
            let p = pools.get("default").await.ok()?;
            condition(&p, "NodeRegistrationHealthy")
        },
    )
    .await?;
    assert_eq!(health["status"], "Unknown", "{health}");
    assert_eq!(health["reason"], "AwaitingReconciliation", "{health}");

    let events: Api<Event> = Api::all(client.clone());
    let events = &events;
    for (kind, name) in [("Node", "n1"), ("NodeClaim", "default-abcde")] {
        let note = try_eventually(
            &format!("Unconsolidatable on {kind} {name}"),
            WAIT,
            POLL,
            || async move {
                let l = events.list(&Default::default()).await.ok()?;
                l.items.into_iter().find_map(|e| {
                    let r = e.regarding.as_ref()?;
                    (r.kind.as_deref() == Some(kind)
                        && r.name.as_deref() == Some(name)
                        && e.reason.as_deref() == Some("Unconsolidatable"))
                    .then(|| (e.note.unwrap_or_default(), e.type_.unwrap_or_default()))
                })
            },
        )
        .await?;
        assert_eq!(
            note,
            (
                r#"NodePool "default" has consolidation disabled"#.to_string(),
                "Normal".to_string()
            )
        );
    }

    let classes = &classes;
    let verdict = try_eventually(
        "the excluded class's condition",
        WAIT,
        POLL,
        || async move {
            let c = classes.get("broken").await.ok()?;
            condition(&c, "PlannerValidationSucceeded")
        },
    )
    .await?;
    assert_eq!(verdict["status"], "False", "{verdict}");
    assert_eq!(verdict["reason"], "Invalid", "{verdict}");
    assert!(
        verdict["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_pods")),
        "{verdict}"
    );
    let ready = condition(&classes.get("broken").await?, "Ready").expect("Ready");
    assert_eq!(ready["status"], "False", "{ready}");
    assert_eq!(
        ready["message"], "PlannerValidationSucceeded not ready",
        "{ready}"
    );
    let good = classes.get("default").await?;
    assert!(condition(&good, "PlannerValidationSucceeded").is_none());

    // Fixed: the planner uses it again, the condition goes and Ready comes back.
    classes
        .patch(
            "broken",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kubelet": {"maxPods": 20}}})),
        )
        .await?;
    try_eventually("the class planned again", WAIT, POLL, || async move {
        let c = classes.get("broken").await.ok()?;
        (condition(&c, "PlannerValidationSucceeded").is_none()
            && condition(&c, "Ready").is_some_and(|r| r["status"] == "True"))
        .then_some(())
    })
    .await?;
    running.shutdown().await;
    Ok(())
}

/// Nodes that never register: each claim times out (`--registration-timeout 3s`; the simulated
/// kubelet would register only after ten minutes), and once half of the NodePool's last four
/// registrations failed it shows `NodeRegistrationHealthy=False`, reason `RegistrationFailed`
/// (Karpenter's `pkg/controllers/nodeclaim/lifecycle/liveness.go`
/// `updateNodePoolRegistrationHealth`, `pkg/state/nodepoolhealth/tracker.go`), and each timeout
/// counts in `karpenter_nodeclaims_disrupted_total{reason="registration_timeout"}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_that_never_register_make_the_pool_registration_unhealthy() -> anyhow::Result<()> {
    let mut opts = Options::new("registration-health");
    opts.register_after = std::time::Duration::from_secs(600);
    opts.actuator_args = vec!["--registration-timeout".into(), "3s".into()];
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    let result = async {
        sys.deploy("web", 1, CPU, MEMORY).await?;
        let pools =
            Api::<DynamicObject>::all_with(sys.kube.clone(), &ar("karpenter.sh", "NodePool"));
        let pools = &pools;
        let health = try_eventually(
            "NodeRegistrationHealthy=False",
            WAIT,
            system::POLL,
            || async move {
                let p = pools.get("default").await.ok()?;
                p.data
                    .pointer("/status/conditions")?
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "NodeRegistrationHealthy" && c["status"] == "False")
                    .cloned()
            },
        )
        .await?;
        assert_eq!(health["reason"], "RegistrationFailed", "{health}");
        assert_eq!(health["message"], "Failed to register node", "{health}");
        let text = process::scrape(sys.actuator_metrics.expect("metrics")).await?;
        let timeouts = sample(
            &text,
            "karpenter_nodeclaims_disrupted_total",
            &[r#"reason="registration_timeout""#, r#"nodepool="default""#],
        );
        assert!(timeouts.is_some_and(|n| n >= 2.0), "{text}");
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        sys.print_logs();
    }
    result?;
    sys.finish().await
}
