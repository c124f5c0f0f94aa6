//! The `dovetail-actuator` program: configuration, the cloud and cluster clients, ports and
//! signals around the library's parts. [`main`] is the whole binary (`src/main.rs` only calls
//! it), so that another executable can run the actuator as its own process (`dovetail demo`
//! runs `dovetail` as `dovetail-actuator`) with the same start-up as the standalone binary.
//! This is the wiring of a binary: the one module of the library that uses `anyhow`.
//!
//! Start-up: configuration is validated first (exit 64 when it is bad, before any port is
//! bound); the ports are bound with health NOT_SERVING; the ledger's migrations run (waiting
//! for the database); then health turns SERVING, the worker starts, and one line
//! `dovetail-actuator listening grpc=ADDR metrics=ADDR` goes to stdout. On SIGTERM or Ctrl-C:
//! NOT_SERVING, the drain delay, in-flight submissions finish, the worker finishes the claims in
//! hand and releases its leases, and the ledger is closed.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{CloudChoice, Config};
use crate::lifecycle::gc;
use crate::metrics::Metrics;
use crate::{
    api, catalog, disruption, interruption, ledger, lifecycle, node_class_status, repair, server,
    standin, worker, zonal_shift,
};
use anyhow::Context;
use cloud::CloudProvider;
use service_shell::backoff::Backoff;
use service_shell::clock::Clock;
use service_shell::kube::KubeSource;

/// Runs the actuator with this process's flags and environment; returns the exit code (64 for
/// a bad configuration, 1 when the service fails, 0 after a clean shutdown).
#[tokio::main]
pub async fn main() -> ExitCode {
    let config = match service_shell::cli::start("dovetail-actuator", Config::load) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "Actuator failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    let clock = Clock::new();
    let metrics = Metrics::new();
    let ledger = ledger::open(&config.ledger)?;
    // The SDK configuration of `--cloud aws`, shared by EC2/SSM and the interruption queue.
    let mut aws_config = None;
    let cloud: Arc<dyn CloudProvider> = match &config.cloud {
        CloudChoice::Sim {
            state_file,
            ignore_client_token,
        } => Arc::new(standin::StandIn::new(
            standin::Options {
                state_file: state_file.clone(),
                ignore_client_token: *ignore_client_token,
            },
            clock.clone(),
        )?),
        CloudChoice::Aws(aws) => {
            let mut c = cloud_aws::Config::new(
                aws.region.clone(),
                cloud_aws::config::Cluster {
                    name: config.cluster_name.clone(),
                    endpoint: aws.cluster_endpoint.clone(),
                    ca_bundle: aws.cluster_ca_bundle.clone(),
                    service_cidr: None,
                    kubernetes_version: aws.kubernetes_version.clone(),
                },
            );
            if let Some(url) = &aws.endpoint {
                c = c.with_endpoint_url(url.clone());
            }
            if let Some(prefix) = &aws.ssm_prefix {
                c = c.with_ssm_parameter_prefix(prefix.clone());
            }
            c = c
                .with_isolated_vpc(aws.isolated_vpc)
                .with_reserved_enis(aws.reserved_enis);
            // Credentials: the SDK's default chain only (AWS_ACCESS_KEY_ID... in the
            // environment, IRSA, profiles, IMDS).
            aws_config = Some(c.clone());
            Arc::new(cloud_aws::Ec2Provider::new(c).await)
        }
    };
    // Insufficient-capacity marks: launches skip marked offerings and the served catalog leaves
    // them out for three minutes. The live catalog is read from the provider itself.
    let marks = Arc::new(catalog::UnavailableOfferings::new(
        clock.clone(),
        catalog::DEFAULT_TTL,
    ));
    // ARC zonal shifts (`--enable-zonal-shift`), served with the live catalog.
    let shifts = match (&config.cloud, &aws_config) {
        (CloudChoice::Aws(a), Some(c)) => match &a.zonal_shift {
            Some(z) => {
                let mut shifts = zonal_shift::ZonalShifts::new(
                    Arc::new(
                        cloud_aws::ArcZonalShifts::new(
                            c,
                            z.cluster_arn.clone(),
                            z.endpoint.as_deref(),
                        )
                        .await,
                    ),
                    clock.clone(),
                    metrics.clone(),
                );
                // With a cluster: Karpenter's ZonalShiftActive / ZonalShiftCleared Events.
                if let Some(lc) = &config.lifecycle {
                    shifts = shifts.with_events(zonal_shift::events::Announcer::new(
                        kube_clients(&lc.kube).await?.0,
                        config.instance.clone(),
                    ));
                }
                Some((Arc::new(shifts), z.interval))
            }
            None => None,
        },
        _ => None,
    };
    let live = matches!(config.cloud, CloudChoice::Aws(_)).then(|| {
        let live = catalog::LiveCatalog::new(cloud.clone(), marks.clone(), metrics.clone());
        Arc::new(match &shifts {
            Some((z, _)) => live.with_zonal_shifts(z.clone()),
            None => live,
        })
    });
    let cloud: Arc<dyn CloudProvider> =
        Arc::new(catalog::MarkingCloud::new(cloud, marks, metrics.clone()));
    // EC2NodeClass status: only a cloud that resolves selectors (`--cloud aws`) has one.
    let statuses = match (&config.lifecycle, &config.cloud) {
        (Some(lc), CloudChoice::Aws(_)) => Some(node_class_status::StatusWriter::new(
            kube_clients(&lc.kube).await?.0,
            cloud.clone(),
            clock.clone(),
            node_class_status::Options {
                interval: lc.node_class_status_interval,
                cluster_name: Some(config.cluster_name.clone()),
            },
        )),
        _ => None,
    };
    let interruptions = match (&config.lifecycle, &config.interruption_queue) {
        (Some(lc), Some(_)) => Some(interruption::Interruptions::new(
            kube_clients(&lc.kube).await?.0,
            ledger.clone(),
            clock.clone(),
            metrics.clone(),
            interruption::Options {
                owner: format!("{}-{}-interruption", config.instance, std::process::id()),
                lease: config.lease,
                ..interruption::Options::default()
            },
        )),
        _ => None,
    };
    let lifecycle = match &config.lifecycle {
        None => {
            tracing::warn!("No cluster (--kubeconfig none): no NodeClaims, no garbage collection");
            None
        }
        Some(lc) => {
            let (client, evictions) = kube_clients(&lc.kube).await?;
            Some(
                lifecycle::Controller::new(
                    client,
                    ledger.clone(),
                    cloud.clone(),
                    clock.clone(),
                    metrics.clone(),
                    lifecycle::Options {
                        owner: format!("{}-{}-lifecycle", config.instance, std::process::id()),
                        interval: lc.interval,
                        registration_timeout: lc.registration_timeout,
                        lease: config.lease,
                        gc: gc::Options {
                            cluster_name: config.cluster_name.clone(),
                            grace: lc.gc_grace,
                            interval: lc.gc_interval,
                        },
                    },
                )
                .with_eviction_client(evictions)
                .with_catalog_from(live.clone()),
            )
        }
    };
    let mut worker = worker::Worker::new(
        ledger.clone(),
        cloud,
        clock.clone(),
        metrics.clone(),
        worker::Options {
            owner: format!("{}-{}", config.instance, std::process::id()),
            cluster_name: config.cluster_name.clone(),
            lease: config.lease,
            poll: config.poll_interval,
            pause_at: config.pause_at,
            ..worker::Options::default()
        },
    );
    if let Some(lc) = &lifecycle {
        worker = worker.with_lifecycle(Arc::new(lc.launch_hook()));
    }
    let executor = lifecycle.as_ref().map(|lc| {
        disruption::Executor::new(
            lc.clone(),
            disruption::Options {
                owner: format!("{}-{}-disruption", config.instance, std::process::id()),
                interval: config
                    .lifecycle
                    .as_ref()
                    .map_or(Duration::from_secs(2), |l| l.interval),
                lease: config.lease,
            },
        )
        .with_worker_waker(worker.waker())
    });
    let mut service = api::ActuatorService::new(
        ledger.clone(),
        clock.clone(),
        metrics.clone(),
        worker.waker(),
    )
    .with_confirm_after(config.disruption_confirm_after);
    if let Some(live) = &live {
        service = service.with_catalog(live.clone());
    }
    let running = server::start(&config, service, metrics.clone()).await?;
    tracing::info!(grpc = %running.grpc_addr, metrics = ?running.metrics_addr, ledger = ledger.backend(), auth = config.auth.kind(), "Listening; NOT_SERVING until the ledger is migrated");

    // Ready means the ledger is reachable and migrated; wait for the database.
    let mut signal = Box::pin(service_shell::signal::shutdown());
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(10));
    loop {
        let wait = tokio::select! {
            r = ledger.migrate() => match r {
                Ok(()) => break,
                Err(e) => {
                    let wait = backoff.failed();
                    metrics.loop_failed("ledger", "unavailable", wait);
                    tracing::warn!(error = format!("{:#}", anyhow::Error::from(e)), failures = backoff.failures(), retry_in = ?wait, "Ledger not ready; retrying");
                    wait
                }
            },
            r = &mut signal => {
                r?;
                tracing::info!("Stopped before the ledger was ready");
                return running.shutdown(Duration::ZERO).await.map_err(Into::into);
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            r = &mut signal => {
                r?;
                tracing::info!("Stopped before the ledger was ready");
                return running.shutdown(Duration::ZERO).await.map_err(Into::into);
            }
        }
    }
    metrics.loop_recovered("ledger");
    running.set_serving().await;
    println!(
        "dovetail-actuator listening grpc={} metrics={}",
        running.grpc_addr,
        running.metrics_addr_text()
    );
    tracing::info!(owner = %worker.options().owner, "SERVING");

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let work = tokio::spawn({
        let w = worker.clone();
        let rx = stopped.clone();
        async move { w.run(rx).await }
    });
    let repairs = match (&config.lifecycle, &lifecycle) {
        (Some(lc), Some(controller)) if lc.node_repair => {
            let repairer =
                repair::Repairer::new(controller.kube_client(), clock.clone(), lc.interval)
                    .with_metrics(metrics.clone());
            let rx = stopped.clone();
            Some(tokio::spawn(async move { repairer.run(rx).await }))
        }
        _ => None,
    };
    let lifecycle = lifecycle.map(|lc| {
        let rx = stopped.clone();
        tokio::spawn(async move { lc.run(rx).await })
    });
    let refresher = live.map(|live| {
        let rx = stopped.clone();
        let every = config.catalog_refresh;
        tokio::spawn(async move { live.run(every, rx).await })
    });
    let shift_reader = shifts.map(|(z, every)| {
        let rx = stopped.clone();
        tokio::spawn(async move { z.run(every, rx).await })
    });
    let executor = executor.map(|ex| {
        let rx = stopped.clone();
        tokio::spawn(async move { ex.run(rx).await })
    });
    let interruptions = match (interruptions, &config.interruption_queue, &aws_config) {
        (Some(handler), Some(name), Some(aws)) => {
            let (aws, name) = (aws.clone(), name.clone());
            let queue_metrics = metrics.clone();
            let mut rx = stopped.clone();
            Some(tokio::spawn(async move {
                // The queue URL is looked up until it resolves (a queue created after the
                // actuator, an SQS outage); the rest of the actuator runs meanwhile.
                let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
                let queue = loop {
                    match cloud_aws::SqsQueue::new(&aws, &name).await {
                        Ok(q) => break q,
                        Err(e) => {
                            let wait = backoff.failed_at_least(e.retry_after().unwrap_or_default());
                            queue_metrics.loop_failed("interruption_queue", e.reason(), wait);
                            tracing::error!(queue = %name, error = %e, reason = e.reason(), failures = backoff.failures(), retry_in = ?wait, "Interruption queue not found or unreachable; backing off");
                            tokio::select! {
                                _ = tokio::time::sleep(wait) => {}
                                _ = rx.changed() => return,
                            }
                        }
                    }
                };
                queue_metrics.loop_recovered("interruption_queue");
                tracing::info!(queue = %queue.url(), "Reading interruption messages");
                let queue: Arc<dyn cloud::InterruptionQueue> = Arc::new(queue);
                handler.run(queue, rx).await
            }))
        }
        _ => None,
    };
    let statuses = statuses.map(|w| {
        let rx = stopped.clone();
        tokio::spawn(async move { w.run(rx).await })
    });
    let counts = tokio::spawn(worker::report_counts(
        ledger.clone(),
        metrics,
        Duration::from_secs(5),
        stopped,
    ));

    signal.await?;
    tracing::info!("Shutting down");
    running.shutdown(config.drain_delay).await?;
    let _ = stop.send(true);
    work.await?;
    if let Some(lc) = lifecycle {
        lc.await?;
    }
    if let Some(r) = repairs {
        r.await?;
    }
    if let Some(ex) = executor {
        ex.await?;
    }
    if let Some(i) = interruptions {
        i.await?;
    }
    counts.await?;
    if let Some(s) = statuses {
        s.await?;
    }
    if let Some(r) = refresher {
        r.await?;
    }
    if let Some(z) = shift_reader {
        z.await?;
    }
    ledger.close().await;
    tracing::info!("Stopped");
    Ok(())
}

/// The lifecycle's client, and the eviction client: the same cluster with kube's default retry
/// off (it would retry a PodDisruptionBudget's 429 itself for minutes; the drain owns that
/// backoff).
async fn kube_clients(source: &KubeSource) -> anyhow::Result<(kube::Client, kube::Client)> {
    let config = source
        .config()
        .await?
        .context("the lifecycle runs only with a cluster")?;
    let mut no_retry = config.clone();
    no_retry.default_retry = false;
    Ok((
        kube::Client::try_from(config)?,
        kube::Client::try_from(no_retry)?,
    ))
}
