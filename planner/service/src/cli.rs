//! The `dovetail-planner` program: flags, configuration, logging, ports and signals around the
//! library's service. [`main`] is the whole binary (`src/main.rs` only sets the global allocator
//! and calls it), so that another executable can run the planner as its own process (`dovetail
//! demo` runs `dovetail` as `dovetail-planner`) with the same start-up as the standalone binary.
//! This is the wiring of a binary: the one module of the library that uses `anyhow`.
//!
//! Start-up: configuration is validated first (exit 64 when it is bad, before any port is
//! bound); the ports are bound with health NOT_SERVING; the default catalog is loaded; then
//! health turns SERVING and one line `dovetail-planner listening grpc=ADDR metrics=ADDR` goes to
//! stdout. On SIGTERM or Ctrl-C: NOT_SERVING, the drain delay, then in-flight requests finish.
//!
//! With the `jemalloc` feature, [`main`] turns on jemalloc's background purging, which takes
//! effect where jemalloc is the global allocator (`dovetail-planner`). The demo's planner
//! processes (the `dovetail` executable) use the system allocator: the feature is off there
//! unless a workspace build turns it on, and then the call only configures an unused heap.

use std::process::ExitCode;
use std::sync::Arc;

use crate::api::actuator::Forwarder;
use crate::api::live_catalog::LiveCatalog;
use crate::api::{PlannerService, ServiceOptions};
use crate::config::Config;
use crate::metrics::Metrics;
use service_shell::auth::AddBearer;
use tonic::transport::Endpoint;

/// Runs the planner service with this process's flags and environment; returns the exit code
/// (64 for a bad configuration, 1 when the service fails, 0 after a clean shutdown).
#[tokio::main]
pub async fn main() -> ExitCode {
    let config = match service_shell::cli::start("dovetail-planner", Config::load) {
        Ok(c) => c,
        Err(code) => return code,
    };
    #[cfg(feature = "jemalloc")]
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        // Without it freed pages are purged only when the allocator is used again.
        tracing::warn!(error = %e, "jemalloc background purging unavailable");
    }
    match run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "Planner failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let mut service = PlannerService::new(
        Arc::new(|region: &str| planner::catalog::aws::builtin(region).map_err(|e| e.to_string())),
        metrics.clone(),
        ServiceOptions {
            default_region: config.region.clone(),
            session_max_objects: config.session_max_objects,
            max_held_objects: config.max_held_objects,
            instance: config.instance.clone(),
            session_idle_timeout: config.session_idle_timeout,
        },
    );
    let mut live = None;
    if let Some(endpoint) = &config.actuator_endpoint {
        let channel = Endpoint::from_shared(endpoint.clone())?.connect_lazy();
        let auth = AddBearer::new(config.actuator_token.as_deref())?;
        service = service.with_actuator(Forwarder::new(
            channel.clone(),
            auth.clone(),
            metrics.clone(),
        ));
        if config.catalog_from_actuator {
            let l = LiveCatalog::new(channel, auth, metrics.clone());
            service = service.with_live_catalog(l.clone());
            live = Some(l);
        }
    }

    let running = crate::server::start(&config, service.clone(), metrics).await?;
    tracing::info!(grpc = %running.grpc_addr, metrics = ?running.metrics_addr, auth = config.auth.kind(), "Listening; NOT_SERVING until the catalog is loaded");

    // Ready means able to plan: the default catalog is loaded.
    let svc = service.clone();
    tokio::task::spawn_blocking(move || svc.preload()).await??;
    running.set_serving().await;
    println!(
        "dovetail-planner listening grpc={} metrics={}",
        running.grpc_addr,
        running.metrics_addr_text()
    );
    tracing::info!("SERVING");

    // The live catalog is checked in the background; plans use the built-in one until then.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let poller = live.map(|l| {
        let every = config.catalog_poll_interval;
        tokio::spawn(async move { l.run(every, stopped).await })
    });

    service_shell::signal::shutdown().await?;
    tracing::info!("Shutting down");
    let _ = stop.send(true);
    if let Some(p) = poller {
        p.await?;
    }
    running.shutdown(config.drain_delay).await?;
    tracing::info!("Stopped");
    Ok(())
}
