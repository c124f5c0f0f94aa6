//! Insufficient capacity and the live catalog: an ICE'd offering fails its claim, is marked for
//! three minutes, is skipped by later launches and left out of the catalog served over
//! `dovetail.v1.Actuator/Catalog` (real gRPC), whose version changes with it; on paused time the
//! offering comes back after exactly three minutes.

mod support;

use service_shell::metrics::Render;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actuator::api::ActuatorService;
use actuator::catalog::{DEFAULT_TTL, LiveCatalog, MarkingCloud, UnavailableOfferings};
use actuator::ledger::ClaimState;
use actuator::metrics::Metrics;
use actuator::worker::{Options, Worker};
use cloud::{
    CapacityType, CatalogFacts, CloudProvider, Instance, InstanceState, InstanceTypeFacts,
    InstanceTypeInfo, Offering, OfferingKey, ProviderId,
};
use proto::v1 as pb;
use service_shell::clock::Clock;
use support::{TestDb, plan};

/// A cloud with a fixed catalog whose `create` has no capacity for the offerings in `full`.
#[derive(Default)]
struct FakeCloud {
    facts: Mutex<CatalogFacts>,
    full: Mutex<BTreeSet<OfferingKey>>,
    creates: AtomicUsize,
    reads: AtomicUsize,
}

fn offering(zone: &str, capacity_type: &str, price: f64) -> Offering {
    Offering {
        zone: zone.into(),
        capacity_type: capacity_type.into(),
        price,
        available: true,
        unpriced: false,
    }
}

fn facts() -> CatalogFacts {
    let t = |name: &str, vcpu: i64, prices: [f64; 2]| InstanceTypeFacts {
        info: InstanceTypeInfo {
            name: name.into(),
            vcpu,
            memory_mib: vcpu * 4096,
            architectures: vec!["x86_64".into()],
            usage_classes: vec!["on-demand".into(), "spot".into()],
            max_network_interfaces: 3,
            ipv4_per_interface: 10,
            ..InstanceTypeInfo::default()
        },
        offerings: vec![
            offering("us-east-1a", "on-demand", prices[0]),
            offering("us-east-1a", "spot", prices[1]),
            offering("us-east-1b", "on-demand", prices[0]),
            offering("us-east-1b", "spot", prices[1]),
        ],
    };
    CatalogFacts {
        region: "us-east-1".into(),
        instance_types: vec![
            t("c5.large", 2, [0.085, 0.03]),
            t("m5.large", 2, [0.096, 0.035]),
        ],
        notes: vec!["fake".into()],
    }
}

fn key(t: &str, zone: &str, ct: CapacityType) -> OfferingKey {
    OfferingKey {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: ct,
    }
}

#[async_trait::async_trait]
impl CloudProvider for FakeCloud {
    async fn create(&self, r: &cloud::LaunchRequest) -> cloud::Result<Instance> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        let full = self.full.lock().expect("lock").clone();
        let Some(o) = r.offerings.iter().find(|o| !full.contains(o)) else {
            return Err(cloud::Error::InsufficientCapacity {
                offerings: r.offerings.clone(),
            });
        };
        Ok(Instance {
            id: "i-1".into(),
            provider_id: ProviderId::new(&o.zone, "i-1"),
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
            state: InstanceState::Running,
            tags: r.tags.clone(),
            private_dns_name: "ip-10-0-0-1.ec2.internal".into(),
            private_ip: "10.0.0.1".into(),
            image_id: None,
            subnet_id: None,
            security_group_ids: Vec::new(),
            launch_time: 0,
            price: 0.1,
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
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.facts.lock().expect("lock").clone())
    }
}

fn offerings_of(c: &pb::LiveCatalog, name: &str) -> Vec<(String, String)> {
    c.instance_types
        .iter()
        .find(|t| t.name == name)
        .map(|t| {
            t.offerings
                .iter()
                .map(|o| (o.zone.clone(), o.capacity_type.clone()))
                .collect()
        })
        .unwrap_or_default()
}

async fn serve(
    svc: ActuatorService,
) -> pb::actuator_client::ActuatorClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc.into_server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    pb::actuator_client::ActuatorClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
}

#[tokio::test]
async fn an_iced_offering_fails_the_claim_and_leaves_the_served_catalog() {
    let db = TestDb::sqlite();
    let ledger = db.ledger().await;
    let clock = Clock::new();
    let metrics = Metrics::new();
    let fake = Arc::new(FakeCloud {
        facts: Mutex::new(facts()),
        ..FakeCloud::default()
    });
    let marks = Arc::new(UnavailableOfferings::new(clock.clone(), DEFAULT_TTL));
    let live = Arc::new(LiveCatalog::new(
        fake.clone(),
        marks.clone(),
        metrics.clone(),
    ));
    let cloud = Arc::new(MarkingCloud::new(
        fake.clone(),
        marks.clone(),
        metrics.clone(),
    ));
    let worker = Worker::new(
        ledger.clone(),
        cloud.clone(),
        clock.clone(),
        metrics.clone(),
        Options {
            owner: "w".into(),
            cluster_name: "test".into(),
            ..Options::default()
        },
    );
    let svc = ActuatorService::new(ledger.clone(), clock, metrics.clone(), worker.waker())
        .with_catalog(live.clone());
    let mut client = serve(svc).await;

    let e = client
        .catalog(pb::CatalogRequest::default())
        .await
        .expect_err("nothing read yet");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    live.refresh().await.expect("read");

    let first = client
        .catalog(pb::CatalogRequest::default())
        .await
        .expect("catalog")
        .into_inner();
    let v1 = first.version.clone();
    assert_eq!(v1.len(), 32, "{v1}");
    let c1 = first.catalog.expect("sent to a caller without a version");
    assert_eq!(offerings_of(&c1, "m5.large").len(), 4);
    assert_eq!(c1.instance_types[1].vcpu, 2, "raw facts, no allocatable");

    let again = client
        .catalog(pb::CatalogRequest {
            known_version: v1.clone(),
        })
        .await
        .expect("catalog")
        .into_inner();
    assert_eq!(again.version, v1);
    assert!(again.catalog.is_none(), "unchanged: not sent again");

    // Every on-demand offering of the claim (m5.large, c5.large × 1a, 1b) has no capacity.
    {
        let mut full = fake.full.lock().expect("lock");
        for t in ["m5.large", "c5.large"] {
            for z in ["us-east-1a", "us-east-1b"] {
                full.insert(key(t, z, CapacityType::OnDemand));
            }
        }
    }
    ledger
        .submit(&plan("p1", &[], &["a"]), 1)
        .await
        .expect("submit");
    worker.round().await.expect("round");
    let a = ledger.claim("a").await.expect("read").expect("a");
    assert_eq!(a.state, ClaimState::Failed, "{a:?}");
    assert!(
        a.failure_reason
            .as_deref()
            .is_some_and(|r| r.contains("insufficient capacity")),
        "{a:?}"
    );
    assert_eq!(fake.creates.load(Ordering::SeqCst), 1);
    assert!(marks.is_unavailable(&key("m5.large", "us-east-1a", CapacityType::OnDemand)));

    // The next catalog has a new version and none of the four offerings; spot is untouched.
    let next = client
        .catalog(pb::CatalogRequest {
            known_version: v1.clone(),
        })
        .await
        .expect("catalog")
        .into_inner();
    assert_ne!(next.version, v1);
    let c2 = next.catalog.expect("changed: sent");
    for t in ["m5.large", "c5.large"] {
        assert_eq!(
            offerings_of(&c2, t),
            [
                ("us-east-1a".to_string(), "spot".to_string()),
                ("us-east-1b".to_string(), "spot".to_string())
            ],
            "{t}"
        );
    }
    assert_eq!(
        fake.reads.load(Ordering::SeqCst),
        1,
        "served from the one read"
    );

    // A relaunch of the same offerings is refused without calling the cloud.
    ledger
        .submit(&plan("p2", &[], &["b"]), 2)
        .await
        .expect("submit");
    worker.round().await.expect("round");
    let b = ledger.claim("b").await.expect("read").expect("b");
    assert_eq!(b.state, ClaimState::Failed);
    assert_eq!(fake.creates.load(Ordering::SeqCst), 1, "no second create");

    let text = metrics.render();
    assert!(
        text.contains("dovetail_actuator_ice_marks_total 4"),
        "{text}"
    );
    assert!(
        text.contains(r#"dovetail_actuator_catalog_requests_total{answer="unchanged"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"dovetail_actuator_catalog_refreshes_total{outcome="ok"} 1"#),
        "{text}"
    );
    db.drop().await;
}

#[tokio::test(start_paused = true)]
async fn a_marked_offering_is_back_after_three_minutes() {
    let clock = Clock::at(Duration::from_secs(1_700_000_000));
    let metrics = Metrics::new();
    let fake = Arc::new(FakeCloud {
        facts: Mutex::new(facts()),
        ..FakeCloud::default()
    });
    fake.full
        .lock()
        .expect("lock")
        .insert(key("m5.large", "us-east-1a", CapacityType::Spot));
    let marks = Arc::new(UnavailableOfferings::new(clock, DEFAULT_TTL));
    let live = LiveCatalog::new(fake.clone(), marks.clone(), metrics.clone());
    let cloud = MarkingCloud::new(fake.clone(), marks, metrics);
    live.refresh().await.expect("read");
    let before = live.current().expect("served");

    let request = cloud::LaunchRequest {
        client_token: "t".into(),
        offerings: vec![key("m5.large", "us-east-1a", CapacityType::Spot)],
        tags: cloud::Tags::new(),
        node_class: None,
        image_id: None,
        node: None,
    };
    let e = cloud.create(&request).await.expect_err("no capacity");
    assert!(
        matches!(e, cloud::Error::InsufficientCapacity { .. }),
        "{e}"
    );

    let spot_1a = |s: &actuator::catalog::Served| {
        s.facts
            .instance_types
            .iter()
            .find(|t| t.info.name == "m5.large")
            .expect("m5.large")
            .offerings
            .iter()
            .any(|o| o.zone == "us-east-1a" && o.capacity_type == "spot")
    };
    let during = live.current().expect("served");
    assert!(!spot_1a(&during), "marked: absent");
    assert_ne!(during.version, before.version);
    let instance_types = cloud.instance_types().await.expect("types");
    let m5 = instance_types.get("m5.large").expect("m5.large");
    assert!(
        m5.offerings
            .iter()
            .any(|o| o.zone == "us-east-1a" && o.capacity_type == "spot" && !o.available),
        "instance_types reports it unavailable"
    );

    tokio::time::advance(Duration::from_secs(179)).await;
    assert!(!spot_1a(&live.current().expect("served")), "still marked");
    tokio::time::advance(Duration::from_secs(1)).await;
    let after = live.current().expect("served");
    assert!(spot_1a(&after), "back after three minutes");
    assert_eq!(after.version, before.version, "same content, same version");
    assert_eq!(fake.reads.load(Ordering::SeqCst), 1, "no new read needed");
}
