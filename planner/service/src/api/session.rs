//! `Planner.Session`: a snapshot, then deltas keyed by uid, a plan per closed batch.
//!
//! Each stream owns one [`SessionState`]; nothing is shared between streams, so any replica can
//! serve any session and a reconnecting client simply resends a snapshot. The state is bounded
//! by `session_max_objects` and dropped (its gauge released) when the stream ends. Each plan's
//! commands go to the actuator when one is configured; a failed submission is logged and
//! counted, and the next batch resubmits (commands carry idempotency keys).

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use proto::v1 as pb;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};
use tracing::Instrument;

use super::convert::to_model as convert;
use super::convert::{At, to_wire};
use super::service::{PlannerService, blocking};
use super::{Error, Result};
use planner::catalog::Catalog;
use planner::model::{self, ClusterSnapshot, PlanOptions};

/// Starts serving one session stream; the returned stream carries its plans.
pub(crate) fn start(
    service: PlannerService,
    inbound: Streaming<pb::ClusterUpdate>,
) -> ReceiverStream<std::result::Result<pb::PlanResponse, Status>> {
    let (tx, rx) = mpsc::channel(2);
    let id = service.next_session_id();
    let span = tracing::info_span!("session", %id);
    tokio::spawn(run(service, id, inbound, tx).instrument(span));
    ReceiverStream::new(rx)
}

async fn run(
    service: PlannerService,
    id: String,
    mut inbound: Streaming<pb::ClusterUpdate>,
    tx: mpsc::Sender<std::result::Result<pb::PlanResponse, Status>>,
) {
    let metrics = service.metrics.clone();
    metrics.sessions().inc();
    let mut state = SessionState::new(
        service.options.session_max_objects,
        metrics.session_objects().clone(),
    );
    tracing::info!("Session opened");
    let mut draining = service.draining.clone();
    loop {
        let idle = service.options.session_idle_timeout;
        let message = tokio::time::timeout(idle, inbound.message());
        let next = match &mut draining {
            Some(d) => tokio::select! {
                m = message => m.ok(),
                _ = d.wait_for(|v| *v) => None,
            },
            None => message.await.ok(),
        };
        let next = match next {
            Some(m) => m,
            None if draining.as_ref().is_some_and(|d| *d.borrow()) => {
                let _ = tx.send(Err(Status::from(super::Error::ShuttingDown))).await;
                break;
            }
            None => {
                let e = super::Error::SessionIdle {
                    seconds: idle.as_secs(),
                };
                tracing::info!(message = %e, "Session idle");
                let _ = tx.send(Err(Status::from(e))).await;
                break;
            }
        };
        let update = match next {
            Ok(Some(u)) => u,
            Ok(None) => break,
            Err(status) => {
                tracing::info!(code = ?status.code(), "Session stream failed");
                break;
            }
        };
        let start = Instant::now();
        let svc = service.clone();
        let (st, outcome) = match blocking(move || {
            let r = state.apply(update, &svc);
            Ok((state, r))
        })
        .await
        {
            Ok(x) => x,
            Err(e) => {
                let _ = tx.send(Err(Status::from(e))).await;
                break;
            }
        };
        state = st;
        match outcome {
            Ok(None) => {}
            Ok(Some(batch)) => {
                let svc = service.clone();
                let cancel = planner::cancel::CancelToken::new();
                let run_cancel = cancel.clone();
                let planned = blocking(move || {
                    // A session whose snapshot named no catalog plans from the live catalog
                    // current at each batch, when the service has one.
                    let live = if batch.default_catalog {
                        svc.live_default()?
                    } else {
                        None
                    };
                    let (catalog, version) = match live {
                        Some((c, v)) => (c, Some(v)),
                        None => (batch.catalog.clone(), None),
                    };
                    let mut plan =
                        svc.run_plan(&batch.snapshot, &catalog, &batch.options, &run_cancel)?;
                    super::service::stamp_version(&mut plan, version);
                    Ok((batch, plan))
                });
                // A client that closes the stream abandons the plan: stop it.
                let planned = tokio::select! {
                    r = planned => r,
                    () = tx.closed() => {
                        cancel.cancel();
                        tracing::info!("Session closed while planning; planning cancelled");
                        break;
                    }
                };
                let (batch, plan) = match planned {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = tx.send(Err(Status::from(e))).await;
                        break;
                    }
                };
                if let Some(fwd) = &service.actuator {
                    fwd.submit(
                        &id,
                        batch.sequence,
                        &batch.snapshot,
                        batch.options.now,
                        &plan,
                    )
                    .await;
                }
                metrics.request("Session", tonic::Code::Ok, start.elapsed().as_secs_f64());
                if tx.send(Ok(to_wire::plan_response(&plan))).await.is_err() {
                    break;
                }
            }
            Err(e) => {
                let status = Status::from(e);
                metrics.request("Session", status.code(), start.elapsed().as_secs_f64());
                tracing::info!(code = ?status.code(), message = status.message(), "Session refused");
                let _ = tx.send(Err(status)).await;
                break;
            }
        }
    }
    metrics.sessions().dec();
    tracing::info!("Session closed");
}

/// A closed batch, ready to plan.
pub(crate) struct Batch {
    pub(crate) sequence: u64,
    pub(crate) snapshot: ClusterSnapshot,
    pub(crate) catalog: Arc<Catalog>,
    /// The session's snapshot named no catalog (the service's default applies).
    pub(crate) default_catalog: bool,
    pub(crate) options: PlanOptions,
}

struct Base {
    catalog: Arc<Catalog>,
    default_catalog: bool,
    options: PlanOptions,
}

/// The objects of one session, keyed by uid per kind.
pub(crate) struct SessionState {
    base: Option<Base>,
    next_sequence: Option<u64>,
    limit: usize,
    gauge: Gauge,
    counted: i64,
    pods: BTreeMap<String, model::Pod>,
    nodes: BTreeMap<String, model::Node>,
    node_claims: BTreeMap<String, model::NodeClaim>,
    node_pools: BTreeMap<String, model::NodePool>,
    node_classes: BTreeMap<String, model::NodeClass>,
    daemon_sets: BTreeMap<String, model::DaemonSet>,
    pdbs: BTreeMap<String, model::PodDisruptionBudget>,
    namespaces: BTreeMap<String, model::Namespace>,
    pvcs: BTreeMap<String, model::PersistentVolumeClaim>,
    pvs: BTreeMap<String, model::PersistentVolume>,
    storage_classes: BTreeMap<String, model::StorageClass>,
}

fn key(uid: &str, namespace: Option<&str>, name: &str) -> String {
    match (uid.is_empty(), namespace) {
        (false, _) => uid.to_string(),
        (true, Some(ns)) => format!("{ns}/{name}"),
        (true, None) => name.to_string(),
    }
}

// === impl SessionState ===

impl SessionState {
    pub(crate) fn new(limit: usize, gauge: Gauge) -> Self {
        Self {
            base: None,
            next_sequence: None,
            limit,
            gauge,
            counted: 0,
            pods: BTreeMap::new(),
            nodes: BTreeMap::new(),
            node_claims: BTreeMap::new(),
            node_pools: BTreeMap::new(),
            node_classes: BTreeMap::new(),
            daemon_sets: BTreeMap::new(),
            pdbs: BTreeMap::new(),
            namespaces: BTreeMap::new(),
            pvcs: BTreeMap::new(),
            pvs: BTreeMap::new(),
            storage_classes: BTreeMap::new(),
        }
    }

    /// Objects held.
    pub(crate) fn len(&self) -> usize {
        self.pods.len()
            + self.nodes.len()
            + self.node_claims.len()
            + self.node_pools.len()
            + self.node_classes.len()
            + self.daemon_sets.len()
            + self.pdbs.len()
            + self.namespaces.len()
            + self.pvcs.len()
            + self.pvs.len()
            + self.storage_classes.len()
    }

    fn clear(&mut self) {
        self.pods.clear();
        self.nodes.clear();
        self.node_claims.clear();
        self.node_pools.clear();
        self.node_classes.clear();
        self.daemon_sets.clear();
        self.pdbs.clear();
        self.namespaces.clear();
        self.pvcs.clear();
        self.pvs.clear();
        self.storage_classes.clear();
    }

    fn recount(&mut self) -> Result<()> {
        let n = self.len();
        let now = i64::try_from(n).unwrap_or(i64::MAX);
        self.gauge.inc_by(now - self.counted);
        self.counted = now;
        if n > self.limit {
            // Release the memory now: the stream is about to end.
            self.clear();
            self.recount_quiet();
            return Err(Error::SessionTooLarge {
                objects: n,
                limit: self.limit,
            });
        }
        Ok(())
    }

    fn recount_quiet(&mut self) {
        let now = i64::try_from(self.len()).unwrap_or(i64::MAX);
        self.gauge.inc_by(now - self.counted);
        self.counted = now;
    }

    /// Applies one update; a closed batch comes back ready to plan.
    ///
    /// # Errors
    /// Out-of-order or pre-snapshot updates, invalid objects, and sessions over the limit.
    pub(crate) fn apply(
        &mut self,
        update: pb::ClusterUpdate,
        service: &PlannerService,
    ) -> Result<Option<Batch>> {
        use pb::cluster_update::Update;
        let seq = update.sequence;
        let root = At::ROOT;
        match update.update {
            None => Err(Error::EmptyUpdate { sequence: seq }),
            Some(Update::Snapshot(mut s)) => {
                let at = root.field("snapshot");
                let objects = s.snapshot.take().unwrap_or_default();
                let input = convert::session_snapshot(s, at)?;
                let default_catalog = matches!(input.catalog, planner_wire::CatalogChoice::Default);
                let catalog =
                    service.resolve_catalog(input.catalog, "snapshot.catalog_ref.region")?;
                self.clear();
                self.load(objects, at.field("snapshot"))?;
                self.base = Some(Base {
                    catalog,
                    default_catalog,
                    options: input.options,
                });
                self.next_sequence = Some(
                    seq.checked_add(1)
                        .ok_or(Error::SequenceExhausted { sequence: seq })?,
                );
                self.recount()?;
                Ok(None)
            }
            Some(other) => {
                let Some(expected) = self.next_sequence else {
                    return Err(Error::NoSnapshot { sequence: seq });
                };
                if seq != expected {
                    return Err(Error::SequenceGap { expected, got: seq });
                }
                self.next_sequence = Some(
                    seq.checked_add(1)
                        .ok_or(Error::SequenceExhausted { sequence: seq })?,
                );
                match other {
                    Update::Delta(d) => {
                        self.apply_delta(d, root.field("delta"))?;
                        self.recount()?;
                        Ok(None)
                    }
                    Update::CloseBatch(c) => {
                        // The one validation every door runs, on the snapshot the deltas made.
                        let batch = self.batch(seq, c.now);
                        planner::validation::snapshot(&batch.snapshot)
                            .map_err(super::convert::Error::from)?;
                        Ok(Some(batch))
                    }
                    Update::Snapshot(_) => Ok(None),
                }
            }
        }
    }

    fn apply_delta(&mut self, d: pb::Delta, at: At<'_>) -> Result<()> {
        let ua = at.field("upserts");
        for (i, u) in d.upserts.into_iter().enumerate() {
            let at = ua.index(i);
            let object = u
                .object
                .ok_or_else(|| at.field("object").err("is required"))?;
            self.upsert(object, at)?;
        }
        let da = at.field("deletes");
        for (i, del) in d.deletes.into_iter().enumerate() {
            let uid = del.uid.as_str();
            match del.kind.as_str() {
                "Pod" => drop(self.pods.remove(uid)),
                "Node" => drop(self.nodes.remove(uid)),
                "NodeClaim" => drop(self.node_claims.remove(uid)),
                "NodePool" => drop(self.node_pools.remove(uid)),
                "NodeClass" | "EC2NodeClass" => drop(self.node_classes.remove(uid)),
                "DaemonSet" => drop(self.daemon_sets.remove(uid)),
                "PodDisruptionBudget" => drop(self.pdbs.remove(uid)),
                "Namespace" => drop(self.namespaces.remove(uid)),
                "PersistentVolumeClaim" => drop(self.pvcs.remove(uid)),
                "PersistentVolume" => drop(self.pvs.remove(uid)),
                "StorageClass" => drop(self.storage_classes.remove(uid)),
                other => {
                    return Err(da
                        .index(i)
                        .field("kind")
                        .err(format!("unknown kind {other:?}"))
                        .into());
                }
            }
        }
        Ok(())
    }

    /// Loads a snapshot's objects, keyed exactly as deltas key them.
    fn load(&mut self, s: pb::ClusterSnapshot, at: At<'_>) -> Result<()> {
        use pb::upsert::Object;
        fn each<T>(
            this: &mut SessionState,
            items: Vec<T>,
            at: At<'_>,
            wrap: fn(T) -> Object,
        ) -> Result<()> {
            for (i, x) in items.into_iter().enumerate() {
                this.upsert_at(wrap(x), at.index(i))?;
            }
            Ok(())
        }
        each(self, s.pods, at.field("pods"), Object::Pod)?;
        each(self, s.nodes, at.field("nodes"), Object::Node)?;
        each(
            self,
            s.node_claims,
            at.field("node_claims"),
            Object::NodeClaim,
        )?;
        each(self, s.node_pools, at.field("node_pools"), Object::NodePool)?;
        each(
            self,
            s.node_classes,
            at.field("node_classes"),
            Object::NodeClass,
        )?;
        each(
            self,
            s.daemon_sets,
            at.field("daemon_sets"),
            Object::DaemonSet,
        )?;
        each(self, s.pdbs, at.field("pdbs"), Object::Pdb)?;
        each(
            self,
            s.namespaces,
            at.field("namespaces"),
            Object::Namespace,
        )?;
        each(self, s.pvcs, at.field("pvcs"), Object::Pvc)?;
        each(self, s.pvs, at.field("pvs"), Object::Pv)?;
        each(
            self,
            s.storage_classes,
            at.field("storage_classes"),
            Object::StorageClass,
        )?;
        Ok(())
    }

    /// Upserts one object of a delta; `at` is the path of its `Upsert`.
    fn upsert(&mut self, object: pb::upsert::Object, at: At<'_>) -> Result<()> {
        use pb::upsert::Object;
        let name = match &object {
            Object::Pod(_) => "pod",
            Object::Node(_) => "node",
            Object::NodeClaim(_) => "node_claim",
            Object::NodePool(_) => "node_pool",
            Object::NodeClass(_) => "node_class",
            Object::DaemonSet(_) => "daemon_set",
            Object::Pdb(_) => "pdb",
            Object::Namespace(_) => "namespace",
            Object::Pvc(_) => "pvc",
            Object::Pv(_) => "pv",
            Object::StorageClass(_) => "storage_class",
        };
        self.upsert_at(object, at.field(name))
    }

    /// Upserts one object; `at` is the path of the object itself.
    fn upsert_at(&mut self, object: pb::upsert::Object, at: At<'_>) -> Result<()> {
        use pb::upsert::Object;
        match object {
            Object::Pod(p) => {
                let p = convert::pod(p, at)?;
                self.pods.insert(p.uid.clone(), p);
            }
            Object::Node(n) => {
                let k = key(&n.uid, None, &n.name);
                self.nodes.insert(k, convert::node(n, at)?);
            }
            Object::NodeClaim(c) => {
                let k = key(&c.uid, None, &c.name);
                self.node_claims.insert(k, convert::node_claim(c, at)?);
            }
            Object::NodePool(p) => {
                let k = key(&p.uid, None, &p.name);
                self.node_pools.insert(k, convert::node_pool(p, at)?);
            }
            Object::NodeClass(c) => {
                let k = key(&c.uid, None, &c.name);
                self.node_classes.insert(k, convert::node_class(c, at)?);
            }
            Object::DaemonSet(d) => {
                let k = key(&d.uid, Some(&d.namespace), &d.name);
                self.daemon_sets.insert(k, convert::daemon_set(d, at)?);
            }
            Object::Pdb(p) => {
                let k = key(&p.uid, Some(&p.namespace), &p.name);
                self.pdbs.insert(k, convert::pdb(p, at)?);
            }
            Object::Namespace(n) => {
                let k = key(&n.uid, None, &n.name);
                self.namespaces.insert(k, convert::namespace(n, at)?);
            }
            Object::Pvc(c) => {
                let k = key(&c.uid, Some(&c.namespace), &c.name);
                self.pvcs.insert(k, convert::pvc(c, at)?);
            }
            Object::Pv(v) => {
                let k = key(&v.uid, None, &v.name);
                self.pvs.insert(k, convert::pv(v, at)?);
            }
            Object::StorageClass(c) => {
                let k = key(&c.uid, None, &c.name);
                self.storage_classes
                    .insert(k, convert::storage_class(c, at)?);
            }
        }
        Ok(())
    }

    fn batch(&self, sequence: u64, now: i64) -> Batch {
        let base = self.base.as_ref();
        let mut options = base.map(|b| b.options.clone()).unwrap_or_default();
        options.now = now;
        Batch {
            sequence,
            catalog: base.map(|b| b.catalog.clone()).unwrap_or_default(),
            default_catalog: base.is_some_and(|b| b.default_catalog),
            options,
            snapshot: ClusterSnapshot {
                pods: self.pods.values().cloned().collect(),
                nodes: self.nodes.values().cloned().collect(),
                node_claims: self.node_claims.values().cloned().collect(),
                node_pools: self.node_pools.values().cloned().collect(),
                node_classes: self.node_classes.values().cloned().collect(),
                daemon_sets: self.daemon_sets.values().cloned().collect(),
                pdbs: self.pdbs.values().cloned().collect(),
                namespaces: self.namespaces.values().cloned().collect(),
                pvcs: self.pvcs.values().cloned().collect(),
                pvs: self.pvs.values().cloned().collect(),
                storage_classes: self.storage_classes.values().cloned().collect(),
            },
        }
    }
}

impl Drop for SessionState {
    fn drop(&mut self) {
        self.gauge.dec_by(self.counted);
    }
}
