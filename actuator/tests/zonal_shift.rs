//! ARC zonal shifts through the real AWS SDK (`aws-sdk-arczonalshift`) against the simulator's
//! AWS endpoint, which serves ARC's REST API for the simulated EKS cluster (moto_server serves no
//! ARC: the last test shows its GetManagedResource fails). A user's `StartZonalShift` away from
//! `us-east-1a`'s zone ID reaches the actuator's reader (`cloud_aws::ArcZonalShifts`: the zone
//! ID named through DescribeAvailabilityZones), the live catalog serves the zone with a new
//! version; a failed GetManagedResource keeps the last answer; `CancelZonalShift` brings the
//! catalog back to the version it had before the shift. As aws/karpenter-provider-aws v1.14.1
//! `pkg/providers/arczonalshift/arczonalshift.go` (GetManagedResource with the cluster ARN) and
//! `pkg/providers/instance/suite_test.go` ("zonal shift": a shift on `tstz1-1a`).

use std::sync::Arc;

use actuator::catalog::{DEFAULT_TTL, LiveCatalog, UnavailableOfferings};
use actuator::metrics::Metrics;
use actuator::zonal_shift::ZonalShifts;
use cloud::ZonalShiftSource;
use cloud_aws::{ArcZonalShifts, Cluster, Config as AwsConfig};
use service_shell::clock::Clock;
use simulator::aws::AwsError;
use simulator::{Config, Simulation};

fn aws_config(endpoint: &str) -> AwsConfig {
    AwsConfig::new(
        "us-east-1",
        Cluster {
            name: "demo".into(),
            endpoint: "https://demo.example".into(),
            kubernetes_version: "1.33".into(),
            ..Cluster::default()
        },
    )
    .with_endpoint_url(endpoint)
    .with_static_credentials("simulated", "simulated")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shift_started_in_arc_reaches_the_served_catalog_and_ends_when_cancelled() {
    let sim = Simulation::start(Config::default())
        .await
        .expect("simulation");
    let config = aws_config(&sim.aws_endpoint());
    let arn = sim.aws().cluster_arn();
    assert_eq!(arn, "arn:aws:eks:us-east-1:123456789012:cluster/demo");
    let zone_id = sim
        .aws()
        .network()
        .subnets
        .iter()
        .find(|s| s.zone == "us-east-1a")
        .map(|s| s.zone_id.clone())
        .expect("a subnet in us-east-1a");
    // What a user runs: `aws arc-zonal-shift start-zonal-shift` / `cancel-zonal-shift`.
    let user = aws_sdk_arczonalshift::Client::new(&config.sdk_config().await);

    let metrics = Metrics::new();
    let clock = Clock::new();
    let shifts = Arc::new(ZonalShifts::new(
        Arc::new(ArcZonalShifts::new(&config, arn.clone(), None).await),
        clock.clone(),
        metrics.clone(),
    ));
    let cloud = Arc::new(cloud_aws::Ec2Provider::new(config.clone()).await);
    let marks = Arc::new(UnavailableOfferings::new(clock, DEFAULT_TTL));
    let live = LiveCatalog::new(cloud, marks, metrics.clone()).with_zonal_shifts(shifts.clone());
    live.refresh().await.expect("catalog read");

    // No shift: nothing shifted, and the version is the catalog's alone.
    shifts.refresh().await.expect("GetManagedResource");
    let before = live.current().expect("served");
    assert!(before.shifted_zones.is_empty());
    assert_eq!(before.version, actuator::catalog::version(&before.facts));

    let started = user
        .start_zonal_shift()
        .resource_identifier(&arn)
        .away_from(&zone_id)
        .expires_in("1h")
        .comment("us-east-1a impaired")
        .send()
        .await
        .expect("StartZonalShift");
    assert_eq!(started.away_from(), zone_id);
    // ARC allows one active zonal shift per resource.
    let second = user
        .start_zonal_shift()
        .resource_identifier(&arn)
        .away_from(&zone_id)
        .expires_in("1h")
        .comment("again")
        .send()
        .await
        .expect_err("a second active shift");
    assert!(
        format!("{second:?}").contains("ConflictException"),
        "{second:?}"
    );

    // The reader names the zone, and the served catalog carries it under a new version.
    let read = ArcZonalShifts::new(&config, arn.clone(), None)
        .await
        .zonal_shifts()
        .await
        .expect("GetManagedResource");
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].zone_id, zone_id);
    assert_eq!(read[0].zone.as_deref(), Some("us-east-1a"));
    assert!(read[0].applied);
    shifts.refresh().await.expect("GetManagedResource");
    let during = live.current().expect("served");
    assert_eq!(during.shifted_zones, ["us-east-1a"]);
    assert_ne!(during.version, before.version);
    assert_eq!(
        during.facts, before.facts,
        "the offerings themselves are kept"
    );

    // A failed read keeps the last answer.
    sim.aws().fail_operation(
        "GetManagedResource",
        AwsError {
            status: 429,
            code: "ThrottlingException".into(),
            message: "Rate exceeded".into(),
        },
    );
    let e = shifts.refresh().await.expect_err("throttled");
    assert_eq!(e.reason(), "throttled", "{e}");
    assert_eq!(
        live.current().expect("served").shifted_zones,
        ["us-east-1a"]
    );
    sim.aws().heal();

    user.cancel_zonal_shift()
        .zonal_shift_id(started.zonal_shift_id())
        .send()
        .await
        .expect("CancelZonalShift");
    shifts.refresh().await.expect("GetManagedResource");
    let after = live.current().expect("served");
    assert!(after.shifted_zones.is_empty());
    assert_eq!(after.version, before.version);

    // A resource ARC does not manage is an error, not an empty answer.
    let unknown = ArcZonalShifts::new(
        &config,
        "arn:aws:eks:us-east-1:123456789012:cluster/other",
        None,
    )
    .await
    .zonal_shifts()
    .await
    .expect_err("not managed");
    assert!(
        unknown.to_string().contains("ResourceNotFoundException"),
        "{unknown}"
    );
    sim.shutdown().await;
}

/// moto_server (the EC2/SSM stand-in of the other tests) has no ARC zonal shift backend: its
/// GetManagedResource is no answer the SDK accepts, so ARC is tested against the simulator.
#[tokio::test]
async fn moto_serves_no_arc_zonal_shift() {
    let Some(moto) = cloud_aws::testing::MotoServer::start_or_skip() else {
        return;
    };
    let e = ArcZonalShifts::new(
        &moto.config(),
        "arn:aws:eks:us-east-1:123456789012:cluster/demo",
        None,
    )
    .await
    .zonal_shifts()
    .await
    .expect_err("moto serves no ARC");
    eprintln!("moto's GetManagedResource: {e}");
}
