//! `Planner.Session`: a snapshot, then deltas keyed by uid, a plan per closed batch.
//!
//! Each stream owns one [`SessionState`]; nothing is shared between streams, so any replica can
//! serve any session and a reconnecting client simply resends a snapshot. The state is bounded
//! by `session_max_objects`, and all sessions' states together by `max_held_objects` (one
//! permit of a server-wide semaphore per object held, taken before a snapshot is decoded: past
//! it the stream ends with RESOURCE_EXHAUSTED, naming the limit); it is dropped (its gauge and
//! permits released) when the stream ends. A closed batch waits for one of the server's
//! planning permits before its snapshot is built from the state, so the copies planned from
//! exist for at most `--max-concurrent-requests` sessions at a time. Each plan's
//! commands go to the actuator when one is configured; a failed submission is logged and
//! counted, and the next batch resubmits (commands carry idempotency keys).

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use proto::Kind;
use proto::v1 as pb;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};
use tracing::Instrument;

use super::convert::to_model as convert;
use super::convert::{At, to_wire};
use super::planning::{CatalogSource, PlannerService, blocking};
use super::{Error, Result};
use planner::exclusion::{self, Exclusion};
use planner::model::{self, ClusterSnapshot, PlanOptions};
use planner_wire::to_model::isolated;

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
        service.held.clone(),
        service.options.max_held_objects,
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
                // A frame that cannot be decoded ends the stream with INVALID_ARGUMENT (a
                // transport failure has no one left to tell).
                tracing::info!(code = ?status.code(), message = status.message(), "Session stream failed");
                let e = Status::invalid_argument(format!(
                    "session update cannot be read: {}",
                    status.message()
                ));
                metrics.request("Session", e.code(), 0.0);
                let _ = tx.send(Err(e)).await;
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
            Ok(Some(close)) => {
                // One of the server's permits per plan, as a unary Plan takes: queued here, so
                // the stream waits (backpressure) instead of planning past the limit. The
                // batch's snapshot (a copy of what the session holds) is built only once the
                // permit is held, so sessions waiting for one hold nothing but their state.
                let permit = match &service.permits {
                    Some(p) => {
                        let acquired = tokio::select! {
                            p = p.clone().acquire_owned() => p.ok(),
                            () = tx.closed() => {
                                tracing::info!("Session closed while waiting to plan");
                                break;
                            }
                        };
                        if acquired.is_none() {
                            break;
                        }
                        acquired
                    }
                    None => None,
                };
                let svc = service.clone();
                let cancel = planner::cancel::CancelToken::new();
                let run_cancel = cancel.clone();
                let planned = blocking(move || {
                    let mut batch = state.batch(close.sequence, close.now);
                    // A session on a region's catalog plans from the live catalog current at
                    // each batch when it is that region's (with the zones it says are
                    // shifted), from the built-in one otherwise.
                    let picked = svc.pick_catalog(&batch.catalog)?;
                    picked.shift(&mut batch.snapshot);
                    let mut plan = svc.run_plan(
                        &batch.snapshot,
                        &picked.catalog,
                        &batch.options,
                        &run_cancel,
                    )?;
                    planner::exclusion::explain(&mut plan, &batch.snapshot, &batch.excluded);
                    picked.stamp(&mut plan, &batch.snapshot);
                    Ok((state, batch, plan))
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
                drop(permit);
                let (batch, mut plan) = match planned {
                    Ok((st, batch, plan)) => {
                        state = st;
                        (batch, plan)
                    }
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

/// A batch the client closed: planned once a permit is held.
pub(crate) struct Close {
    sequence: u64,
    now: i64,
}

/// A closed batch, ready to plan.
pub(crate) struct Batch {
    pub(crate) sequence: u64,
    pub(crate) snapshot: ClusterSnapshot,
    /// Inline, or a region's (chosen at each plan).
    pub(crate) catalog: CatalogSource,
    pub(crate) options: PlanOptions,
    /// Objects left out of `snapshot`, with why.
    pub(crate) excluded: Vec<Exclusion>,
}

struct Base {
    catalog: CatalogSource,
    options: PlanOptions,
    /// Zones under an ARC zonal shift, as the snapshot said (a change comes as a new snapshot).
    shifted_zones: Vec<String>,
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
    /// The server's object permits this session holds, one per object.
    held: Option<OwnedSemaphorePermit>,
    budget: Arc<Semaphore>,
    budget_limit: usize,
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
    node_overlays: Store<model::NodeOverlay>,
    capacity_buffers: Store<model::CapacityBuffer>,
    resource_claims: Store<model::ResourceClaim>,
    device_classes: Store<model::DeviceClass>,
    resource_slices: Store<model::ResourceSlice>,
    /// Objects that cannot be decoded, by kind and key, each with why; left out of every batch
    /// until an upsert replaces them or a delete removes them.
    rejected: BTreeMap<(Kind, String), Exclusion>,
}

/// Objects in a snapshot's lists.
fn objects_in(s: &pb::ClusterSnapshot) -> usize {
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
        + s.resource_claims.len()
        + s.device_classes.len()
        + s.resource_slices.len()
}

/// Stores one object. Inside a snapshot a key may appear once: a second object with the same
/// uid (or, without a uid, the same name) is not stored, and the field and why come back
/// (naming both places). In a delta an upsert of a key already held is an update, as a
/// Kubernetes watch's MODIFIED event is.
fn put<T>(
    store: &mut Store<T>,
    key: String,
    object: T,
    origin: Origin,
    by_uid: bool,
) -> Option<(&'static str, String)> {
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
        return Some((
            field,
            format!(
                "duplicate {what} {key:?}: {} repeats {} of the same snapshot; the first is kept",
                origin.path(),
                first.origin.path()
            ),
        ));
    }
    store.insert(key, Held { object, origin });
    None
}

// === impl SessionState ===

impl SessionState {
    pub(crate) fn new(
        limit: usize,
        gauge: Gauge,
        budget: Arc<Semaphore>,
        budget_limit: usize,
    ) -> Self {
        Self {
            base: None,
            next_sequence: None,
            limit,
            gauge,
            counted: 0,
            held: None,
            budget,
            budget_limit,
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
            node_overlays: BTreeMap::new(),
            capacity_buffers: BTreeMap::new(),
            resource_claims: BTreeMap::new(),
            device_classes: BTreeMap::new(),
            resource_slices: BTreeMap::new(),
            rejected: BTreeMap::new(),
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
            + self.node_overlays.len()
            + self.capacity_buffers.len()
            + self.resource_claims.len()
            + self.device_classes.len()
            + self.resource_slices.len()
            + self.rejected.len()
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
        self.node_overlays.clear();
        self.capacity_buffers.clear();
        self.resource_claims.clear();
        self.device_classes.clear();
        self.resource_slices.clear();
        self.rejected.clear();
    }

    fn recount(&mut self) -> Result<()> {
        let n = self.len();
        let now = i64::try_from(n).unwrap_or(i64::MAX);
        self.gauge.inc_by(now - self.counted);
        self.counted = now;
        let over = if n > self.limit {
            Err(Error::SessionTooLarge {
                objects: n,
                limit: self.limit,
            })
        } else {
            self.reserve(n)
        };
        if over.is_err() {
            // Release the memory now: the stream is about to end.
            self.clear();
            self.recount_quiet();
        }
        over
    }

    fn recount_quiet(&mut self) {
        let now = i64::try_from(self.len()).unwrap_or(i64::MAX);
        self.gauge.inc_by(now - self.counted);
        self.counted = now;
        let _ = self.reserve(self.len());
    }

    /// Holds exactly `n` of the server's object permits (`--max-held-objects`): more are taken
    /// without waiting, or refused; fewer are given back.
    fn reserve(&mut self, n: usize) -> Result<()> {
        let have = self.held.as_ref().map_or(0, |p| p.num_permits());
        if n > have {
            let more = n - have;
            let extra = u32::try_from(more)
                .ok()
                .and_then(|m| self.budget.clone().try_acquire_many_owned(m).ok());
            let Some(extra) = extra else {
                return Err(Error::SessionsFull {
                    objects: more,
                    held: self
                        .budget_limit
                        .saturating_sub(self.budget.available_permits()),
                    limit: self.budget_limit,
                });
            };
            match &mut self.held {
                Some(p) => p.merge(extra),
                None => self.held = Some(extra),
            }
        } else if n < have
            && let Some(p) = &mut self.held
        {
            drop(p.split(have - n));
        }
        Ok(())
    }

    /// Applies one update; a closed batch comes back (its snapshot is built by
    /// [`SessionState::batch`]).
    ///
    /// # Errors
    /// Out-of-order or pre-snapshot updates, invalid objects (named by the update's sequence
    /// and their path in it), a session over its limit, and sessions over the server's.
    pub(crate) fn apply(
        &mut self,
        update: pb::ClusterUpdate,
        service: &PlannerService,
    ) -> Result<Option<Close>> {
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
    ) -> Result<Option<Close>> {
        use pb::cluster_update::Update;
        let seq = update.sequence;
        let root = At::ROOT;
        match update.update {
            None => Err(Error::EmptyUpdate { sequence: seq }),
            Some(Update::Snapshot(mut s)) => {
                let at = root.field("snapshot");
                let mut objects = s.snapshot.take().unwrap_or_default();
                let shifted_zones: Vec<String> = std::mem::take(&mut objects.shifted_zones)
                    .into_iter()
                    .filter(|z| !z.trim().is_empty())
                    .collect();
                let input = convert::session_snapshot(s, at)?;
                let catalog =
                    service.catalog_source(input.catalog, "snapshot.catalog_ref.region")?;
                self.clear();
                // Room for the snapshot is checked before it is decoded into the state.
                let incoming = objects_in(&objects);
                if incoming > self.limit {
                    self.recount_quiet();
                    return Err(Error::SessionTooLarge {
                        objects: incoming,
                        limit: self.limit,
                    });
                }
                if let Err(e) = self.reserve(incoming) {
                    self.recount_quiet();
                    return Err(e);
                }
                self.load(objects, seq);
                self.base = Some(Base {
                    catalog,
                    options: input.options,
                    shifted_zones,
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
                        self.apply_delta(d, seq);
                        self.recount()?;
                        Ok(None)
                    }
                    Update::CloseBatch(c) => Ok(Some(Close {
                        sequence: seq,
                        now: c.now,
                    })),
                    Update::Snapshot(_) => Ok(None),
                }
            }
        }
    }

    fn apply_delta(&mut self, d: pb::Delta, sequence: u64) {
        for (i, u) in d.upserts.into_iter().enumerate() {
            let Some(object) = u.object else {
                // A kind this planner does not know (a newer client): nothing to plan with.
                tracing::debug!(sequence, index = i, "Upsert of an unknown kind ignored");
                continue;
            };
            let kind = Kind::of(&object);
            let origin = Origin {
                sequence,
                kind,
                index: i,
                in_snapshot: false,
            };
            self.upsert(object, origin);
        }
        for del in d.deletes {
            let uid = del.uid.as_str();
            if let Some(kind) = Kind::named(&del.kind) {
                self.rejected.remove(&(kind, uid.to_string()));
            }
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
                "NodeOverlay" => drop(self.node_overlays.remove(uid)),
                "CapacityBuffer" => drop(self.capacity_buffers.remove(uid)),
                "ResourceClaim" => drop(self.resource_claims.remove(uid)),
                "DeviceClass" => drop(self.device_classes.remove(uid)),
                "ResourceSlice" => drop(self.resource_slices.remove(uid)),
                // A kind this planner does not know holds nothing here.
                other => tracing::debug!(kind = other, "Delete of an unknown kind ignored"),
            }
        }
    }

    /// Loads a snapshot's objects, keyed exactly as deltas key them.
    fn load(&mut self, s: pb::ClusterSnapshot, sequence: u64) {
        use pb::upsert::Object;
        fn each<T>(
            this: &mut SessionState,
            items: Vec<T>,
            sequence: u64,
            kind: Kind,
            wrap: fn(T) -> Object,
        ) {
            for (index, x) in items.into_iter().enumerate() {
                let origin = Origin {
                    sequence,
                    kind,
                    index,
                    in_snapshot: true,
                };
                this.upsert(wrap(x), origin);
            }
        }
        each(self, s.pods, sequence, Kind::Pod, Object::Pod);
        each(self, s.nodes, sequence, Kind::Node, Object::Node);
        each(
            self,
            s.node_claims,
            sequence,
            Kind::NodeClaim,
            Object::NodeClaim,
        );
        each(
            self,
            s.node_pools,
            sequence,
            Kind::NodePool,
            Object::NodePool,
        );
        each(
            self,
            s.node_classes,
            sequence,
            Kind::NodeClass,
            Object::NodeClass,
        );
        each(
            self,
            s.daemon_sets,
            sequence,
            Kind::DaemonSet,
            Object::DaemonSet,
        );
        each(self, s.pdbs, sequence, Kind::Pdb, Object::Pdb);
        each(
            self,
            s.namespaces,
            sequence,
            Kind::Namespace,
            Object::Namespace,
        );
        each(self, s.pvcs, sequence, Kind::Pvc, Object::Pvc);
        each(self, s.pvs, sequence, Kind::Pv, Object::Pv);
        each(
            self,
            s.storage_classes,
            sequence,
            Kind::StorageClass,
            Object::StorageClass,
        );
        each(
            self,
            s.node_overlays,
            sequence,
            Kind::NodeOverlay,
            Object::NodeOverlay,
        );
        each(
            self,
            s.capacity_buffers,
            sequence,
            Kind::CapacityBuffer,
            Object::CapacityBuffer,
        );
        each(
            self,
            s.resource_claims,
            sequence,
            Kind::ResourceClaim,
            Object::ResourceClaim,
        );
        each(
            self,
            s.device_classes,
            sequence,
            Kind::DeviceClass,
            Object::DeviceClass,
        );
        each(
            self,
            s.resource_slices,
            sequence,
            Kind::ResourceSlice,
            Object::ResourceSlice,
        );
    }

    /// Upserts one object. An object that cannot be decoded is held as its exclusion (a bound
    /// pod also as a placeholder that protects its node) until an upsert replaces it or a delete
    /// removes it.
    fn upsert(&mut self, object: pb::upsert::Object, origin: Origin) {
        use pb::upsert::Object;
        /// Kind name, namespace and name of the object, for its exclusion.
        type Id = (&'static str, String, String);
        #[allow(clippy::too_many_arguments)] // One call per kind below; a struct would only rename these.
        fn store<T>(
            this: &mut SessionState,
            kind: Kind,
            key: String,
            id: Id,
            decoded: std::result::Result<T, Exclusion>,
            origin: Origin,
            by_uid: bool,
            pick: fn(&mut SessionState) -> &mut Store<T>,
        ) {
            match decoded {
                Ok(v) => match put(pick(this), key.clone(), v, origin, by_uid) {
                    None => {
                        this.rejected.remove(&(kind, key));
                    }
                    Some((field, why)) => {
                        let x =
                            Exclusion::new(id.0, &id.1, &id.2, exclusion::DUPLICATE, why, field);
                        this.rejected.insert((kind, key), x);
                    }
                },
                Err(e) => {
                    pick(this).remove(&key);
                    this.rejected.insert((kind, key), e);
                }
            }
        }
        let k = Kind::of(&object);
        let (key, by_uid) = (object.key(), object.has_uid());
        match object {
            Object::Pod(p) => {
                let stand_in = isolated::pod_placeholder(&p);
                let id: Id = ("Pod", p.namespace.clone(), p.name.clone());
                let d = isolated::decode(p, "Pod", &id.1, &id.2, convert::pod);
                let failed = d.is_err();
                store(self, k, key.clone(), id, d, origin, by_uid, |s| &mut s.pods);
                if failed && let Some(x) = stand_in {
                    self.pods.insert(key, Held { object: x, origin });
                }
            }
            Object::Node(n) => {
                let id: Id = ("Node", String::new(), n.name.clone());
                let d = isolated::decode(n, id.0, "", &id.2, convert::node);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.nodes);
            }
            Object::NodeClaim(c) => {
                let id: Id = ("NodeClaim", String::new(), c.name.clone());
                let d = isolated::decode(c, id.0, "", &id.2, convert::node_claim);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.node_claims);
            }
            Object::NodePool(p) => {
                let id: Id = ("NodePool", String::new(), p.name.clone());
                let d = isolated::node_pool(p);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.node_pools);
            }
            Object::NodeClass(c) => {
                let id: Id = ("EC2NodeClass", String::new(), c.name.clone());
                let d = isolated::decode(c, id.0, "", &id.2, convert::node_class);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.node_classes);
            }
            Object::DaemonSet(d) => {
                let id: Id = ("DaemonSet", d.namespace.clone(), d.name.clone());
                let d = isolated::decode(d, id.0, &id.1, &id.2, convert::daemon_set);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.daemon_sets);
            }
            Object::Pdb(p) => {
                let id: Id = ("PodDisruptionBudget", p.namespace.clone(), p.name.clone());
                let d = isolated::decode(p, id.0, &id.1, &id.2, convert::pdb);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.pdbs);
            }
            Object::Namespace(n) => {
                let id: Id = ("Namespace", String::new(), n.name.clone());
                let d = isolated::decode(n, id.0, "", &id.2, convert::namespace);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.namespaces);
            }
            Object::Pvc(c) => {
                let id: Id = ("PersistentVolumeClaim", c.namespace.clone(), c.name.clone());
                let d = isolated::decode(c, id.0, &id.1, &id.2, convert::pvc);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.pvcs);
            }
            Object::Pv(v) => {
                let id: Id = ("PersistentVolume", String::new(), v.name.clone());
                let d = isolated::decode(v, id.0, "", &id.2, convert::pv);
                store(self, k, key, id, d, origin, by_uid, |s| &mut s.pvs);
            }
            Object::StorageClass(c) => {
                let id: Id = ("StorageClass", String::new(), c.name.clone());
                let d = isolated::decode(c, id.0, "", &id.2, convert::storage_class);
                store(self, k, key, id, d, origin, by_uid, |s| {
                    &mut s.storage_classes
                });
            }
            Object::NodeOverlay(o) => {
                let id: Id = ("NodeOverlay", String::new(), o.name.clone());
                let d = isolated::decode(o, id.0, "", &id.2, convert::node_overlay);
                store(self, k, key, id, d, origin, by_uid, |s| {
                    &mut s.node_overlays
                });
            }
            Object::CapacityBuffer(b) => {
                let id: Id = ("CapacityBuffer", b.namespace.clone(), b.name.clone());
                let d = isolated::decode(b, id.0, &id.1, &id.2, convert::capacity_buffer);
                store(self, k, key, id, d, origin, by_uid, |s| {
                    &mut s.capacity_buffers
                });
            }
            Object::ResourceClaim(c) => {
                let id: Id = ("ResourceClaim", c.namespace.clone(), c.name.clone());
                let d = isolated::decode(c, id.0, &id.1, &id.2, convert::resource_claim);
                store(self, k, key, id, d, origin, by_uid, |s| {
                    &mut s.resource_claims
                });
            }
            Object::DeviceClass(c) => {
                let id: Id = ("DeviceClass", String::new(), c.name.clone());
                let d = isolated::decode(c, id.0, "", &id.2, convert::device_class);
                store(self, k, key, id, d, origin, by_uid, |s| {
                    &mut s.device_classes
                });
            }
            Object::ResourceSlice(c) => {
                let id: Id = ("ResourceSlice", String::new(), c.name.clone());
                let d = isolated::decode(c, id.0, "", &id.2, convert::resource_slice);
                store(self, k, key, id, d, origin, by_uid, |s| {
                    &mut s.resource_slices
                });
            }
        }
    }

    /// The batch to plan: a copy of the objects held, through the one validation every door
    /// runs, object by object (an object that breaks a rule is left out).
    fn batch(&self, sequence: u64, now: i64) -> Batch {
        fn objects<T: Clone>(s: &Store<T>) -> Vec<T> {
            s.values().map(|h| h.object.clone()).collect()
        }
        let base = self.base.as_ref();
        let mut options = base.map(|b| b.options.clone()).unwrap_or_default();
        options.now = now;
        let mut snapshot = ClusterSnapshot {
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
            capacity_buffers: objects(&self.capacity_buffers),
            shifted_zones: base.map(|b| b.shifted_zones.clone()).unwrap_or_default(),
            node_overlays: objects(&self.node_overlays),
            resource_claims: objects(&self.resource_claims),
            device_classes: objects(&self.device_classes),
            resource_slices: objects(&self.resource_slices),
        };
        let excluded = isolated::finish(&mut snapshot, self.rejected.values().cloned().collect());
        Batch {
            sequence,
            catalog: base.map(|b| b.catalog.clone()).unwrap_or_default(),
            options,
            snapshot,
            excluded,
        }
    }
}

impl Drop for SessionState {
    fn drop(&mut self) {
        self.gauge.dec_by(self.counted);
    }
}
