//! Shared helpers of the server tests: an in-process server on 127.0.0.1:0.
#![allow(dead_code, unreachable_pub)] // each test binary uses a different subset

use std::sync::Arc;

use planner_service::api::{PlanFn, PlannerService, ServiceOptions};
use planner_service::config::Config;
use planner_service::metrics::Metrics;
use planner_wire::fixtures;
use service_shell::auth::Auth;
use service_shell::server::Running;
use tonic::transport::Channel;

pub fn config(auth: Auth) -> Config {
    Config {
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        auth,
        ..Config::for_tests()
    }
}

/// A service whose built-in catalog for us-east-1 is the small fixture catalog.
pub fn service(metrics: &Metrics, plan_fn: Option<PlanFn>) -> PlannerService {
    let s = PlannerService::new(
        Arc::new(|region: &str| {
            if region == "us-east-1" {
                Ok(fixtures::catalog())
            } else {
                Err(format!("unknown region {region}"))
            }
        }),
        metrics.clone(),
        ServiceOptions {
            session_max_objects: 10_000,
            ..ServiceOptions::default()
        },
    );
    match plan_fn {
        Some(f) => s.with_plan_fn(f),
        None => s,
    }
}

/// A plan function that returns the rich fixture plan, with the pending-pod count of the input.
pub fn fixture_plan_fn() -> PlanFn {
    Arc::new(|snapshot, _catalog, _options| {
        let mut p = fixtures::plan();
        p.summary.pending_pods = snapshot.pods.iter().filter(|p| p.is_pending()).count() as u32;
        p
    })
}

pub struct Server {
    pub running: Running,
    pub metrics: Metrics,
}

pub async fn start(config: Config, service: PlannerService, metrics: Metrics) -> Server {
    let running = planner_service::server::start(&config, service, metrics.clone())
        .await
        .expect("server starts");
    running.set_serving().await;
    Server { running, metrics }
}

pub async fn channel(server: &Server) -> Channel {
    Channel::from_shared(format!("http://{}", server.running.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connects")
}

/// The Prometheus text of the server's `/metrics`.
pub async fn scrape(server: &Server) -> String {
    let addr = server.running.metrics_addr.expect("metrics on");
    test_support::process::scrape(addr)
        .await
        .expect("GET /metrics")
}
