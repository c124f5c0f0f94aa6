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
use super::planning::{PlannerService, blocking, stamp_version};
use super::{Error, Result};
use common::key::object as key;
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
                    stamp_version(&mut plan, version);
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
                let (batch, mut plan) = match planned {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = tx.send(Err(Status::from(e))).await;
                        break;
                    }
                };
                if let Some(fwd) = &service.actuator {
                    let renames = fwd
                        .submit(
                            &id,
                            batch.sequence,
                            &batch.snapshot,
                            batch.options.now,
                            &plan,
                        )
                        .await;
                    super::actuator::apply_renames(&mut plan, &renames);
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

/// The kinds a session holds, in the order of the snapshot's lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pod,
    Node,
    NodeClaim,
    NodePool,
    NodeClass,
    DaemonSet,
    Pdb,
    Namespace,
    Pvc,
    Pv,
    StorageClass,
}

// === impl Kind ===

impl Kind {
    const ALL: [Kind; 11] = [
        Kind::Pod,
        Kind::Node,
        Kind::NodeClaim,
        Kind::NodePool,
        Kind::NodeClass,
        Kind::DaemonSet,
        Kind::Pdb,
        Kind::Namespace,
        Kind::Pvc,
        Kind::Pv,
        Kind::StorageClass,
    ];

    /// The field of `ClusterSnapshot` holding this kind (and of the validated snapshot's paths).
    fn list(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::Node => "nodes",
            Kind::NodeClaim => "node_claims",
            Kind::NodePool => "node_pools",
            Kind::NodeClass => "node_classes",
            Kind::DaemonSet => "daemon_sets",
            Kind::Pdb => "pdbs",
            Kind::Namespace => "namespaces",
            Kind::Pvc => "pvcs",
            Kind::Pv => "pvs",
            Kind::StorageClass => "storage_classes",
        }
    }

    /// The field of `Upsert.object` holding this kind.
    fn upsert_field(self) -> &'static str {
        match self {
            Kind::Pod => "pod",
            Kind::Node => "node",
            Kind::NodeClaim => "node_claim",
            Kind::NodePool => "node_pool",
            Kind::NodeClass => "node_class",
            Kind::DaemonSet => "daemon_set",
            Kind::Pdb => "pdb",
            Kind::Namespace => "namespace",
            Kind::Pvc => "pvc",
            Kind::Pv => "pv",
            Kind::StorageClass => "storage_class",
        }
    }

    fn of(object: &pb::upsert::Object) -> Kind {
        use pb::upsert::Object;
        match object {
            Object::Pod(_) => Kind::Pod,
            Object::Node(_) => Kind::Node,
            Object::NodeClaim(_) => Kind::NodeClaim,
            Object::NodePool(_) => Kind::NodePool,
            Object::NodeClass(_) => Kind::NodeClass,
            Object::DaemonSet(_) => Kind::DaemonSet,
            Object::Pdb(_) => Kind::Pdb,
            Object::Namespace(_) => Kind::Namespace,
            Object::Pvc(_) => Kind::Pvc,
            Object::Pv(_) => Kind::Pv,
            Object::StorageClass(_) => Kind::StorageClass,
        }
    }
}

/// Where the client sent an object: the update's sequence number and the object's place in
/// that message, so that an error found later (when a batch closes) names the client's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Origin {
    sequence: u64,
    kind: Kind,
    /// Index in the snapshot's list of this kind, or in the delta's `upserts`.
    index: usize,
    in_snapshot: bool,
}

// === impl Origin ===

impl Origin {
    /// The object's path in its `ClusterUpdate`, e.g. `snapshot.snapshot.pods[3]` or
    /// `delta.upserts[2].pod`.
    fn path(&self) -> String {
        if self.in_snapshot {
            format!("snapshot.snapshot.{}[{}]", self.kind.list(), self.index)
        } else {
            format!("delta.upserts[{}].{}", self.index, self.kind.upsert_field())
        }
    }
}

/// An object with the place the client sent it from.
struct Held<T> {
    object: T,
    origin: Origin,
}

type Store<T> = BTreeMap<String, Held<T>>;

/// The objects of one session, keyed by uid per kind.
pub(crate) struct SessionState {
    base: Option<Base>,
    next_sequence: Option<u64>,
    limit: usize,
    gauge: Gauge,
    counted: i64,
    pods: Store<model::Pod>,
    nodes: Store<model::Node>,
    node_claims: Store<model::NodeClaim>,
    node_pools: Store<model::NodePool>,
    node_classes: Store<model::NodeClass>,
    daemon_sets: Store<model::DaemonSet>,
    pdbs: Store<model::PodDisruptionBudget>,
    namespaces: Store<model::Namespace>,
    pvcs: Store<model::PersistentVolumeClaim>,
    pvs: Store<model::PersistentVolume>,
    storage_classes: Store<model::StorageClass>,
}

/// Stores one object. Inside a snapshot a key may appear once: a second object with the same
/// uid (or, without a uid, the same name) is refused naming both places. In a delta an upsert
/// of a key already held is an update, as a Kubernetes watch's MODIFIED event is.
fn put<T>(
    store: &mut Store<T>,
    key: String,
    object: T,
    origin: Origin,
    by_uid: bool,
    at: At<'_>,
) -> Result<()> {
    if origin.in_snapshot
        && let Some(first) = store.get(&key)
        && first.origin.sequence == origin.sequence
        && first.origin.in_snapshot
    {
        let (field, what) = if by_uid {
            ("uid", "uid")
        } else {
            ("name", "name (the object has no uid)")
        };
        return Err(at
            .field(field)
            .err(format!(
                "duplicate {what} {key:?}: already sent at {} of this snapshot",
                first.origin.path()
            ))
            .into());
    }
    store.insert(key, Held { object, origin });
    Ok(())
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

    /// Where the `index`-th object of `kind` (in key order, the order of the batch's lists)
    /// came from.
    fn origin(&self, kind: Kind, index: usize) -> Option<Origin> {
        fn nth<T>(s: &Store<T>, i: usize) -> Option<Origin> {
            s.values().nth(i).map(|h| h.origin)
        }
        match kind {
            Kind::Pod => nth(&self.pods, index),
            Kind::Node => nth(&self.nodes, index),
            Kind::NodeClaim => nth(&self.node_claims, index),
            Kind::NodePool => nth(&self.node_pools, index),
            Kind::NodeClass => nth(&self.node_classes, index),
            Kind::DaemonSet => nth(&self.daemon_sets, index),
            Kind::Pdb => nth(&self.pdbs, index),
            Kind::Namespace => nth(&self.namespaces, index),
            Kind::Pvc => nth(&self.pvcs, index),
            Kind::Pv => nth(&self.pvs, index),
            Kind::StorageClass => nth(&self.storage_classes, index),
        }
    }

    /// Turns a validation error of the assembled batch (paths like `snapshot.pods[7].name`)
    /// into one naming the update and the place the client sent the object from.
    fn client_error(&self, e: planner::validation::Error) -> Error {
        let source = super::convert::Error::from(e);
        let Some((kind, index, rest)) = batch_path(source.field()) else {
            return Error::Convert(source);
        };
        match self.origin(kind, index) {
            Some(origin) => Error::SessionUpdate {
                sequence: origin.sequence,
                source: super::convert::Error::InvalidField {
                    field: format!("{}{rest}", origin.path()),
                    reason: source.reason().to_string(),
                },
            },
            None => Error::Convert(source),
        }
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
    /// Out-of-order or pre-snapshot updates, invalid objects (named by the update's sequence
    /// and their path in it), and sessions over the limit.
    pub(crate) fn apply(
        &mut self,
        update: pb::ClusterUpdate,
        service: &PlannerService,
    ) -> Result<Option<Batch>> {
        let sequence = update.sequence;
        self.apply_update(update, service).map_err(|e| match e {
            Error::Convert(source) => Error::SessionUpdate { sequence, source },
            e => e,
        })
    }

    fn apply_update(
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
                let loaded = self.load(objects, seq, at.field("snapshot"));
                if let Err(e) = loaded {
                    // Half a snapshot is no snapshot: release it, the stream is about to end.
                    self.clear();
                    self.recount_quiet();
                    return Err(e);
                }
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
                        self.apply_delta(d, seq, root.field("delta"))?;
                        self.recount()?;
                        Ok(None)
                    }
                    Update::CloseBatch(c) => {
                        // The one validation every door runs, on the snapshot the deltas made;
                        // its errors name where the client sent the object at fault.
                        let batch = self.batch(seq, c.now);
                        planner::validation::snapshot(&batch.snapshot)
                            .map_err(|e| self.client_error(e))?;
                        Ok(Some(batch))
                    }
                    Update::Snapshot(_) => Ok(None),
                }
            }
        }
    }

    fn apply_delta(&mut self, d: pb::Delta, sequence: u64, at: At<'_>) -> Result<()> {
        let ua = at.field("upserts");
        for (i, u) in d.upserts.into_iter().enumerate() {
            let at = ua.index(i);
            let object = u
                .object
                .ok_or_else(|| at.field("object").err("is required"))?;
            let kind = Kind::of(&object);
            let origin = Origin {
                sequence,
                kind,
                index: i,
                in_snapshot: false,
            };
            self.upsert(object, origin, at.field(kind.upsert_field()))?;
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
    fn load(&mut self, s: pb::ClusterSnapshot, sequence: u64, at: At<'_>) -> Result<()> {
        use pb::upsert::Object;
        fn each<T>(
            this: &mut SessionState,
            items: Vec<T>,
            sequence: u64,
            kind: Kind,
            at: At<'_>,
            wrap: fn(T) -> Object,
        ) -> Result<()> {
            let at = at.field(kind.list());
            for (index, x) in items.into_iter().enumerate() {
                let origin = Origin {
                    sequence,
                    kind,
                    index,
                    in_snapshot: true,
                };
                this.upsert(wrap(x), origin, at.index(index))?;
            }
            Ok(())
        }
        each(self, s.pods, sequence, Kind::Pod, at, Object::Pod)?;
        each(self, s.nodes, sequence, Kind::Node, at, Object::Node)?;
        each(
            self,
            s.node_claims,
            sequence,
            Kind::NodeClaim,
            at,
            Object::NodeClaim,
        )?;
        each(
            self,
            s.node_pools,
            sequence,
            Kind::NodePool,
            at,
            Object::NodePool,
        )?;
        each(
            self,
            s.node_classes,
            sequence,
            Kind::NodeClass,
            at,
            Object::NodeClass,
        )?;
        each(
            self,
            s.daemon_sets,
            sequence,
            Kind::DaemonSet,
            at,
            Object::DaemonSet,
        )?;
        each(self, s.pdbs, sequence, Kind::Pdb, at, Object::Pdb)?;
        each(
            self,
            s.namespaces,
            sequence,
            Kind::Namespace,
            at,
            Object::Namespace,
        )?;
        each(self, s.pvcs, sequence, Kind::Pvc, at, Object::Pvc)?;
        each(self, s.pvs, sequence, Kind::Pv, at, Object::Pv)?;
        each(
            self,
            s.storage_classes,
            sequence,
            Kind::StorageClass,
            at,
            Object::StorageClass,
        )?;
        Ok(())
    }

    /// Upserts one object; `at` is the path of the object itself.
    fn upsert(&mut self, object: pb::upsert::Object, origin: Origin, at: At<'_>) -> Result<()> {
        use pb::upsert::Object;
        match object {
            Object::Pod(p) => {
                let by_uid = !p.uid.is_empty();
                let p = convert::pod(p, at)?;
                put(&mut self.pods, p.uid.clone(), p, origin, by_uid, at)
            }
            Object::Node(n) => {
                let k = key(&n.uid, None, &n.name);
                let by_uid = !n.uid.is_empty();
                put(
                    &mut self.nodes,
                    k,
                    convert::node(n, at)?,
                    origin,
                    by_uid,
                    at,
                )
            }
            Object::NodeClaim(c) => {
                let k = key(&c.uid, None, &c.name);
                let by_uid = !c.uid.is_empty();
                let c = convert::node_claim(c, at)?;
                put(&mut self.node_claims, k, c, origin, by_uid, at)
            }
            Object::NodePool(p) => {
                let k = key(&p.uid, None, &p.name);
                let by_uid = !p.uid.is_empty();
                let p = convert::node_pool(p, at)?;
                put(&mut self.node_pools, k, p, origin, by_uid, at)
            }
            Object::NodeClass(c) => {
                let k = key(&c.uid, None, &c.name);
                let by_uid = !c.uid.is_empty();
                let c = convert::node_class(c, at)?;
                put(&mut self.node_classes, k, c, origin, by_uid, at)
            }
            Object::DaemonSet(d) => {
                let k = key(&d.uid, Some(&d.namespace), &d.name);
                let by_uid = !d.uid.is_empty();
                let d = convert::daemon_set(d, at)?;
                put(&mut self.daemon_sets, k, d, origin, by_uid, at)
            }
            Object::Pdb(p) => {
                let k = key(&p.uid, Some(&p.namespace), &p.name);
                let by_uid = !p.uid.is_empty();
                put(&mut self.pdbs, k, convert::pdb(p, at)?, origin, by_uid, at)
            }
            Object::Namespace(n) => {
                let k = key(&n.uid, None, &n.name);
                let by_uid = !n.uid.is_empty();
                let n = convert::namespace(n, at)?;
                put(&mut self.namespaces, k, n, origin, by_uid, at)
            }
            Object::Pvc(c) => {
                let k = key(&c.uid, Some(&c.namespace), &c.name);
                let by_uid = !c.uid.is_empty();
                put(&mut self.pvcs, k, convert::pvc(c, at)?, origin, by_uid, at)
            }
            Object::Pv(v) => {
                let k = key(&v.uid, None, &v.name);
                let by_uid = !v.uid.is_empty();
                put(&mut self.pvs, k, convert::pv(v, at)?, origin, by_uid, at)
            }
            Object::StorageClass(c) => {
                let k = key(&c.uid, None, &c.name);
                let by_uid = !c.uid.is_empty();
                let c = convert::storage_class(c, at)?;
                put(&mut self.storage_classes, k, c, origin, by_uid, at)
            }
        }
    }

    fn batch(&self, sequence: u64, now: i64) -> Batch {
        fn objects<T: Clone>(s: &Store<T>) -> Vec<T> {
            s.values().map(|h| h.object.clone()).collect()
        }
        let base = self.base.as_ref();
        let mut options = base.map(|b| b.options.clone()).unwrap_or_default();
        options.now = now;
        Batch {
            sequence,
            catalog: base.map(|b| b.catalog.clone()).unwrap_or_default(),
            default_catalog: base.is_some_and(|b| b.default_catalog),
            options,
            snapshot: ClusterSnapshot {
                pods: objects(&self.pods),
                nodes: objects(&self.nodes),
                node_claims: objects(&self.node_claims),
                node_pools: objects(&self.node_pools),
                node_classes: objects(&self.node_classes),
                daemon_sets: objects(&self.daemon_sets),
                pdbs: objects(&self.pdbs),
                namespaces: objects(&self.namespaces),
                pvcs: objects(&self.pvcs),
                pvs: objects(&self.pvs),
                storage_classes: objects(&self.storage_classes),
            },
        }
    }
}

/// Splits a validated batch's path `snapshot.<list>[<i>]<rest>` into its kind, index and rest.
fn batch_path(field: &str) -> Option<(Kind, usize, &str)> {
    let tail = field.strip_prefix("snapshot.")?;
    let (list, tail) = tail.split_once('[')?;
    let (index, rest) = tail.split_once(']')?;
    let kind = Kind::ALL.into_iter().find(|k| k.list() == list)?;
    Some((kind, index.parse().ok()?, rest))
}

impl Drop for SessionState {
    fn drop(&mut self) {
        self.gauge.dec_by(self.counted);
    }
}
