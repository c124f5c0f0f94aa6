//! Preview instance types through the live catalog, over real gRPC (aws/karpenter-provider-aws
//! `pkg/providers/instancetype/suite_test.go`, Context "NodeOverlay Preview Instance Pricing").
//!
//! The simulator's EC2 describes a type (`m9p.large`) and offers it in every zone, but neither
//! its spot price history nor its Pricing API nor the built-in table knows a price. The
//! actuator's live catalog (the production `cloud-aws` reads: DescribeInstanceTypes,
//! DescribeInstanceTypeOfferings, DescribeSpotPriceHistory, GetProducts) carries it with its
//! offerings unpriced and unavailable; a planner with `--catalog-from-actuator` never picks it
//! on its own, picks it once a NodeOverlay prices it under the `NodeOverlay` gate, and not
//! when the gate is off.

mod support;

use std::sync::Arc;

use cloud::CloudProvider;
use planner::model::{
    ClusterSnapshot, NodeOverlay, NodePool, Operator, PlanOptions, Pod, PriceChange, Requirement,
    Resources,
};
use planner_service::api::live_catalog::Fetched;
use planner_wire::CatalogChoice;
use proto::v1 as pb;
use simulator::{Config as SimConfig, Simulation};

const PREVIEW: &str = "m9p.large";

/// The simulator's sample catalog plus `m9p.large`: m5.large's shape, offered on demand and as
/// spot in every zone, with no price anywhere.
fn catalog() -> anyhow::Result<planner::catalog::Catalog> {
    let mut c = simulator::instance_types::sample_catalog("us-east-1");
    let m5 = c
        .instance_types
        .iter()
        .find(|t| t.name == "m5.large")
        .ok_or_else(|| anyhow::anyhow!("m5.large in the sample catalog"))?;
    let mut preview = m5.clone();
    preview.name = PREVIEW.into();
    if let Some(v) = preview.labels.get_mut(planner::labels::INSTANCE_TYPE) {
        *v = PREVIEW.into();
    }
    for o in &mut preview.offerings {
        o.price = 0.0;
        o.available = false;
        o.unpriced = true;
    }
    c.instance_types.push(preview);
    Ok(c)
}

fn requirement(key: &str, values: &[&str]) -> Requirement {
    Requirement {
        key: key.into(),
        operator: Operator::In,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

/// One pending pod; a NodePool that may launch m5.large or the preview type on demand; the
/// overlay when given.
fn snapshot(overlay: Option<NodeOverlay>) -> ClusterSnapshot {
    ClusterSnapshot {
        pods: vec![Pod {
            namespace: "default".into(),
            name: "web-0".into(),
            uid: "uid-web-0".into(),
            requests: Resources {
                pods: 1,
                ..Resources::cpu_memory(500, 512 << 20)
            },
            ..Pod::default()
        }],
        node_pools: vec![NodePool {
            name: "default".into(),
            requirements: vec![
                requirement(planner::labels::CAPACITY_TYPE, &["on-demand"]),
                requirement(planner::labels::INSTANCE_TYPE, &["m5.large", PREVIEW]),
            ],
            ..NodePool::default()
        }],
        node_overlays: overlay.into_iter().collect(),
        ..ClusterSnapshot::default()
    }
}

fn preview_price() -> NodeOverlay {
    NodeOverlay {
        name: "preview-price".into(),
        requirements: vec![requirement(planner::labels::INSTANCE_TYPE, &[PREVIEW])],
        price: Some(PriceChange::Price(0.05)),
        ..NodeOverlay::default()
    }
}

async fn plan(
    client: &mut pb::planner_client::PlannerClient<tonic::transport::Channel>,
    snapshot: &ClusterSnapshot,
    gate: bool,
) -> anyhow::Result<pb::PlanResponse> {
    let options = PlanOptions {
        now: 1_700_000_000,
        node_overlay: gate,
        ..PlanOptions::default()
    };
    let req = planner_wire::to_wire::plan_request(snapshot, &CatalogChoice::Default, &options);
    Ok(client.plan(req).await?.into_inner())
}

fn chosen(p: &pb::PlanResponse) -> Vec<String> {
    p.node_claims
        .iter()
        .map(|c| c.instance_types.first().cloned().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_preview_type_from_the_live_catalog_is_chosen_only_when_an_overlay_prices_it()
-> anyhow::Result<()> {
    let sim = Simulation::start(SimConfig {
        catalog: catalog()?,
        ..SimConfig::default()
    })
    .await?;
    let provider = Arc::new(support::simulated_ec2("us-east-1", sim.aws_endpoint()).await);

    // The live catalog as the provider reads it from EC2: the preview type is there, unpriced.
    let facts = provider.catalog_facts().await?;
    let preview = facts
        .instance_types
        .iter()
        .find(|t| t.info.name == PREVIEW)
        .ok_or_else(|| anyhow::anyhow!("{PREVIEW} missing from the live catalog"))?;
    assert!(!preview.offerings.is_empty());
    assert!(
        preview
            .offerings
            .iter()
            .all(|o| o.unpriced && !o.available && o.price == 0.0),
        "{:?}",
        preview.offerings
    );

    // The actuator serves it; a planner fetches it.
    let support::Actuator {
        clock,
        metrics: ametrics,
        live,
        ..
    } = support::live_catalog(provider);
    live.refresh().await?;
    let support::Planner {
        fetcher,
        mut client,
        running,
        dir,
        ..
    } = support::serve_live_catalog("preview", clock, ametrics, live).await?;
    let Fetched::Updated { version } = fetcher.fetch().await? else {
        anyhow::bail!("the first fetch downloads the catalog");
    };

    // No overlay: the preview type is never chosen.
    let p = plan(&mut client, &snapshot(None), true).await?;
    assert_eq!(p.catalog_version.as_deref(), Some(version.as_str()));
    assert_eq!(chosen(&p), ["m5.large"], "{p:?}");

    // An overlay prices it (NodeOverlay gate on): it is available, cheaper, and chosen.
    let p = plan(&mut client, &snapshot(Some(preview_price())), true).await?;
    assert_eq!(chosen(&p), [PREVIEW], "{p:?}");
    assert!((p.node_claims[0].price - 0.05).abs() < 1e-9, "{p:?}");
    assert_eq!(p.node_overlays.len(), 1, "{p:?}");
    assert!(p.node_overlays[0].validation_succeeded, "{p:?}");

    // The same overlay with the gate off changes nothing.
    let p = plan(&mut client, &snapshot(Some(preview_price())), false).await?;
    assert_eq!(chosen(&p), ["m5.large"], "{p:?}");
    assert!(p.node_overlays.is_empty(), "{p:?}");

    running.shutdown(std::time::Duration::ZERO).await?;
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
