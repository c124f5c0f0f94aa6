//! Session plans in eu-west-1 from the actuator's live catalog, over real gRPC and the real AWS
//! SDK: the actuator's `LiveCatalog` reads EC2 through `cloud-aws`'s `Ec2Provider` (the
//! production adapter) from the simulator's AWS endpoint in eu-west-1, whose spot prices
//! differ per zone; a planner service with a live catalog serves a `Session` that names its
//! region, as the watcher's does.
//!
//! - before the first fetch the session plans from eu-west-1's built-in catalog and says so
//!   (`builtin:eu-west-1`);
//! - after it, the plan's price is the cheapest zone's spot price (DescribeSpotPriceHistory per
//!   zone) and names the live catalog's version;
//! - a launch that fails with EC2's `InsufficientInstanceCapacity` (through CreateFleet) marks
//!   the offering; the next Session plan lacks that zone and costs the next-cheapest zone's
//!   price;
//! - a request for another region plans from that region's built-in catalog and says why.
//!
//! The simulator, not moto, serves EC2 here: moto answers DescribeSpotPriceHistory with one
//! fixed price (0.00001) for every type and zone and never runs out of capacity, so it can show
//! neither a cheapest zone nor an insufficient-capacity error.

mod support;

use std::sync::Arc;
use std::time::Duration;

use cloud::node_class::{AmiSelectorTerm, NodeClassSpec, SelectorTerm};
use cloud::{CapacityType, CloudProvider, LaunchRequest, NodeSpec, OfferingKey, Tags};
use planner::model::{
    ClusterSnapshot, NodePool, Operator, PlanOptions, Pod, Requirement, Resources,
};
use planner_service::api::live_catalog::Fetched;
use planner_wire::CatalogChoice;
use proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

const REGION: &str = "eu-west-1";
/// m5.large spot per zone: b is the cheapest, then c.
const SPOT: [(&str, f64); 3] = [
    ("eu-west-1a", 0.05),
    ("eu-west-1b", 0.03),
    ("eu-west-1c", 0.04),
];

/// The simulator's sample catalog in eu-west-1, cut to m5.large, spot priced per zone.
fn catalog() -> cloud::Catalog {
    let mut c = simulator::instance_types::sample_catalog(REGION);
    c.instance_types.retain(|t| t.name == "m5.large");
    for o in &mut c.instance_types[0].offerings {
        if o.capacity_type == "spot" {
            o.price = SPOT.iter().find(|(z, _)| *z == o.zone).expect("zone").1;
        }
    }
    c
}

fn spot_pool_snapshot(pods: &[&str]) -> ClusterSnapshot {
    ClusterSnapshot {
        pods: pods
            .iter()
            .map(|name| Pod {
                namespace: "default".into(),
                name: name.to_string(),
                uid: format!("uid-{name}"),
                requests: Resources {
                    pods: 1,
                    ..Resources::cpu_memory(500, 512 << 20)
                },
                ..Pod::default()
            })
            .collect(),
        node_pools: vec![NodePool {
            name: "default".into(),
            requirements: vec![Requirement {
                key: planner::labels::CAPACITY_TYPE.into(),
                operator: Operator::In,
                values: vec!["spot".into()],
                min_values: None,
            }],
            ..NodePool::default()
        }],
        ..ClusterSnapshot::default()
    }
}

/// Karpenter's getting-started EC2NodeClass against the simulator's network.
fn node() -> NodeSpec {
    let discovery = Tags::from([("karpenter.sh/discovery".to_string(), "demo".to_string())]);
    NodeSpec {
        class: NodeClassSpec {
            name: "default".into(),
            ami_selector_terms: vec![AmiSelectorTerm {
                alias: Some("al2023@latest".into()),
                ..AmiSelectorTerm::default()
            }],
            subnet_selector_terms: vec![SelectorTerm {
                tags: discovery.clone(),
                ..SelectorTerm::default()
            }],
            security_group_selector_terms: vec![SelectorTerm {
                tags: discovery,
                ..SelectorTerm::default()
            }],
            role: Some("KarpenterNodeRole-demo".into()),
            ..NodeClassSpec::default()
        },
        labels: [("karpenter.sh/nodepool".to_string(), "default".to_string())].into(),
        taints: vec![],
    }
}

type Tx = mpsc::Sender<pb::ClusterUpdate>;

async fn next_plan(stream: &mut tonic::Streaming<pb::PlanResponse>) -> pb::PlanResponse {
    tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .expect("a plan in time")
        .expect("the stream is open")
        .expect("a plan, not an error")
}

async fn close(tx: &Tx, sequence: u64) {
    tx.send(pb::ClusterUpdate {
        sequence,
        update: Some(pb::cluster_update::Update::CloseBatch(pb::CloseBatch {
            now: 1_700_000_000,
        })),
    })
    .await
    .expect("send");
}

fn claim_zones(p: &pb::PlanResponse) -> Vec<&str> {
    assert_eq!(p.node_claims.len(), 1, "{p:?}");
    p.node_claims[0].zones.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn session_plans_in_eu_west_1_use_live_zone_prices_and_drop_marked_offerings()
-> anyhow::Result<()> {
    let sim = simulator::Simulation::start(simulator::Config {
        catalog: catalog(),
        cloud: simulator::cloud::CloudConfig {
            region: REGION.into(),
            ..Default::default()
        },
        scheduler: false,
        controllers: false,
        aws: simulator::aws::AwsConfig {
            interruption_queue: None,
            ..Default::default()
        },
        ..Default::default()
    })
    .await?;

    // The actuator side: the production EC2 adapter, as `--cloud aws --aws-region eu-west-1
    // --aws-endpoint <simulator>` builds it.
    let provider: Arc<dyn CloudProvider> =
        Arc::new(support::simulated_ec2(REGION, sim.aws_endpoint()).await);
    let support::Actuator {
        clock,
        metrics: ametrics,
        live,
        marking,
    } = support::live_catalog(provider.clone());

    // The planner side: the real engine, the built-in catalogs as the fallback.
    let support::Planner {
        fetcher,
        mut client,
        running,
        dir,
        ..
    } = support::serve_live_catalog("live-region", clock, ametrics, live.clone()).await?;

    // A Session naming eu-west-1, as the watcher's does.
    let (tx, rx) = mpsc::channel(16);
    let mut stream = client.session(ReceiverStream::new(rx)).await?.into_inner();
    tx.send(pb::ClusterUpdate {
        sequence: 1,
        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
            snapshot: Some(planner_wire::to_wire::snapshot(&spot_pool_snapshot(&[
                "web-0",
            ]))),
            catalog_source: Some(pb::session_snapshot::CatalogSource::CatalogRef(
                pb::CatalogRef {
                    region: REGION.into(),
                },
            )),
            options: None,
        })),
    })
    .await?;

    // 1. Nothing fetched yet: eu-west-1's built-in catalog, and the plan says so.
    close(&tx, 2).await;
    let p = next_plan(&mut stream).await;
    assert_eq!(p.catalog_version.as_deref(), Some("builtin:eu-west-1"));
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("has not been fetched yet")),
        "{:?}",
        p.notes
    );
    assert!(
        claim_zones(&p).iter().all(|z| z.starts_with(REGION)),
        "{p:?}"
    );

    // 2. The live catalog: per-zone spot prices; the claim costs the cheapest zone's price.
    live.refresh().await?;
    let Fetched::Updated { version: v1 } = fetcher.fetch().await? else {
        panic!("first fetch downloads");
    };
    close(&tx, 3).await;
    let p = next_plan(&mut stream).await;
    assert_eq!(p.catalog_version.as_deref(), Some(v1.as_str()));
    assert_eq!(
        claim_zones(&p),
        ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
        "{p:?}"
    );
    assert_eq!(p.node_claims[0].instance_types, ["m5.large"]);
    assert!((p.node_claims[0].price - 0.03).abs() < 1e-9, "{p:?}");

    // 3. eu-west-1b runs out of spot m5.large: CreateFleet fails with
    //    InsufficientInstanceCapacity, the offering is marked, the next Session plan (after one
    //    poll) lacks it and costs eu-west-1c's price.
    let b = OfferingKey {
        instance_type: "m5.large".into(),
        zone: "eu-west-1b".into(),
        capacity_type: CapacityType::Spot,
    };
    sim.cloud().insufficient_capacity(b.clone());
    let launch = LaunchRequest {
        client_token: "ice-1".into(),
        offerings: vec![b],
        tags: Tags::new(),
        node_class: Some("default".into()),
        image_id: None,
        node: Some(node()),
    };
    let e = marking.create(&launch).await.expect_err("no capacity");
    assert!(
        matches!(e, cloud::Error::InsufficientCapacity { .. }),
        "{e:?}"
    );
    let Fetched::Updated { version: v2 } = fetcher.fetch().await? else {
        panic!("the mark changes the catalog");
    };
    assert_ne!(v1, v2);
    close(&tx, 4).await;
    let p = next_plan(&mut stream).await;
    assert_eq!(p.catalog_version.as_deref(), Some(v2.as_str()));
    assert_eq!(claim_zones(&p), ["eu-west-1a", "eu-west-1c"], "{p:?}");
    assert!((p.node_claims[0].price - 0.04).abs() < 1e-9, "{p:?}");

    // 4. Another region: its built-in catalog, with the reason.
    let req = planner_wire::to_wire::plan_request(
        &spot_pool_snapshot(&["other-0"]),
        &CatalogChoice::Builtin {
            region: "us-east-1".into(),
        },
        &PlanOptions {
            now: 1_700_000_000,
            ..PlanOptions::default()
        },
    );
    let p = client.plan(req).await?.into_inner();
    assert_eq!(p.catalog_version.as_deref(), Some("builtin:us-east-1"));
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("live catalog is eu-west-1's, not us-east-1's")),
        "{:?}",
        p.notes
    );
    assert!(
        claim_zones(&p).iter().all(|z| z.starts_with("us-east-1")),
        "{p:?}"
    );

    drop(tx);
    running.shutdown(Duration::ZERO).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
