//! ARC zonal shift in the running system: the watcher, two planners (`--catalog-from-actuator`)
//! and the actuator (`--enable-zonal-shift`, reading the simulator's ARC every second) as
//! processes, EC2 on moto_server, the simulated cluster (`integration_tests::system`). Pods
//! prefer `us-east-1a` (a preferred node affinity, weight 100):
//!
//! 1. no shift: the NodeClaim is in `us-east-1a`: enabling zonal shift changes no plan;
//! 2. a user shifts the cluster away from `us-east-1a` (`StartZonalShift`): the Node there gets
//!    Karpenter's `DisruptionBlocked` Event naming the shift, and a new NodeClaim for pods that
//!    prefer `us-east-1a` goes to another zone;
//! 3. both nodes emptied: consolidation removes the one outside the shifted zone and keeps the
//!    one in it;
//! 4. the shift cancelled (`CancelZonalShift`): the empty node in `us-east-1a` is consolidated.
//!
//! The NodePool gets Karpenter's `ZonalShiftActive` and `ZonalShiftCleared` Events
//! (`pkg/controllers/arczonalshift/controller.go`).
//!
//! As aws/karpenter-provider-aws v1.14.1 `designs/zonal-shift.md` (requirements 1 and 2: no
//! provisioning and no voluntary disruption in the impaired zone) and `pkg/providers/
//! arczonalshift` (GetManagedResource with the cluster's ARN). Moto serves no ARC
//! (`actuator/tests/zonal_shift.rs` shows it), so ARC is the simulator's, with moto's zone IDs.
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use integration_tests::system::{Options, POLL, System, WAIT};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use test_support::try_eventually;

const SHIFTED: &str = "us-east-1a";
const ZONE: &str = "topology.kubernetes.io/zone";

/// A Deployment of one pod of `cpu` preferring [`SHIFTED`].
async fn deploy_preferring(sys: &System, name: &str, cpu: &str) -> anyhow::Result<()> {
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [
                            {"key": ZONE, "operator": "In", "values": [SHIFTED]}
                        ]}}
                    ]}},
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]
                }
            }
        }
    }))?;
    Api::<Deployment>::namespaced(sys.kube.clone(), "default")
        .create(&PostParams::default(), &d)
        .await?;
    Ok(())
}

/// The node and zone of `app`'s running pod.
async fn node_of(sys: &System, app: &str) -> anyhow::Result<(String, String)> {
    let pods = Api::<Pod>::namespaced(sys.kube.clone(), "default")
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?;
    let node = pods
        .items
        .iter()
        .find_map(|p| p.spec.as_ref()?.node_name.clone())
        .ok_or_else(|| anyhow::anyhow!("{app} has no node"))?;
    let n = Api::<Node>::all(sys.kube.clone()).get(&node).await?;
    let zone = n
        .metadata
        .labels
        .unwrap_or_default()
        .get(ZONE)
        .cloned()
        .unwrap_or_default();
    Ok((node, zone))
}

/// Waits for an Event `reason` on the NodePool `default` whose message names `zone`.
async fn wait_pool_event(sys: &System, reason: &str, zone: &str) -> anyhow::Result<String> {
    let events: Api<Event> = Api::all(sys.kube.clone());
    let events = &events;
    Ok(try_eventually(
        &format!("{reason} on the NodePool"),
        WAIT,
        POLL,
        || async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|e| {
                (e.reason.as_deref() == Some(reason)
                    && e.involved_object.kind.as_deref() == Some("NodePool")
                    && e.involved_object.name.as_deref() == Some("default"))
                .then_some(e.message?)
                .filter(|m| m.contains(zone))
            })
        },
    )
    .await?)
}

async fn node_exists(sys: &System, name: &str) -> anyhow::Result<bool> {
    Ok(Api::<Node>::all(sys.kube.clone())
        .get_opt(name)
        .await?
        .is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_capacity_and_no_consolidation_in_a_shifted_zone() -> anyhow::Result<()> {
    let mut opts = Options::new("zonal-shift");
    opts.zonal_shift = true;
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };

    // 1. No shift: the preference is honoured.
    deploy_preferring(&sys, "first", "1").await?;
    sys.wait_running("first", 1).await?;
    let (first_node, first_zone) = node_of(&sys, "first").await?;
    assert_eq!(first_zone, SHIFTED, "no shift: the preferred zone");

    // 2. Shifted away from us-east-1a: the node there is blocked from disruption, saying why.
    let shift = sys.start_zonal_shift(SHIFTED).await?;
    let events: Api<Event> = Api::all(sys.kube.clone());
    let first = first_node.as_str();
    let events = &events;
    try_eventually(
        "DisruptionBlocked for the zonal shift on the node in us-east-1a",
        WAIT,
        POLL,
        || async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("DisruptionBlocked")
                        && e.involved_object.name.as_deref() == Some(first)
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains("ARC zonal shift"))
                })
                .then_some(())
        },
    )
    .await?;
    let active = wait_pool_event(&sys, "ZonalShiftActive", SHIFTED).await?;
    assert!(
        active.starts_with("Zonal shift detected: offerings in zone us-east-1a ("),
        "{active}"
    );
    // A pod preferring us-east-1a that does not fit beside the first gets a node elsewhere.
    deploy_preferring(&sys, "second", "1500m").await?;
    sys.wait_running("second", 1).await?;
    let (second_node, second_zone) = node_of(&sys, "second").await?;
    assert_ne!(second_node, first_node);
    assert_ne!(second_zone, SHIFTED, "shifted: another zone");

    // 3. Both nodes empty: consolidation removes the one outside the shifted zone only.
    sys.scale("first", 0).await?;
    sys.scale("second", 0).await?;
    let (sys_ref, second) = (&sys, second_node.as_str());
    try_eventually(
        "the empty node outside the shifted zone consolidated",
        WAIT,
        POLL,
        || async move { (!node_exists(sys_ref, second).await.ok()?).then_some(()) },
    )
    .await?;
    assert!(
        node_exists(&sys, &first_node).await?,
        "the empty node in the shifted zone is kept"
    );

    // 4. The shift cancelled: that node is consolidated too.
    sys.cancel_zonal_shift(&shift).await?;
    let cleared = wait_pool_event(&sys, "ZonalShiftCleared", SHIFTED).await?;
    assert!(
        cleared.ends_with("are restored for this NodePool"),
        "{cleared}"
    );
    try_eventually(
        "the empty node in us-east-1a consolidated once the shift ended",
        WAIT,
        POLL,
        || async move { (!node_exists(sys_ref, first).await.ok()?).then_some(()) },
    )
    .await?;
    sys.finish().await
}
