//! Set-up shared by the live-catalog tests (`live_catalog`, `live_catalog_region`,
//! `preview_types`): an actuator serving a live catalog over real gRPC, and a planner service
//! with `--catalog-from-actuator` semantics fetching from it.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test binary uses a part of the shared set-up"
)]

use std::sync::Arc;

use actuator::api::ActuatorService;
use actuator::catalog::{DEFAULT_TTL, LiveCatalog, MarkingCloud, UnavailableOfferings};
use cloud_aws::{Cluster, Config as AwsConfig, Ec2Provider};
use planner_service::api::live_catalog;
use planner_service::api::{PlannerService, ServiceOptions};
use planner_service::config::Config;
use planner_service::server::Running;
use proto::v1 as pb;
use service_shell::auth::AddBearer;
use service_shell::clock::Clock;

/// The actuator's side of a live catalog over `cloud`.
pub struct Actuator {
    /// The actuator's clock.
    pub clock: Clock,
    /// The actuator's metrics.
    pub metrics: actuator::metrics::Metrics,
    /// The live catalog (not read yet).
    pub live: Arc<LiveCatalog>,
    /// `cloud` marking the offerings it has no capacity for in `live`.
    pub marking: MarkingCloud,
}

/// A live catalog over `cloud` with its insufficient-capacity marks, as the actuator builds it.
pub fn live_catalog(cloud: Arc<dyn cloud::CloudProvider>) -> Actuator {
    let clock = Clock::new();
    let metrics = actuator::metrics::Metrics::new();
    let marks = Arc::new(UnavailableOfferings::new(clock.clone(), DEFAULT_TTL));
    let live = Arc::new(LiveCatalog::new(
        cloud.clone(),
        marks.clone(),
        metrics.clone(),
    ));
    let marking = MarkingCloud::new(cloud, marks, metrics.clone());
    Actuator {
        clock,
        metrics,
        live,
        marking,
    }
}

/// A planner service whose catalog comes from an actuator's live catalog.
pub struct Planner {
    /// The planner's live-catalog fetcher (the tests fetch by hand).
    pub fetcher: live_catalog::LiveCatalog,
    /// A client of the planner.
    pub client: pb::planner_client::PlannerClient<tonic::transport::Channel>,
    /// The planner's metrics.
    pub metrics: planner_service::metrics::Metrics,
    /// The planner server, serving.
    pub running: Running,
    /// The directory of the actuator's ledger, for the test to remove.
    pub dir: std::path::PathBuf,
}

/// Serves `live` from an actuator (its ledger SQLite in a fresh temporary directory named for
/// `name`) on a free port, and starts a planner fetching from it, with the real engine and the
/// built-in catalogs as the fallback.
pub async fn serve_live_catalog(
    name: &str,
    clock: Clock,
    metrics: actuator::metrics::Metrics,
    live: Arc<LiveCatalog>,
) -> anyhow::Result<Planner> {
    let dir = std::env::temp_dir().join(format!("dovetail-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let ledger = actuator::ledger::open(&format!("sqlite://{}", dir.join("ledger.db").display()))?;
    ledger.migrate().await?;
    let svc = ActuatorService::new(ledger, clock, metrics, Arc::default()).with_catalog(live);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let actuator_addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc.into_server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let pmetrics = planner_service::metrics::Metrics::new();
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{actuator_addr}"))?.connect_lazy();
    let fetcher = live_catalog::LiveCatalog::new(channel, AddBearer::new(None)?, pmetrics.clone());
    let service = PlannerService::new(
        Arc::new(|region: &str| planner::catalog::aws::builtin(region).map_err(|e| e.to_string())),
        pmetrics.clone(),
        ServiceOptions::default(),
    )
    .with_live_catalog(fetcher.clone());
    let running =
        planner_service::server::start(&Config::for_tests(), service, pmetrics.clone()).await?;
    running.set_serving().await;
    let client =
        pb::planner_client::PlannerClient::connect(format!("http://{}", running.grpc_addr)).await?;
    Ok(Planner {
        fetcher,
        client,
        metrics: pmetrics,
        running,
        dir,
    })
}

/// The production EC2 adapter in `region` over the simulator's AWS endpoint, as `--cloud aws
/// --aws-region <region> --aws-endpoint <simulator>` builds it.
pub async fn simulated_ec2(region: &str, endpoint: String) -> Ec2Provider {
    Ec2Provider::new(
        AwsConfig::new(
            region,
            Cluster {
                name: "demo".into(),
                endpoint: "https://demo.example".into(),
                ca_bundle: Some("Y2EtYnVuZGxl".into()),
                service_cidr: Some("10.100.0.0/16".into()),
                kubernetes_version: "1.33".into(),
            },
        )
        .with_endpoint_url(endpoint)
        .with_static_credentials("simulated", "simulated"),
    )
    .await
}
