//! The `dovetail-watcher` program: configuration, clients, ports and signals around the
//! library's [`app`](crate::app). [`main`] is the whole binary (`src/main.rs` only calls it), so
//! that another executable can run the watcher as its own process (`dovetail demo` runs
//! `dovetail` as `dovetail-watcher`) with the same start-up as the standalone binary. This is
//! the wiring of a binary: the one module of the library that uses `anyhow`.

use std::process::ExitCode;
use std::sync::Arc;

use crate::config::{Config, EXIT_CONFIG, Env, Flags};
use crate::metrics::Metrics;
use crate::{app, leader, serve};
use anyhow::Context;
use clap::Parser;
use planner_client::{ClientConfig, ClientTls, PlannerClient};
use tracing_subscriber::EnvFilter;

/// Runs the watcher with this process's flags and environment; returns the exit code (64 for a
/// bad configuration, 1 when the watcher fails, 0 after a clean shutdown).
#[tokio::main]
pub async fn main() -> ExitCode {
    let flags = match Flags::try_parse() {
        Ok(f) => f,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_CONFIG)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let config = match Config::load(flags, &Env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dovetail-watcher: invalid configuration: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut client = ClientConfig::new(config.planners.clone());
    client.token = config.planner_token.clone();
    client.tls = config.planner_tls.as_ref().map(|t| ClientTls {
        ca: t.ca.clone(),
        identity: t.identity.clone(),
        domain: t.domain.clone(),
    });
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

async fn kube_client(config: &Config) -> anyhow::Result<kube::Client> {
    let kc = match &config.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or in-cluster configuration")?,
    };
    kube::Client::try_from(kc).context("building the Kubernetes client")
}

async fn run(config: Config, planners: Arc<PlannerClient>) -> anyhow::Result<()> {
    let client = kube_client(&config).await?;
    let metrics = Metrics::new();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let metrics_listener = serve::bind(config.metrics_listen, "metrics").await?;
    let health_listener = serve::bind(config.health_listen, "health").await?;
    let metrics_task = tokio::spawn(serve::metrics(
        metrics_listener,
        metrics.clone(),
        stop_rx.clone(),
    ));
    let (health, health_task) = serve::health(health_listener, stop_rx.clone());
    serve::set(&health, false).await;

    let mut settings = app::Settings::new(&config.instance);
    settings.base.catalog_ref = Some(proto::v1::CatalogRef {
        region: config.region.clone(),
    });
    settings.timings.batch_idle = config.batch_idle;
    settings.timings.batch_max = config.batch_max;
    settings.timings.consolidate_every = config.consolidation_interval;
    if config.leader_elect {
        settings.leader = Some(leader::Settings::new(
            &config.lease_namespace,
            &config.instance,
        ));
    }
    tracing::info!(planners = ?config.planners, instance = %config.instance, "Starting");
    let running = app::start(client, planners, settings, metrics);

    let readiness = running.readiness.clone();
    let signalled = tokio::select! {
        _ = readiness.wait_until_ready() => {
            serve::set(&health, true).await;
            tracing::info!("Every informer synced");
            false
        }
        _ = shutdown_signal() => true,
    };
    if !signalled {
        shutdown_signal().await;
    }
    tracing::info!("Shutting down");
    serve::set(&health, false).await;
    running.shutdown().await;
    stop.send_replace(true);
    let _ = metrics_task.await;
    let _ = health_task.await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
