//! The `dovetail-watcher` program: configuration, clients, ports and signals around the
//! library's [`app`](crate::app). [`main`] is the whole binary (`src/main.rs` only calls it), so
//! that another executable can run the watcher as its own process (`dovetail demo` runs
//! `dovetail` as `dovetail-watcher`) with the same start-up as the standalone binary. This is
//! the wiring of a binary: the one module of the library that uses `anyhow`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::{WATCHER_SERVICE, app, leader};
use anyhow::Context;
use planner_client::{ClientConfig, PlannerClient};
use service_shell::cli::EXIT_CONFIG;
use service_shell::server::{self, Spec};

/// Runs the watcher with this process's flags and environment; returns the exit code (64 for a
/// bad configuration, 1 when the watcher fails, 0 after a clean shutdown).
#[tokio::main]
pub async fn main() -> ExitCode {
    let config = match service_shell::cli::start("dovetail-watcher", Config::load) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut client = ClientConfig::new(config.planners.clone());
    client.token = config.planner_token.clone();
    client.tls = config.planner_tls.clone();
    let planners = match PlannerClient::connect(client).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("dovetail-watcher: invalid configuration: --planner / DOVETAIL_PLANNER: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match run(config, Arc::new(planners)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "Watcher failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config, planners: Arc<PlannerClient>) -> anyhow::Result<()> {
    let client = config
        .kubeconfig
        .client()
        .await?
        .context("the watcher needs a cluster")?;
    let metrics = Metrics::new();
    // Health (and reflection) on the health port, /metrics on its own; the watcher serves no
    // other gRPC service.
    let spec = Spec::new(
        WATCHER_SERVICE,
        config.health_listen,
        Some(config.metrics_listen),
        None,
    );
    let health = server::bind(spec, Arc::new(metrics.clone()))
        .await?
        .serve(None)
        .await?;

    let mut settings = app::Settings::new(&config.instance);
    settings.base.catalog_ref = Some(proto::v1::CatalogRef {
        region: config.region.clone(),
    });
    settings.base.options = proto::v1::PlanOptions {
        preference_policy: config.preference_policy.clone(),
        min_values_policy: config.min_values_policy.clone(),
        spot_to_spot_consolidation: config.feature_gates.spot_to_spot_consolidation,
        no_disruption: false,
        static_capacity: config.feature_gates.static_capacity,
        node_overlay: config.feature_gates.node_overlay,
        capacity_buffer: config.feature_gates.capacity_buffer,
        reserved_enis: i32::try_from(config.reserved_enis).unwrap_or(i32::MAX),
        vm_memory_overhead_percent: Some(config.vm_memory_overhead_percent),
        ignore_dra_requests: Some(config.ignore_dra_requests),
    };
    settings.informers.node_overlays = config.feature_gates.node_overlay;
    settings.timings.batch_idle = config.batch_idle;
    settings.timings.batch_max = config.batch_max;
    settings.timings.consolidate_every = config.consolidation_interval;
    if config.leader_elect {
        settings.leader = Some(leader::Settings::new(
            &config.lease_namespace,
            &config.instance,
        ));
    }
    tracing::info!(
        planners = ?config.planners,
        instance = %config.instance,
        feature_gates = %config.feature_gates,
        preference_policy = %config.preference_policy,
        min_values_policy = %config.min_values_policy,
        reserved_enis = config.reserved_enis,
        vm_memory_overhead_percent = config.vm_memory_overhead_percent,
        ignore_dra_requests = config.ignore_dra_requests,
        "Starting"
    );
    let running = app::start(client, planners, settings, metrics);

    let readiness = running.readiness.clone();
    let signalled = tokio::select! {
        _ = readiness.wait_until_ready() => {
            health.set_serving().await;
            tracing::info!("Every informer synced");
            false
        }
        r = service_shell::signal::shutdown() => { r?; true }
    };
    if !signalled {
        service_shell::signal::shutdown().await?;
    }
    tracing::info!("Shutting down");
    health.set_not_serving().await;
    running.shutdown().await;
    health.shutdown(Duration::ZERO).await?;
    Ok(())
}
