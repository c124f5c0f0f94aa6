//! The watcher assembled: informers always run; the publisher and feedback run while this
//! replica leads (always, without leader election).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::feedback;
use crate::informers::{self, Readiness, Sinks};
use crate::leader;
use crate::metrics::Metrics;
use crate::mirror::Mirror;
use crate::publish::{LatestPlan, Planners, Publisher, SessionBase, Timings};
use service_shell::clock::Clock;

/// Everything [`start`] needs besides the clients.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Catalog and plan options of each session.
    pub base: SessionBase,
    /// Batching, consolidation and retry timings.
    pub timings: Timings,
    /// Where `now` comes from.
    pub clock: Clock,
    /// How informers list.
    pub informers: informers::Options,
    /// How often NodePool status is reconciled besides after each plan.
    pub status_every: Duration,
    /// Leader election; `None` leads alone.
    pub leader: Option<leader::Settings>,
    /// Who Events are reported by.
    pub reporter: Reporter,
}

impl Settings {
    /// Defaults: Karpenter's batch windows, the us-east-1 catalog, no leader election.
    pub fn new(instance: &str) -> Self {
        Self {
            base: SessionBase {
                catalog_ref: Some(proto::v1::CatalogRef {
                    region: "us-east-1".into(),
                }),
                options: Default::default(),
            },
            timings: Timings::default(),
            clock: Clock::new(),
            informers: informers::Options::default(),
            status_every: Duration::from_secs(10),
            leader: None,
            reporter: Reporter {
                controller: "dovetail-watcher".into(),
                instance: Some(instance.into()),
            },
        }
    }
}

/// A running watcher.
pub struct Running {
    /// The mirror.
    pub mirror: Mirror,
    /// Informer sync state.
    pub readiness: Arc<Readiness>,
    /// Metrics.
    pub metrics: Metrics,
    /// True while this replica leads.
    pub leading: watch::Receiver<bool>,
    /// The latest plan of the current term (replaced at each new term).
    pub plans: watch::Receiver<Option<LatestPlan>>,
    stop: watch::Sender<bool>,
    /// Held without election, so that `leading` stays true.
    _lead_alone: Option<watch::Sender<bool>>,
    /// Informers.
    tasks: Vec<JoinHandle<()>>,
    /// The election and the supervisor of publisher and feedback.
    services: Vec<JoinHandle<()>>,
}

// === impl Running ===

impl Running {
    /// Stops every task and waits for the publisher and feedback to end.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        // The publisher, feedback and the election (which releases the Lease) end on `stop`;
        // the informers run until aborted.
        for t in self.services.drain(..) {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for t in self.tasks.iter().chain(&self.services) {
            t.abort();
        }
    }
}

/// Starts the informers, the election (if configured), and the publisher and feedback
/// whenever this replica leads.
pub fn start(
    client: kube::Client,
    planners: Arc<dyn Planners>,
    settings: Settings,
    metrics: Metrics,
) -> Running {
    let mirror = Mirror::new();
    let mut informer_options = settings.informers.clone();
    informer_options.capacity_buffers = settings.base.options.capacity_buffer;
    informer_options.dra = !settings
        .base
        .options
        .ignore_dra_requests
        .unwrap_or(common::dra::IGNORE_DRA_REQUESTS_DEFAULT);
    let readiness = Readiness::new(informer_options.names());
    metrics.attach(mirror.clone(), readiness.clone());
    let (invalid_tx, mut invalid_rx) = mpsc::unbounded_channel();
    let (stop, stop_rx) = watch::channel(false);
    let sinks = Sinks {
        mirror: mirror.clone(),
        readiness: readiness.clone(),
        metrics: metrics.clone(),
        invalid: invalid_tx,
    };
    let tasks = informers::spawn_all(client.clone(), &informer_options, sinks);
    let (leading_tx, leading) = watch::channel(settings.leader.is_none());
    let mut services = Vec::new();
    let lead_alone = match settings.leader.clone() {
        Some(l) => {
            services.push(tokio::spawn(leader::run(
                client.clone(),
                l,
                settings.clock.clone(),
                leading_tx,
                stop_rx.clone(),
            )));
            None
        }
        None => Some(leading_tx),
    };
    let (plans_tx, plans) = watch::channel(None);
    let supervisor = {
        let (mirror, readiness, metrics, mut leading, mut stop_rx) = (
            mirror.clone(),
            readiness.clone(),
            metrics.clone(),
            leading.clone(),
            stop_rx.clone(),
        );
        async move {
            loop {
                tokio::select! {
                    _ = crate::when(&mut leading, true) => {}
                    _ = crate::when(&mut stop_rx, true) => return,
                }
                metrics.leader.set(1);
                tracing::info!("Leading: streaming to the planners");
                let publisher = Publisher::new(
                    mirror.clone(),
                    readiness.clone(),
                    planners.clone(),
                    settings.base.clone(),
                    settings.timings.clone(),
                    settings.clock.clone(),
                    metrics.clone(),
                );
                let latest = publisher.latest();
                plans_tx.send_replace(Some(latest.clone()));
                let (term_tx, term_rx) = watch::channel(false);
                let end_term = async {
                    tokio::select! {
                        _ = crate::when(&mut leading, false) => {}
                        _ = crate::when(&mut stop_rx, true) => {}
                    }
                    term_tx.send_replace(true);
                };
                tokio::join!(
                    publisher.run(term_rx.clone()),
                    feedback::run(
                        client.clone(),
                        settings.reporter.clone(),
                        mirror.clone(),
                        metrics.clone(),
                        latest,
                        &mut invalid_rx,
                        settings.status_every,
                        term_rx,
                    ),
                    end_term,
                );
                metrics.leader.set(0);
                if *stop_rx.borrow() {
                    return;
                }
                tracing::info!("No longer leading");
            }
        }
    };
    services.push(tokio::spawn(supervisor));
    Running {
        mirror,
        readiness,
        metrics,
        leading,
        plans,
        stop,
        _lead_alone: lead_alone,
        tasks,
        services,
    }
}
