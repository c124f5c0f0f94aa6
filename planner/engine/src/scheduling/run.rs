//! The state of one solve or simulation ([`Run`]) over the tables a [`super::Scheduler`]
//! builds once per plan ([`Tables`]): the placement loop that puts each pod on existing
//! capacity, on a claim opened in this run, or on a new claim from the first NodePool that
//! takes it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use crate::labels;
use crate::model::{ClusterSnapshot, PlanOptions, Pod};
use crate::requirements::{Requirements, taints};

use super::dims::{self, Dims, Vector};
use super::existing_node::{ExistingNode, Target};
use super::node_claim::{Claim, Reject};
use super::pools::Pool;
use super::preferences::Preferences;
use super::queue::Queue;
use super::room::Room;
use super::signature::{Sig, Sigs};
use super::topology::{self, Topology, TopologyInput};
use super::volumes::VolumeTopology;

/// What the scheduler builds once per plan and every run reads: NodePool tables, existing
/// capacity, the pending pods and the topology domain universe.
#[derive(Debug)]
pub(super) struct Tables<'a> {
    /// Checked once per pod placed: a cancelled run stops placing.
    pub(super) cancel: crate::cancel::CancelToken,
    pub(super) snapshot: &'a ClusterSnapshot,
    pub(super) options: &'a PlanOptions,
    pub(super) dims: Dims,
    /// NodePool tables, by weight (shared by the schedulers of one plan, see
    /// [`super::scheduler::SharedTables`]).
    pub(super) pools: std::sync::Arc<super::tables::PoolTables<'a>>,
    pub(super) existing: Vec<ExistingNode>,
    /// Indices into `existing` by node (or claim) name, to drop the removed ones of a run
    /// without comparing every name.
    pub(super) existing_by_name: BTreeMap<String, Vec<u32>>,
    /// Preference relaxation of the snapshot (see [`Preferences::new`]).
    pub(super) prefs: Preferences,
    /// Pending pods to provision for, in queue order.
    pub(super) pending: Vec<&'a Pod>,
    /// Whether any pod in the snapshot has required or preferred pod anti-affinity (then every
    /// pod may be constrained by topology).
    pub(super) any_anti_affinity: bool,
    /// Whether topology matters at all in this snapshot.
    pub(super) topology_active: bool,
    /// Topology domain universe per key.
    pub(super) domains: BTreeMap<String, BTreeSet<String>>,
    /// PersistentVolumeClaims, volumes and classes, for volume topology.
    pub(super) volumes: VolumeTopology<'a>,
    pub(super) notes: Vec<String>,
    /// The distinct label selectors of every pod in the snapshot (spread, affinity and
    /// anti-affinity terms, required and preferred), built on first use and shared by every
    /// simulation of this scheduler (see `packing::fill_gaps`).
    pub(super) snapshot_selectors: std::sync::OnceLock<Vec<crate::model::LabelSelector>>,
    /// The selectors of the snapshot's terms that count pods by more than their zone, built on
    /// first use and shared by every simulation of this scheduler (see
    /// `packing::empty_zoned_claims`).
    pub(super) zone_blind_selectors: std::sync::OnceLock<Vec<crate::model::LabelSelector>>,
    /// What every run's topology reads of the snapshot (nodes, bound pods, NodePools, the
    /// domain universe), built by the first run that needs it.
    pub(super) topology: topology::Shared,
    /// Existing nodes by what topology reads of them, per set of keys groups look at (see
    /// [`Classes`]), built by the first run with that set.
    pub(super) topology_classes: std::sync::Mutex<HashMap<Vec<String>, Arc<Classes>>>,
}

/// Existing nodes grouped by their requirements on the keys topology groups look at: topology
/// answers a pod the same on every node of one class, so a pod trying nodes asks once per
/// class.
#[derive(Debug, Default)]
pub(super) struct Classes {
    /// Per existing node of the scheduler: its class.
    of_node: Vec<u32>,
    /// Per class: the node half of [`Topology::node_requirements`].
    reqs: Vec<Requirements>,
}

// === impl Tables ===

impl Tables<'_> {
    /// The [`Classes`] of the existing nodes under `topology`'s current keys.
    fn classes(&self, topology: &Topology) -> Arc<Classes> {
        let keys = topology.keys();
        let mut cache = self
            .topology_classes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cache.get(&keys) {
            return Arc::clone(c);
        }
        let mut c = Classes::default();
        let mut ids: HashMap<Requirements, u32> = HashMap::new();
        for n in &self.existing {
            let reqs = topology.node_key_requirements(&n.reqs);
            let id = match ids.get(&reqs) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(c.reqs.len()).unwrap_or(u32::MAX);
                    ids.insert(reqs.clone(), id);
                    c.reqs.push(reqs);
                    id
                }
            };
            c.of_node.push(id);
        }
        let c = Arc::new(c);
        cache.insert(keys, Arc::clone(&c));
        c
    }
}

/// The types of a pool a signature can use on its own, or why none.
pub(super) type PoolFit = Result<Rc<[u32]>, String>;

/// One pod being placed (a copy when preferences were relaxed or stripped).
#[derive(Clone, Debug)]
pub(super) struct Item<'a> {
    pub(super) pod: Cow<'a, Pod>,
    pub(super) sig: u32,
}

/// The state of one solve or simulation.
pub(super) struct Run<'s, 'a> {
    pub(super) s: &'s Tables<'a>,
    pub(super) sigs: Sigs,
    pub(super) items: Vec<Item<'a>>,
    /// The scheduler's existing nodes minus the removed ones, with what this run placed.
    pub(super) existing: Vec<Target<'s>>,
    /// Their free room, to skip the nodes a pod does not fit on.
    room: Room,
    pub(super) claims: Vec<Claim>,
    /// Per pool: (slot, amount left under the limit).
    pub(super) remaining: Vec<Vec<(usize, i64)>>,
    pub(super) topology: Topology,
    /// Per signature: the first existing node / claim that has not rejected it for good.
    cur_existing: Vec<u32>,
    cur_claims: Vec<u32>,
    /// Per (signature, pool): the pool's types the signature can use alone, or why none.
    pool_fit: HashMap<(u32, u32), PoolFit>,
    placeholder: u32,
    /// Items that could not be placed, with reasons.
    pub(super) unschedulable: Vec<(u32, String)>,
    prefs: Preferences,
    /// Per entry of `existing`: its index among the scheduler's existing nodes.
    existing_ids: Vec<u32>,
    /// The [`Classes`] of the existing nodes, with the [`Topology::key_count`] they are for.
    classes: Option<(usize, Arc<Classes>)>,
    /// Per class, during one pod's pass over the existing nodes: topology's answer (`Err`:
    /// whether the rejection is permanent).
    answers: Vec<Option<Result<Requirements, bool>>>,
}

// === impl Run ===

impl<'s, 'a> Run<'s, 'a> {
    /// True once the caller cancelled this plan: the cost improvement stops and keeps what it
    /// has (the caller drops the partial result).
    pub(super) fn is_cancelled(&self) -> bool {
        self.s.cancel.is_cancelled()
    }

    /// Places `items` in order (relaxing preferences of those that do not fit) with the
    /// nodes and NodeClaims named in `removed` gone.
    pub(super) fn new(
        s: &'s Tables<'a>,
        removed: &BTreeSet<String>,
        mut items: Vec<Item<'a>>,
    ) -> Self {
        let mut gone = vec![false; s.existing.len()];
        for name in removed {
            for &i in s.existing_by_name.get(name).map_or(&[][..], Vec::as_slice) {
                gone[i as usize] = true;
            }
        }
        let existing_ids: Vec<u32> = (0..s.existing.len())
            .filter(|&i| !gone[i])
            .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        let existing: Vec<Target<'s>> = existing_ids
            .iter()
            .map(|&i| Target::new(&s.existing[i as usize]))
            .collect();
        let mut remaining: Vec<Vec<(usize, i64)>> =
            s.pools.iter().map(|p| p.limits.clone()).collect();
        for (pi, pool) in s.pools.iter().enumerate() {
            if remaining[pi].is_empty() {
                // No limits: nothing to count.
                continue;
            }
            for n in existing.iter().map(|t| t.node) {
                if n.pool.as_deref() == Some(pool.name()) {
                    for (slot, left) in &mut remaining[pi] {
                        *left -= n.capacity[*slot];
                    }
                }
            }
        }
        let pending_refs: Vec<&Pod> = items.iter().map(|i| i.pod.as_ref()).collect();
        let mut topology = Topology::with_shared(
            &TopologyInput {
                snapshot: s.snapshot,
                pending: &pending_refs,
                domains: &s.domains,
                excluded_nodes: removed,
            },
            &s.topology,
        );
        drop(pending_refs);
        let mut sigs = Sigs::default();
        for it in &mut items {
            it.sig = sigs.intern(&it.pod, &s.dims, s.any_anti_affinity, &s.volumes, &topology);
        }
        topology.register_all(
            labels::HOSTNAME,
            existing.iter().filter_map(|t| t.node.hostname.as_deref()),
        );
        let n_items = items.len();
        let room = Room::new(existing.iter().map(|t| &t.node.available[..]), s.dims.len());
        let mut run = Run {
            s,
            sigs,
            items,
            existing,
            room,
            claims: Vec::new(),
            remaining,
            topology,
            cur_existing: Vec::new(),
            cur_claims: Vec::new(),
            pool_fit: HashMap::new(),
            placeholder: 0,
            unschedulable: Vec::new(),
            prefs: s.prefs,
            existing_ids,
            classes: None,
            answers: Vec::new(),
        };
        let mut errors: Vec<Option<String>> = vec![None; n_items];
        // Real pods first, to the end of their retries; CapacityBuffer virtual pods (the lowest
        // priority) then take what is left, so a buffer never takes room a real pod could use.
        // Pods with DRA requests while `ignoreDRARequests` is on (Karpenter's DRAError), and
        // pods whose claims cannot be allocated anywhere, fail at once, their preferences never
        // relaxed (crate::dra).
        let mut left: Vec<u32> = Vec::new();
        let mut queued: Vec<u32> = Vec::with_capacity(n_items);
        for i in 0..n_items as u32 {
            match crate::dra::refusal(&run.items[i as usize].pod, s.options) {
                Some(reason) => {
                    errors[i as usize] = Some(reason);
                    left.push(i);
                }
                None => queued.push(i),
            }
        }
        let (real, buffer): (Vec<u32>, Vec<u32>) = queued
            .into_iter()
            .partition(|&i| !crate::buffers::is_virtual(&run.items[i as usize].pod));
        for phase in [real, buffer] {
            let mut q = Queue::new(phase);
            while let Some(i) = q.pop() {
                if s.cancel.is_cancelled() {
                    q.push(i, false);
                    break;
                }
                match run.add(i) {
                    Ok(()) => errors[i as usize] = None,
                    Err(reason) => {
                        errors[i as usize] = Some(reason);
                        let relaxed = run.relax(i);
                        q.push(i, relaxed);
                    }
                }
            }
            left.extend(q.remaining());
        }
        left.sort_unstable();
        for i in left {
            let reason = errors[i as usize]
                .take()
                .unwrap_or_else(|| "no progress could be made".to_string());
            run.unschedulable.push((i, reason));
        }
        run
    }

    /// Drops the claims that cost improvement emptied, so that placing more pods afterwards
    /// ([`Run::add`]) never reopens one outside its pool's limits.
    pub(super) fn drop_empty_claims(&mut self) {
        self.claims.retain(|c| !c.pods.is_empty());
        self.cur_claims.iter_mut().for_each(|c| *c = 0);
    }

    fn ensure_cursors(&mut self) {
        let n = self.sigs.len();
        if self.cur_existing.len() < n {
            self.cur_existing.resize(n, 0);
            self.cur_claims.resize(n, 0);
        }
    }

    /// One relaxation step of an item's preferences; re-interns its signature.
    fn relax(&mut self, i: u32) -> bool {
        let item = &mut self.items[i as usize];
        let mut pod = item.pod.clone().into_owned();
        if !self.prefs.relax(&mut pod) {
            return false;
        }
        item.sig = self.sigs.intern(
            &pod,
            &self.s.dims,
            self.s.any_anti_affinity,
            &self.s.volumes,
            &self.topology,
        );
        item.pod = Cow::Owned(pod);
        true
    }

    /// Places item `i`, or says why it cannot be placed.
    pub(super) fn add(&mut self, i: u32) -> Result<(), String> {
        if let Some(reason) = crate::dra::refusal(&self.items[i as usize].pod, self.s.options) {
            return Err(reason);
        }
        self.ensure_cursors();
        let sig_id = self.items[i as usize].sig;
        if let Some(e) = &self.sigs.get(sig_id).invalid {
            return Err(e.clone());
        }
        if self.add_existing(i, sig_id) || self.add_claims(i, sig_id) {
            return Ok(());
        }
        self.add_new(i, sig_id)
    }

    fn add_existing(&mut self, i: u32, sig_id: u32) -> bool {
        let mut advance = true;
        let start = self.cur_existing[sig_id as usize] as usize;
        let constrained = self.sigs.get(sig_id).constrained;
        // Nothing is placed while this pod looks, so topology's answer on a node depends only
        // on the node's class: asked once per class.
        let mut answers = std::mem::take(&mut self.answers);
        answers.clear();
        let mut placed = false;
        let mut next = start;
        while let Some(n) = self.room.next(next, &self.sigs.get(sig_id).requests) {
            // The nodes skipped lack room: rejected for good, as the check would.
            if advance {
                self.cur_existing[sig_id as usize] = n as u32;
            }
            next = n + 1;
            // Resources and requirements first: they reject for good and are cheaper.
            let mut res: Result<(), bool> = self.existing[n]
                .check(self.sigs.get(sig_id), None)
                .map_err(|r| r.permanent);
            if res.is_ok() && constrained {
                let class = self.topology_class(n);
                if answers.len() <= class {
                    answers.resize(class + 1, None);
                }
                let Some((_, classes)) = &self.classes else {
                    unreachable!("topology_class sets the classes");
                };
                let answer = answers[class].get_or_insert_with(|| {
                    let node = self
                        .topology
                        .narrowed_by_pod(classes.reqs[class].clone(), &self.sigs.get(sig_id).reqs);
                    self.topology
                        .add_requirements_brief(
                            &self.items[i as usize].pod,
                            &self.sigs.get(sig_id).strict,
                            &node,
                        )
                        .map_err(|e| Reject::topology(e).permanent)
                });
                res = match answer {
                    Err(permanent) => Err(*permanent),
                    Ok(t) => self.existing[n]
                        .check(self.sigs.get(sig_id), Some(t))
                        .map_err(|r| r.permanent),
                };
            }
            match res {
                Ok(()) => {
                    let node = &mut self.existing[n];
                    node.commit(self.sigs.get(sig_id), i);
                    self.room.set(n, &node.free());
                    let pod = &self.items[i as usize].pod;
                    self.topology
                        .record(pod, &node.node.reqs, &node.node.taints);
                    placed = true;
                    break;
                }
                Err(permanent) => {
                    if permanent && advance {
                        self.cur_existing[sig_id as usize] = n as u32 + 1;
                    } else {
                        advance = false;
                    }
                }
            }
        }
        if !placed && advance {
            // Every node left lacks room or rejected the pod for good.
            self.cur_existing[sig_id as usize] = self.existing.len() as u32;
        }
        self.answers = answers;
        placed
    }

    /// The class of existing node `n` (see [`Classes`]) under the current groups; the classes
    /// are then in `self.classes`.
    fn topology_class(&mut self, n: usize) -> usize {
        let keys = self.topology.key_count();
        let classes = match &self.classes {
            Some((k, c)) if *k == keys => c,
            _ => {
                let c = self.s.classes(&self.topology);
                &self.classes.insert((keys, c)).1
            }
        };
        classes.of_node[self.existing_ids[n] as usize] as usize
    }

    fn add_claims(&mut self, i: u32, sig_id: u32) -> bool {
        let mut advance = true;
        let start = self.cur_claims[sig_id as usize] as usize;
        for c in start..self.claims.len() {
            let pool_idx = self.claims[c].pool;
            let res = match self.pool_fit(sig_id, pool_idx) {
                Err(e) => Err(Reject::permanent(e)),
                Ok(_) => self.try_claim(i, sig_id, c),
            };
            match res {
                Ok(()) => return true,
                Err(r) => {
                    if r.permanent && advance {
                        self.cur_claims[sig_id as usize] = c as u32 + 1;
                    } else {
                        advance = false;
                    }
                }
            }
        }
        false
    }

    /// Tries to add item `i` to claim `c`, committing on success.
    pub(super) fn try_claim(&mut self, i: u32, sig_id: u32, c: usize) -> Result<(), Reject> {
        let s = self.s;
        let pool = &s.pools[self.claims[c].pool];
        let sig = self.sigs.get(sig_id);
        let claim = &self.claims[c];
        if !claim.fits(sig) {
            return Err(Reject::permanent("not enough resources"));
        }
        let topo = if sig.constrained {
            // Topology sees the claim's requirements narrowed by the pod's.
            let base = self.topology.node_requirements(&claim.reqs, &sig.reqs);
            match self
                .topology
                .add_requirements(&self.items[i as usize].pod, &sig.strict, &base)
            {
                Ok(t) => Some(t),
                Err(e) => return Err(Reject::topology(e)),
            }
        } else {
            None
        };
        let n = claim.check(pool, sig, topo.as_ref(), self.s.options.min_values_policy)?;
        let claim = &mut self.claims[c];
        claim.commit(pool, sig, i, n);
        self.topology
            .record(&self.items[i as usize].pod, &claim.reqs, pool.taints());
        Ok(())
    }

    fn add_new(&mut self, i: u32, sig_id: u32) -> Result<(), String> {
        if self.s.pools.is_empty() {
            return Err("no NodePool exists".to_string());
        }
        let mut errs: Vec<String> = Vec::new();
        let s = self.s;
        for p in 0..s.pools.len() {
            let pool = &s.pools[p];
            if pool.np.replicas.is_some() {
                // A static pool launches its replicas only (Karpenter's provisioner skips it).
                errs.push(format!(
                    "NodePool {} is static (spec.replicas): it launches no node for pending pods",
                    pool.name()
                ));
                continue;
            }
            let types = match self.pool_fit(sig_id, p) {
                Err(e) => {
                    errs.push(e);
                    continue;
                }
                Ok(t) => t,
            };
            let remaining = &self.remaining[p];
            let types: Vec<u32> = if remaining.is_empty() {
                types.to_vec()
            } else {
                types
                    .iter()
                    .copied()
                    .filter(|&t| {
                        let cap = &pool.types[t as usize].capacity;
                        remaining.iter().all(|(slot, left)| cap[*slot] <= *left)
                    })
                    .collect()
            };
            if types.is_empty() {
                let left: Vec<String> = remaining
                    .iter()
                    .map(|(slot, left)| {
                        format!(
                            "{}={}",
                            self.s.dims.name(*slot),
                            fmt_amount(*slot, (*left).max(0))
                        )
                    })
                    .collect();
                errs.push(format!(
                    "NodePool {}: every instance type that fits would exceed its limits (left: {})",
                    pool.name(),
                    left.join(" ")
                ));
                continue;
            }
            self.placeholder += 1;
            let hostname = format!("hostname-placeholder-{:05}", self.placeholder);
            self.topology.register(labels::HOSTNAME, &hostname);
            self.claims.push(Claim::new(p, pool, types, hostname));
            let c = self.claims.len() - 1;
            match self.try_claim(i, sig_id, c) {
                Ok(()) => {
                    let mut max_cap: Vector = self.s.dims.zero();
                    for &t in &self.claims[c].types {
                        dims::max_in(&mut max_cap, &pool.types[t as usize].capacity);
                    }
                    for (slot, left) in &mut self.remaining[p] {
                        *left -= max_cap[*slot];
                    }
                    return Ok(());
                }
                Err(r) => {
                    self.claims.pop();
                    errs.push(format!("NodePool {}: {}", pool.name(), r.reason));
                }
            }
        }
        Err(errs.join("; "))
    }

    /// [`Run::pool_fit`] if already computed.
    pub(super) fn pool_fit_cached(&self, sig_id: u32, p: usize) -> Option<&PoolFit> {
        self.pool_fit.get(&(sig_id, p as u32))
    }

    /// [`Run::pool_fit`] without the cache.
    pub(super) fn pool_fit_uncached(&self, sig_id: u32, p: usize) -> Result<Rc<[u32]>, String> {
        compute_pool_fit(&self.s.pools[p], self.sigs.get(sig_id), &self.s.dims)
    }

    /// The types of pool `p` that signature `sig_id` can use on its own, or why none.
    pub(super) fn pool_fit(&mut self, sig_id: u32, p: usize) -> Result<Rc<[u32]>, String> {
        if let Some(r) = self.pool_fit.get(&(sig_id, p as u32)) {
            return r.clone();
        }
        let r = compute_pool_fit(&self.s.pools[p], self.sigs.get(sig_id), &self.s.dims);
        self.pool_fit.insert((sig_id, p as u32), r.clone());
        r
    }
}

fn compute_pool_fit(pool: &Pool<'_>, sig: &Sig, d: &Dims) -> Result<Rc<[u32]>, String> {
    let name = pool.name();
    if let Some(e) = &pool.unusable {
        return Err(e.clone());
    }
    if let Some(t) = taints::first_untolerated(pool.taints(), &sig.tolerations) {
        return Err(format!(
            "incompatible with NodePool {name}: did not tolerate {}",
            taints::describe(t)
        ));
    }
    if let Err(e) = pool.compatible(&pool.reqs, &sig.reqs) {
        let from_volume = sig.volume.as_ref().filter(|_| {
            sig.strict
                .get(e.key())
                .is_none_or(|r| Some(r) != sig.reqs.get(e.key()))
        });
        return Err(match from_volume {
            Some(v) => format!("incompatible with NodePool {name}: {e} (required by {v})"),
            None => format!("incompatible with NodePool {name}: {e}"),
        });
    }
    let mut reqs = pool.reqs.clone();
    reqs.add_all(&sig.reqs);
    let mut matching = 0usize;
    let mut largest: Vector = d.zero();
    let mut out = Vec::new();
    for (ti, t) in pool.types.iter().enumerate() {
        if !sig.reqs.is_empty()
            && (t.reqs.intersects(&reqs).is_err() || t.cheapest_allowed(&reqs).is_none())
        {
            continue;
        }
        matching += 1;
        let avail = &t.free;
        dims::max_in(&mut largest, avail);
        if dims::fits(&sig.requests, &t.free) {
            out.push(ti as u32);
        }
    }
    if matching == 0 {
        return Err(format!(
            "no instance type in NodePool {name} matches {}",
            sig.reqs
        ));
    }
    if out.is_empty() {
        let mut need = Vec::new();
        let mut allow = Vec::new();
        for slot in 0..d.len() {
            if sig.requests[slot] > largest[slot] {
                need.push(format!(
                    "{}={}",
                    d.name(slot),
                    fmt_amount(slot, sig.requests[slot])
                ));
                allow.push(format!(
                    "{}={}",
                    d.name(slot),
                    fmt_amount(slot, largest[slot].max(0))
                ));
            }
        }
        if need.is_empty() {
            return Err(format!(
                "no instance type in NodePool {name} fits {} at once",
                d.resources(&sig.requests)
            ));
        }
        return Err(format!(
            "no instance type in NodePool {name} fits {} (largest allows {})",
            need.join(" "),
            allow.join(" ")
        ));
    }
    Ok(out.into())
}

/// Formats an amount of a slot as a Kubernetes quantity.
pub(super) fn fmt_amount(slot: usize, v: i64) -> String {
    match slot {
        dims::MEMORY | dims::EPHEMERAL => crate::model::format_bytes(v),
        dims::PODS => v.to_string(),
        _ => crate::model::format_cpu(v),
    }
}
