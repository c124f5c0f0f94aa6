//! The one `Planner.Session` stream: a full snapshot, then deltas in order with consecutive
//! sequence numbers, a `CloseBatch` when a batch window closes or the consolidation timer
//! fires; plans come back on the same stream.
//!
//! When the stream fails (the replica died, drained, or refused a sequence), the publisher
//! opens a new one on another replica and starts again from a fresh snapshot of the mirror.
//! The snapshot and the deltas are taken from the mirror under one lock, so every change is in
//! exactly one message of the new stream; a batch whose plan never arrived is closed again on
//! the new stream. Nothing is sent before every informer has synced.

mod client;

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use prost::Message;
use proto::v1 as pb;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;

use crate::batcher::Batcher;
use crate::informers::Readiness;
use crate::metrics::Metrics;
use crate::mirror::Mirror;
use service_shell::clock::Clock;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No replica accepted the stream; `status` is the last answer.
    #[error("no planner replica accepted the session: {0}")]
    Unavailable(#[source] tonic::Status),
    /// The planner client failed for another reason (endpoints, token, TLS).
    #[error(transparent)]
    Client(planner_client::Error),
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The plans of a session, as the planner streams them.
pub type Plans = BoxStream<'static, std::result::Result<pb::PlanResponse, tonic::Status>>;

/// The outbound stream of one session attempt: its snapshot, then what the publisher sends.
pub type Updates = futures::stream::Chain<
    futures::stream::Iter<std::vec::IntoIter<pb::ClusterUpdate>>,
    ReceiverStream<pb::ClusterUpdate>,
>;

/// Opens session streams on the planner replicas, failing over between them.
#[async_trait::async_trait]
pub trait Planners: Send + Sync + 'static {
    /// Opens a session. `make` builds the stream of updates for one attempt (it is called
    /// again for each replica tried).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when no replica accepts the stream.
    async fn open(&self, make: &mut (dyn FnMut() -> Updates + Send)) -> Result<Plans>;
}

/// What a session opens with, besides the objects.
#[derive(Debug, Clone, Default)]
pub struct SessionBase {
    /// The catalog: the planner's built-in one of a region.
    pub catalog_ref: Option<pb::CatalogRef>,
    /// Options that change decisions.
    pub options: pb::PlanOptions,
}

/// Timings of the publisher.
#[derive(Debug, Clone)]
pub struct Timings {
    /// A batch window closes this long after its last new pending pod.
    pub batch_idle: Duration,
    /// ... and at most this long after it opened.
    pub batch_max: Duration,
    /// How often a plan is asked for without new pending pods (consolidation).
    pub consolidate_every: Duration,
    /// Changes are coalesced this long before a delta is sent.
    pub flush_after: Duration,
    /// First wait after no replica accepted a session, or after a session failed before any
    /// plan came back; doubles (with jitter) up to `retry_max`.
    pub retry_after: Duration,
    /// Longest wait before a session is reopened.
    pub retry_max: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            batch_idle: Duration::from_secs(1),
            batch_max: Duration::from_secs(10),
            consolidate_every: Duration::from_secs(60),
            flush_after: Duration::from_millis(100),
            retry_after: Duration::from_millis(200),
            retry_max: Duration::from_secs(30),
        }
    }
}

/// A plan, with the time it arrived, for feedback.
pub type LatestPlan = watch::Receiver<Option<Arc<pb::PlanResponse>>>;

/// The publisher task.
pub struct Publisher {
    mirror: Mirror,
    readiness: Arc<Readiness>,
    planners: Arc<dyn Planners>,
    base: SessionBase,
    timings: Timings,
    clock: Clock,
    metrics: Metrics,
    plans: watch::Sender<Option<Arc<pb::PlanResponse>>>,
}

/// Why one session ended.
enum Ended {
    /// Shut down.
    Stop,
    /// The stream failed; open another. `planned`: it delivered at least one plan first (a
    /// replica that served and then went away: fail over at once); `why`: the gRPC code, or
    /// `closed`/`send` when the stream ended without one.
    Failed { planned: bool, why: String },
}

/// `d` scaled by a random factor in [0.5, 1): spreads reconnecting watchers apart.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.5 + service_shell::backoff::unit() / 2.0)
}

/// The live half of one session: where updates go and the next sequence number.
struct Live {
    tx: mpsc::Sender<pb::ClusterUpdate>,
    sequence: u64,
}

// === impl Publisher ===

impl Publisher {
    /// A publisher over `mirror`; `latest()` yields its plans.
    pub fn new(
        mirror: Mirror,
        readiness: Arc<Readiness>,
        planners: Arc<dyn Planners>,
        base: SessionBase,
        timings: Timings,
        clock: Clock,
        metrics: Metrics,
    ) -> Self {
        Self {
            mirror,
            readiness,
            planners,
            base,
            timings,
            clock,
            metrics,
            plans: watch::channel(None).0,
        }
    }

    /// The latest plan received.
    pub fn latest(&self) -> LatestPlan {
        self.plans.subscribe()
    }

    /// Runs until `stop` turns true: waits for every informer, then keeps a session open.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        tokio::select! {
            _ = self.readiness.wait_until_ready() => {}
            _ = crate::when(&mut stop, true) => return,
        }
        tracing::info!(
            objects = self.mirror.lock().len(),
            "Every informer synced; opening a session"
        );
        let mut batcher = Batcher::new(self.timings.batch_idle, self.timings.batch_max);
        let mut sequence: u64 = 1;
        let mut unanswered = 0usize;
        let mut retry = self.timings.retry_after;
        let mut opened_before = false;
        loop {
            let slot: Arc<std::sync::Mutex<Option<Live>>> = Arc::default();
            let mut make = {
                let (mirror, slot, metrics, base) = (
                    self.mirror.clone(),
                    slot.clone(),
                    self.metrics.clone(),
                    self.base.clone(),
                );
                let seq = &mut sequence;
                move || -> Updates {
                    let snapshot = mirror.lock().snapshot();
                    let objects = count(&snapshot);
                    let update = pb::ClusterUpdate {
                        sequence: *seq,
                        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
                            snapshot: Some(snapshot),
                            catalog_source: base
                                .catalog_ref
                                .clone()
                                .map(pb::session_snapshot::CatalogSource::CatalogRef),
                            options: Some(base.options.clone()),
                        })),
                    };
                    metrics
                        .snapshot_objects
                        .set(i64::try_from(objects).unwrap_or(i64::MAX));
                    metrics
                        .snapshot_bytes
                        .set(i64::try_from(update.encoded_len()).unwrap_or(i64::MAX));
                    let (tx, rx) = mpsc::channel(64);
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Live {
                        tx,
                        sequence: *seq + 1,
                    });
                    *seq += 2;
                    futures::stream::iter(vec![update]).chain(ReceiverStream::new(rx))
                }
            };
            let opened = tokio::select! {
                r = self.planners.open(&mut make) => r,
                _ = crate::when(&mut stop, true) => return,
            };
            drop(make);
            let plans = match opened {
                Ok(p) => p,
                Err(e) => {
                    let wait = jittered(retry);
                    tracing::warn!(error = %e, retry_in = ?wait, "No planner accepted the session");
                    self.metrics
                        .session_failures
                        .get_or_create(&Metrics::why("unavailable"))
                        .inc();
                    self.metrics.reconnect_backoff.set(wait.as_secs_f64());
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = crate::when(&mut stop, true) => return,
                    }
                    retry = (retry * 2).min(self.timings.retry_max);
                    continue;
                }
            };
            self.metrics.reconnect_backoff.set(0.0);
            if opened_before {
                self.metrics.reconnects.inc();
            }
            opened_before = true;
            let Some(mut live) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                continue;
            };
            tracing::info!(sequence = live.sequence - 1, "Session open; snapshot sent");
            let ended = self
                .session(&mut live, plans, &mut batcher, &mut unanswered, &mut stop)
                .await;
            sequence = sequence.max(live.sequence);
            match ended {
                Ended::Stop => return,
                Ended::Failed { planned: true, why } => {
                    // It served: another replica takes over at once.
                    retry = self.timings.retry_after;
                    self.metrics
                        .session_failures
                        .get_or_create(&Metrics::why(&why))
                        .inc();
                    tracing::info!(%why, "Session ended; reopening with a fresh snapshot");
                }
                Ended::Failed {
                    planned: false,
                    why,
                } => {
                    // Refused before any plan: the same snapshot would likely be refused
                    // again, so wait, longer each time.
                    let wait = jittered(retry);
                    self.metrics
                        .session_failures
                        .get_or_create(&Metrics::why(&why))
                        .inc();
                    self.metrics.reconnect_backoff.set(wait.as_secs_f64());
                    tracing::warn!(%why, retry_in = ?wait, "Session failed before any plan; reopening after a backoff");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = crate::when(&mut stop, true) => return,
                    }
                    retry = (retry * 2).min(self.timings.retry_max);
                }
            }
        }
    }

    /// Serves one open session until it fails or the publisher stops.
    async fn session(
        &self,
        live: &mut Live,
        mut plans: Plans,
        batcher: &mut Batcher,
        unanswered: &mut usize,
        stop: &mut watch::Receiver<bool>,
    ) -> Ended {
        // A batch closed on the failed stream was never answered: close it again here.
        let mut sent_at: std::collections::VecDeque<Instant> = Default::default();
        let mut planned = false;
        let failed = |planned: bool, why: &str| Ended::Failed {
            planned,
            why: why.to_string(),
        };
        if *unanswered > 0 {
            *unanswered = 0;
            if !self.close_batch(live, &mut sent_at, unanswered).await {
                return failed(planned, "send");
            }
        }
        let mut consolidate = tokio::time::interval_at(
            Instant::now() + self.timings.consolidate_every,
            self.timings.consolidate_every,
        );
        consolidate.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut flush_at: Option<Instant> = None;
        let mut dirty_since: Option<Instant> = None;
        // Changes (and pending pods) that arrived before the session opened.
        let mut check = true;
        loop {
            if check {
                check = false;
                let (new_pending, pending, objects, dirty) = {
                    let mut s = self.mirror.lock();
                    (
                        s.take_new_pending(),
                        s.pending_pods(),
                        s.len(),
                        s.has_delta(),
                    )
                };
                self.metrics
                    .pending_pods
                    .set(i64::try_from(pending).unwrap_or(i64::MAX));
                self.metrics
                    .objects
                    .set(i64::try_from(objects).unwrap_or(i64::MAX));
                batcher.add(Instant::now(), new_pending);
                if dirty && flush_at.is_none() {
                    flush_at = Some(Instant::now() + self.timings.flush_after);
                    dirty_since = Some(Instant::now());
                }
            }
            let flush = async {
                match flush_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = crate::when(stop, true) => return Ended::Stop,
                _ = self.mirror.changed() => check = true,
                _ = flush => {
                    flush_at = None;
                    if !self.flush(live, dirty_since.take()).await {
                        return failed(planned, "send");
                    }
                }
                _ = batcher.due() => {
                    if let Some(closed) = batcher.close_if_due(Instant::now()) {
                        self.metrics.batch_size.observe(closed.pods as f64);
                        self.metrics.batch_duration.observe(closed.open_for.as_secs_f64());
                        tracing::info!(pods = closed.pods, open_for = ?closed.open_for, "Batch closed");
                        flush_at = None;
                        if !self.flush(live, dirty_since.take()).await
                            || !self.close_batch(live, &mut sent_at, unanswered).await
                        {
                            return failed(planned, "send");
                        }
                    }
                }
                _ = consolidate.tick() => {
                    // An open window will ask for a plan soon anyway.
                    if !batcher.is_open() {
                        flush_at = None;
                        if !self.flush(live, dirty_since.take()).await
                            || !self.close_batch(live, &mut sent_at, unanswered).await
                        {
                            return failed(planned, "send");
                        }
                    }
                }
                plan = plans.next() => match plan {
                    Some(Ok(plan)) => {
                        planned = true;
                        *unanswered = unanswered.saturating_sub(1);
                        if let Some(t) = sent_at.pop_front() {
                            self.metrics.plan_latency.observe(t.elapsed().as_secs_f64());
                        }
                        self.metrics.plans.inc();
                        tracing::info!(
                            new_claims = plan.node_claims.len(),
                            unschedulable = plan.unschedulable.len(),
                            disruptions = plan.disruptions.len(),
                            "Plan received"
                        );
                        for c in &plan.node_claims {
                            tracing::debug!(
                                claim = %c.name,
                                pods = c.pods.len(),
                                first = ?c.pods.iter().take(3).collect::<Vec<_>>(),
                                "Planned claim"
                            );
                        }
                        self.plans.send_replace(Some(Arc::new(plan)));
                    }
                    Some(Err(status)) => {
                        tracing::warn!(code = ?status.code(), message = status.message(), "Session failed");
                        return failed(planned, &format!("{:?}", status.code()));
                    }
                    None => {
                        tracing::warn!("Session closed by the planner");
                        return failed(planned, "closed");
                    }
                },
            }
        }
    }

    /// Sends the coalesced changes, if any. False when the stream is gone.
    async fn flush(&self, live: &mut Live, since: Option<Instant>) -> bool {
        let Some(delta) = self.mirror.lock().take_delta() else {
            return true;
        };
        if let Some(t) = since {
            self.metrics.lag.observe(t.elapsed().as_secs_f64());
        }
        self.send(live, pb::cluster_update::Update::Delta(delta))
            .await
    }

    async fn close_batch(
        &self,
        live: &mut Live,
        sent_at: &mut std::collections::VecDeque<Instant>,
        unanswered: &mut usize,
    ) -> bool {
        let now = self.clock.now_secs();
        let ok = self
            .send(
                live,
                pb::cluster_update::Update::CloseBatch(pb::CloseBatch { now }),
            )
            .await;
        if ok {
            *unanswered += 1;
            sent_at.push_back(Instant::now());
        }
        ok
    }

    async fn send(&self, live: &mut Live, update: pb::cluster_update::Update) -> bool {
        let msg = pb::ClusterUpdate {
            sequence: live.sequence,
            update: Some(update),
        };
        if live.tx.send(msg).await.is_err() {
            return false;
        }
        live.sequence += 1;
        true
    }
}

fn count(s: &pb::ClusterSnapshot) -> usize {
    s.pods.len()
        + s.nodes.len()
        + s.node_claims.len()
        + s.node_pools.len()
        + s.node_classes.len()
        + s.daemon_sets.len()
        + s.pdbs.len()
        + s.namespaces.len()
        + s.pvcs.len()
        + s.pvs.len()
        + s.storage_classes.len()
}

/// A stream of plans from a tonic response stream.
pub fn plans_from<S>(s: S) -> Plans
where
    S: Stream<Item = std::result::Result<pb::PlanResponse, tonic::Status>> + Send + 'static,
{
    s.boxed()
}

#[cfg(test)]
mod tests;
