//! The live catalog end to end over real gRPC: an actuator (`ActuatorService` with a
//! `LiveCatalog` over a cloud with a fixed catalog) and a planner service with
//! `--catalog-from-actuator` semantics (`PlannerService::with_live_catalog`).
//!
//! - before the first fetch, plans use the built-in catalog and say `builtin:us-east-1`;
//! - after a fetch, plans use the live catalog and name its version (also in the plan JSON);
//! - an unchanged version is not downloaded again;
//! - an insufficient-capacity error removes the offering: the next plan picks the next-cheapest;
//! - a catalog with a bad entry is refused with an error naming the entry, the previous stays.
//!
//! The cloud here is a test double behind `cloud::CloudProvider`; the EC2 reads themselves are
//! tested against moto_server in `actuator/aws/tests/moto.rs`.

mod support;

use service_shell::metrics::Render;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use cloud::{
    CapacityType, CatalogFacts, CloudProvider, Instance, InstanceTypeFacts, InstanceTypeInfo,
    Offering, OfferingKey, ProviderId,
};
use planner::model::{
    ClusterSnapshot, NodePool, Operator, PlanOptions, Pod, Requirement, Resources,
};
use planner_service::api::live_catalog::{FetchError, Fetched};
use planner_wire::CatalogChoice;
use proto::v1 as pb;

/// A cloud whose catalog is `facts` and which has no capacity at all.
#[derive(Default)]
struct FixedCloud {
    facts: Mutex<CatalogFacts>,
}

#[async_trait::async_trait]
impl CloudProvider for FixedCloud {
    async fn create(&self, r: &cloud::LaunchRequest) -> cloud::Result<Instance> {
        Err(cloud::Error::InsufficientCapacity {
            offerings: r.offerings.clone(),
        })
    }
    async fn get(&self, p: &ProviderId) -> cloud::Result<Instance> {
        Err(cloud::Error::NotFound {
            provider_id: p.to_string(),
        })
    }
    async fn list(&self, _: &cloud::ListFilter) -> cloud::Result<Vec<Instance>> {
        Ok(Vec::new())
    }
    async fn delete(&self, p: &ProviderId) -> cloud::Result<()> {
        Err(cloud::Error::NotFound {
            provider_id: p.to_string(),
        })
    }
    async fn instance_types(&self) -> cloud::Result<cloud::Catalog> {
        Ok(self.facts.lock().expect("lock").to_catalog())
    }
    async fn catalog_facts(&self) -> cloud::Result<CatalogFacts> {
        Ok(self.facts.lock().expect("lock").clone())
    }
}

fn facts(types: &[(&str, i64, f64)]) -> CatalogFacts {
    CatalogFacts {
        region: "us-east-1".into(),
        instance_types: types
            .iter()
            .map(|(name, vcpu, spot)| InstanceTypeFacts {
                info: InstanceTypeInfo {
                    name: name.to_string(),
                    vcpu: *vcpu,
                    memory_mib: 8192,
                    architectures: vec!["x86_64".into()],
                    usage_classes: vec!["spot".into()],
                    max_network_interfaces: 3,
                    ipv4_per_interface: 10,
                    ..InstanceTypeInfo::default()
                },
                offerings: ["us-east-1a", "us-east-1b"]
                    .iter()
                    .map(|z| Offering {
                        zone: z.to_string(),
                        capacity_type: "spot".into(),
                        price: *spot,
                        available: true,
                        unpriced: false,
                    })
                    .collect(),
            })
            .collect(),
        notes: vec![],
    }
}

/// One pending pod and a spot-only NodePool.
fn snapshot() -> ClusterSnapshot {
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

async fn plan(
    client: &mut pb::planner_client::PlannerClient<tonic::transport::Channel>,
) -> pb::PlanResponse {
    let options = PlanOptions {
        now: 1_700_000_000,
        ..PlanOptions::default()
    };
    let req = planner_wire::to_wire::plan_request(&snapshot(), &CatalogChoice::Default, &options);
    client.plan(req).await.expect("plan").into_inner()
}

#[tokio::test]
async fn planners_plan_from_the_actuators_live_catalog_by_version() -> anyhow::Result<()> {
    // The actuator side.
    let fixed = Arc::new(FixedCloud {
        facts: Mutex::new(facts(&[("c5.large", 2, 0.03), ("m5.large", 2, 0.035)])),
    });
    let support::Actuator {
        clock,
        metrics: ametrics,
        live,
        marking,
    } = support::live_catalog(fixed.clone());

    // The planner side, with the real engine and the real built-in catalog as the fallback.
    let support::Planner {
        fetcher,
        mut client,
        metrics: pmetrics,
        running,
        dir,
    } = support::serve_live_catalog("live-catalog", clock, ametrics.clone(), live.clone()).await?;

    // 1. Nothing fetched (the actuator has not read its cloud yet): the built-in catalog.
    let e = fetcher.fetch().await.expect_err("actuator has nothing yet");
    assert!(
        matches!(&e, FetchError::Rpc(s) if s.code() == tonic::Code::Unavailable),
        "{e}"
    );
    let p = plan(&mut client).await;
    assert_eq!(p.catalog_version.as_deref(), Some("builtin:us-east-1"));
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("has not been fetched yet")),
        "{:?}",
        p.notes
    );

    // 2. Fetched: plans use the live catalog and name its version.
    live.refresh().await?;
    let Fetched::Updated { version: v1 } = fetcher.fetch().await? else {
        panic!("first fetch downloads");
    };
    let p = plan(&mut client).await;
    assert_eq!(p.catalog_version.as_deref(), Some(v1.as_str()));
    assert_eq!(p.node_claims.len(), 1, "{p:?}");
    assert_eq!(p.node_claims[0].instance_types[0], "c5.large");
    assert!((p.node_claims[0].price - 0.03).abs() < 1e-9, "{p:?}");
    let json = serde_json::to_value(&p)?;
    assert_eq!(json["catalogVersion"], serde_json::json!(v1));

    // 3. Unchanged: not downloaded again.
    assert_eq!(fetcher.fetch().await?, Fetched::Unchanged);
    let text = ametrics.render();
    assert!(
        text.contains(r#"catalog_requests_total{answer="sent"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"catalog_requests_total{answer="unchanged"} 1"#),
        "{text}"
    );

    // 4. No spot capacity for c5.large: marked, the next catalog lacks it, the next plan takes
    //    m5.large.
    let ice = cloud::LaunchRequest {
        client_token: "t".into(),
        offerings: ["us-east-1a", "us-east-1b"]
            .iter()
            .map(|z| OfferingKey {
                instance_type: "c5.large".into(),
                zone: z.to_string(),
                capacity_type: CapacityType::Spot,
            })
            .collect(),
        tags: cloud::Tags::new(),
        node_class: None,
        image_id: None,
        node: None,
    };
    assert!(matches!(
        marking.create(&ice).await,
        Err(cloud::Error::InsufficientCapacity { .. })
    ));
    let Fetched::Updated { version: v2 } = fetcher.fetch().await? else {
        panic!("marks change the catalog");
    };
    assert_ne!(v1, v2);
    let p = plan(&mut client).await;
    assert_eq!(p.catalog_version.as_deref(), Some(v2.as_str()));
    let types: BTreeSet<&str> = p.node_claims[0]
        .instance_types
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(types, BTreeSet::from(["m5.large"]), "{p:?}");
    assert!((p.node_claims[0].price - 0.035).abs() < 1e-9, "{p:?}");

    // 5. A bad entry: the catalog is refused, naming it; the planner keeps v2.
    *fixed.facts.lock().expect("lock") = facts(&[
        ("a1.bad", 0, 0.01),
        ("c5.large", 2, 0.03),
        ("m5.large", 2, 0.035),
    ]);
    live.refresh().await?;
    let e = fetcher.fetch().await.expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("catalog.instance_types[0].vcpu") && msg.contains("a1.bad"),
        "{msg}"
    );
    assert_eq!(fetcher.current().map(|c| c.version), Some(v2.clone()));
    let p = plan(&mut client).await;
    assert_eq!(p.catalog_version.as_deref(), Some(v2.as_str()));
    let text = pmetrics.render();
    assert!(
        text.contains(r#"catalog_fetches_total{outcome="refused"} 1"#),
        "{text}"
    );

    running.shutdown(std::time::Duration::ZERO).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// ARC zonal shifts as the actuator reads them (a test double of `cloud::ZonalShiftSource`;
/// the SDK against the simulator's ARC is `actuator/tests/zonal_shift.rs`).
struct Shifts(Mutex<Vec<cloud::ZonalShift>>);

#[async_trait::async_trait]
impl cloud::ZonalShiftSource for Shifts {
    async fn zonal_shifts(&self) -> cloud::Result<Vec<cloud::ZonalShift>> {
        Ok(self.0.lock().expect("lock").clone())
    }
}

/// [`snapshot`] with a second pod pinned to `us-east-1a` (a `topology.kubernetes.io/zone` node
/// selector).
fn snapshot_with_pinned() -> ClusterSnapshot {
    let mut s = snapshot();
    let mut pinned = s.pods[0].clone();
    pinned.name = "pinned".into();
    pinned.uid = "uid-pinned".into();
    pinned
        .node_selector
        .insert(planner::labels::ZONE.into(), "us-east-1a".into());
    s.pods.push(pinned);
    s
}

/// Karpenter with `ENABLE_ZONAL_SHIFT` (aws/karpenter-provider-aws v1.14.1
/// `designs/zonal-shift.md`: every offering in the impaired zone unavailable; pods whose
/// requirements need it get no launch): the zone the actuator serves as shifted gets no
/// capacity in any plan from its catalog, the pod pinned there none at all, and the plan says
/// which zones it treated as shifted. Before the shift and after it ends the plan is the one a
/// catalog without zonal shifts gives, under the same version.
#[tokio::test]
async fn a_zone_the_live_catalog_says_is_shifted_gets_no_capacity() -> anyhow::Result<()> {
    let fixed = Arc::new(FixedCloud {
        facts: Mutex::new(facts(&[("c5.large", 2, 0.03)])),
    });
    let clock = service_shell::clock::Clock::new();
    let ametrics = actuator::metrics::Metrics::new();
    let source = Arc::new(Shifts(Mutex::new(Vec::new())));
    let shifts = Arc::new(actuator::zonal_shift::ZonalShifts::new(
        source.clone(),
        clock.clone(),
        ametrics.clone(),
    ));
    let marks = Arc::new(actuator::catalog::UnavailableOfferings::new(
        clock.clone(),
        actuator::catalog::DEFAULT_TTL,
    ));
    let live = Arc::new(
        actuator::catalog::LiveCatalog::new(fixed.clone(), marks, ametrics.clone())
            .with_zonal_shifts(shifts.clone()),
    );
    live.refresh().await?;
    shifts.refresh().await?;
    let support::Planner {
        fetcher,
        mut client,
        running,
        dir,
        ..
    } = support::serve_live_catalog("zonal-shift", clock.clone(), ametrics, live.clone()).await?;
    let options = PlanOptions {
        now: 1_700_000_000,
        ..PlanOptions::default()
    };
    let req = planner_wire::to_wire::plan_request(
        &snapshot_with_pinned(),
        &CatalogChoice::Default,
        &options,
    );
    let zones = |p: &pb::PlanResponse| -> BTreeSet<String> {
        p.node_claims.iter().flat_map(|c| c.zones.clone()).collect()
    };

    // No shift: the version is the facts' alone, as without zonal shifts; us-east-1a is used.
    let Fetched::Updated { version: v0 } = fetcher.fetch().await? else {
        panic!("first fetch downloads");
    };
    assert_eq!(
        v0,
        actuator::catalog::version(&live.current().expect("served").facts)
    );
    let before = client.plan(req.clone()).await?.into_inner();
    assert!(zones(&before).contains("us-east-1a"), "{before:?}");
    assert!(before.unschedulable.is_empty(), "{before:?}");
    assert!(
        !before.notes.iter().any(|n| n.contains("zonal shift")),
        "{:?}",
        before.notes
    );

    // us-east-1a shifted away from (its zone ID as ARC names it): a new version; no capacity
    // there, the pinned pod unschedulable, the plan naming the zone.
    *source.0.lock().expect("lock") = vec![cloud::ZonalShift {
        zone_id: "use1-az1".into(),
        zone: Some("us-east-1a".into()),
        expiry: clock.now_secs() + 3600,
        applied: true,
    }];
    shifts.refresh().await?;
    let Fetched::Updated { version: v1 } = fetcher.fetch().await? else {
        panic!("a shift changes the catalog's version");
    };
    assert_ne!(v1, v0);
    let during = client.plan(req.clone()).await?.into_inner();
    assert_eq!(during.catalog_version.as_deref(), Some(v1.as_str()));
    assert_eq!(zones(&during), BTreeSet::from(["us-east-1b".to_string()]));
    let unschedulable: Vec<&str> = during
        .unschedulable
        .iter()
        .map(|u| u.pod.as_str())
        .collect();
    assert_eq!(unschedulable, ["default/pinned"], "{during:?}");
    assert!(
        during
            .notes
            .iter()
            .any(|n| n.contains("zonal shift") && n.contains("us-east-1a")),
        "{:?}",
        during.notes
    );

    // The shift ends: the first version and the first plan again.
    source.0.lock().expect("lock").clear();
    shifts.refresh().await?;
    let Fetched::Updated { version: v2 } = fetcher.fetch().await? else {
        panic!("the end of a shift changes the catalog's version");
    };
    assert_eq!(v2, v0);
    let after = client.plan(req).await?.into_inner();
    assert_eq!(after, before);

    running.shutdown(std::time::Duration::ZERO).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
