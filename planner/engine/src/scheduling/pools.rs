//! Per-NodePool tables: the template requirements, the instance types the pool can launch
//! (allocatable as flat vectors, cheapest first), DaemonSet overhead and limits.

use std::collections::BTreeSet;

use crate::catalog::{Catalog, InstanceType};
use crate::labels;
use crate::model::{DaemonSet, HostPort, Labels, MinValuesPolicy, NodePool, Taint};
use crate::requirements::{Requirement, Requirements, Undefined, taints, well_known};

use super::dims::{self, Dims, Vector};

/// One instance type as a NodePool can launch it.
#[derive(Clone, Debug)]
pub(crate) struct TypeEntry {
    /// Name, e.g. `m5.large`.
    pub(crate) name: String,
    /// Allocatable (capacity minus overhead), laid out by [`Dims`].
    pub(crate) alloc: Vector,
    /// Capacity, for NodePool limits.
    pub(crate) capacity: Vector,
    /// DaemonSet overhead on a node of this type: the pool's DaemonSets whose pods would run on
    /// this type (a DaemonSet that selects another architecture does not count).
    pub(crate) daemon: Vector,
    /// What pods may use: allocatable minus `daemon`.
    pub(crate) free: Vector,
    /// The labels a node of this type carries, as requirements (well-known labels it does not
    /// carry are `DoesNotExist`), with the zones and capacity types of its usable offerings.
    pub(crate) reqs: Requirements,
    /// Usable offerings: available, with a sane price, allowed by the NodePool.
    pub(crate) offerings: Vec<Offer>,
    /// Cheapest usable offering price.
    pub(crate) price: f64,
    /// Node labels of the type (catalog labels plus instance type, arch, os when single).
    pub(crate) labels: Labels,
    /// Zones of its usable offerings, as bits over [`Pool::zone_names`].
    pub(crate) zone_mask: u64,
    /// Capacity types of its usable offerings, as bits over [`Pool::capacity_type_names`].
    pub(crate) ct_mask: u64,
}

/// One usable offering.
#[derive(Clone, Debug)]
pub(crate) struct Offer {
    /// Zone.
    pub(crate) zone: String,
    /// Capacity type.
    pub(crate) capacity_type: String,
    /// USD per hour.
    pub(crate) price: f64,
}

// === impl TypeEntry ===

impl TypeEntry {
    /// The cheapest offering allowed by `reqs` (zone and capacity type), if any.
    pub(crate) fn cheapest_allowed(&self, reqs: &Requirements) -> Option<&Offer> {
        let zone = reqs.get(labels::ZONE);
        let ct = reqs.get(labels::CAPACITY_TYPE);
        self.offerings
            .iter()
            .filter(|o| zone.is_none_or(|z| z.has(&o.zone)))
            .filter(|o| ct.is_none_or(|c| c.has(&o.capacity_type)))
            .min_by(|a, b| a.price.total_cmp(&b.price))
    }

    /// The cheapest offering allowed by the given zone and capacity-type requirements.
    pub(crate) fn cheapest_with(
        &self,
        zone: Option<&crate::requirements::Requirement>,
        ct: Option<&crate::requirements::Requirement>,
    ) -> Option<f64> {
        self.offerings
            .iter()
            .filter(|o| zone.is_none_or(|z| z.has(&o.zone)))
            .filter(|o| ct.is_none_or(|c| c.has(&o.capacity_type)))
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    }

    /// The values this type has for `key` (several for zone and capacity type).
    pub(crate) fn values<'a>(&'a self, key: &str) -> Vec<&'a str> {
        match self.reqs.get(key) {
            Some(r) if !r.is_complement() => r.values().iter().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

/// A NodePool ready for scheduling.
#[derive(Clone, Debug)]
pub(crate) struct Pool<'a> {
    /// The NodePool (shared, not borrowed: the tables of one plan's NodePools serve every
    /// cluster state of its disruption search, see `scheduler::SharedTables`).
    pub(crate) np: std::sync::Arc<NodePool>,
    /// The tables borrow nothing; the lifetime keeps the type's signature.
    _input: std::marker::PhantomData<&'a NodePool>,
    /// Template requirements: spec requirements, template labels, `karpenter.sh/nodepool`.
    pub(crate) reqs: Requirements,
    /// Instance types it can launch, cheapest first.
    pub(crate) types: Vec<TypeEntry>,
    /// DaemonSet overhead on every node of this pool.
    pub(crate) daemon: Vector,
    /// Host ports the pool's DaemonSets bind.
    pub(crate) daemon_ports: Vec<HostPort>,
    /// Why the pool cannot launch anything, if so.
    pub(crate) unusable: Option<String>,
    /// Slots limited by `spec.limits` and their limit.
    pub(crate) limits: Vec<(usize, i64)>,
    /// Notes for the plan (e.g. relaxed minValues).
    pub(crate) notes: Vec<String>,
    /// Label keys that instance types of the pool's catalog carry and that are neither well
    /// known nor defined by the template (custom labels of an `--instance-types` catalog): a
    /// pod may require them as it may require well-known ones, and a type without one reads
    /// `DoesNotExist` for it.
    pub(crate) custom_keys: BTreeSet<String>,
    /// Zones of the pool's offerings, sorted; `None` when there are more than 64.
    pub(crate) zone_names: Option<Vec<String>>,
    /// Capacity types of the pool's offerings, sorted; `None` when there are more than 64.
    pub(crate) capacity_type_names: Option<Vec<String>>,
}

// === impl Pool ===

impl<'a> Pool<'a> {
    /// Builds the table of one NodePool. `catalog` is the catalog as the pool's node class sees
    /// it; `class_missing` names a node class the pool references that is not in the input.
    pub(crate) fn new(
        np: &NodePool,
        catalog: &Catalog,
        class_missing: Option<&str>,
        daemons: &[DaemonInfo<'_>],
        d: &Dims,
        min_values: MinValuesPolicy,
    ) -> Self {
        let mut pool = Pool {
            np: std::sync::Arc::new(np.clone()),
            _input: std::marker::PhantomData,
            reqs: Requirements::new(),
            types: Vec::new(),
            daemon: d.zero(),
            daemon_ports: Vec::new(),
            unusable: None,
            limits: Vec::new(),
            notes: Vec::new(),
            custom_keys: BTreeSet::new(),
            zone_names: None,
            capacity_type_names: None,
        };
        if np.deletion_time.is_some() {
            pool.unusable = Some(format!("NodePool {} is being deleted", np.name));
            return pool;
        }
        if let Some(class) = class_missing {
            pool.unusable = Some(format!(
                "NodePool {} references EC2NodeClass {class}, which is not in the input",
                np.name
            ));
            return pool;
        }
        match template_requirements(np) {
            Ok(r) => pool.reqs = r,
            Err(e) => {
                pool.unusable = Some(format!(
                    "NodePool {} has an invalid requirement: {e}",
                    np.name
                ));
                return pool;
            }
        }
        // Each distinct key once: the catalog's types repeat the same few label keys.
        let keys: BTreeSet<&str> = catalog
            .instance_types
            .iter()
            .flat_map(|it| it.labels.keys().map(String::as_str))
            .collect();
        pool.custom_keys = keys
            .into_iter()
            .filter(|k| !well_known::is_well_known(k) && !pool.reqs.has(k))
            .map(str::to_string)
            .collect();
        let pool_daemons: Vec<&DaemonInfo<'_>> = daemons
            .iter()
            .filter(|ds| ds.compatible_with_template(&pool.reqs, &np.taints, &pool.custom_keys))
            .collect();
        for ds in &pool_daemons {
            dims::add(&mut pool.daemon, &ds.requests);
            pool.daemon_ports.extend(ds.host_ports.iter().cloned());
        }
        for it in &catalog.instance_types {
            if let Some(mut t) = type_entry(it, &pool.reqs, d) {
                for key in &pool.custom_keys {
                    if !t.reqs.has(key) {
                        t.reqs.add(Requirement::does_not_exist(key.clone()));
                    }
                }
                for ds in &pool_daemons {
                    if ds.compatible_with_type(&t.reqs) {
                        dims::add(&mut t.daemon, &ds.requests);
                    }
                }
                t.free = t.alloc.clone();
                dims::sub(&mut t.free, &t.daemon);
                pool.types.push(t);
            }
        }
        pool.types.sort_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| a.name.cmp(&b.name))
        });
        if pool.types.is_empty() {
            // Types the pool allows whose only want is a price (preview types): say so, since
            // a NodeOverlay price is what makes them usable.
            let allowed = pool.reqs.get(labels::INSTANCE_TYPE);
            let unpriced: Vec<&str> = catalog
                .instance_types
                .iter()
                .filter(|it| it.offerings.iter().any(|o| o.unpriced))
                .filter(|it| allowed.is_none_or(|r| r.has(&it.name)))
                .map(|it| it.name.as_str())
                .take(5)
                .collect();
            let hint = if unpriced.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} {} no known price: a preview type is available once a NodeOverlay with the NodeOverlay feature gate prices it)",
                    unpriced.join(", "),
                    if unpriced.len() == 1 { "has" } else { "have" }
                )
            };
            pool.unusable = Some(format!(
                "NodePool {} has no instance type with an available offering that matches its requirements{hint}",
                np.name
            ));
            return pool;
        }
        // minValues on the template: the pool's own types must be able to meet it.
        let mut unmet = None;
        for r in pool.reqs.iter() {
            if let Some(m) = r.min_values() {
                let n = distinct_values(pool.types.iter(), r.key());
                if n < m as usize {
                    match min_values {
                        MinValuesPolicy::Strict => {
                            unmet = Some(format!(
                                "NodePool {} needs minValues {m} for {} but its instance types have only {n}",
                                np.name,
                                r.key()
                            ));
                            break;
                        }
                        MinValuesPolicy::BestEffort => pool.notes.push(format!(
                            "NodePool {}: minValues {m} for {} relaxed to {n} (best effort)",
                            np.name,
                            r.key()
                        )),
                    }
                }
            }
        }
        if unmet.is_some() {
            pool.unusable = unmet;
            return pool;
        }
        if let Some(limits) = &np.limits {
            for name in &np.limited_resources {
                if let Some(i) = (0..d.len()).find(|i| d.name(*i) == name) {
                    pool.limits.push((i, limits.get(name)));
                }
            }
        }
        pool
    }

    /// Name.
    pub(crate) fn name(&self) -> &str {
        &self.np.name
    }

    /// The price of a claim of this pool with requirements `reqs` that may use `types` (indices
    /// into [`Pool::types`], cheapest first as the pool orders them): its cheapest type's
    /// cheapest allowed offering. When `reqs` narrow zones and capacity types no further than
    /// the pool does, that is the first type's price.
    pub(crate) fn price_of(&self, reqs: &Requirements, types: &[u32]) -> f64 {
        let zone = reqs.get(labels::ZONE);
        let ct = reqs.get(labels::CAPACITY_TYPE);
        if zone == self.reqs.get(labels::ZONE) && ct == self.reqs.get(labels::CAPACITY_TYPE) {
            return types
                .first()
                .map_or(f64::INFINITY, |&t| self.types[t as usize].price);
        }
        types
            .iter()
            .filter_map(|&t| self.types[t as usize].cheapest_with(zone, ct))
            .fold(f64::INFINITY, f64::min)
    }

    /// Karpenter's compatibility check of `incoming` against `base` (the pool's template or a
    /// claim of it): well-known labels and the pool's [`Pool::custom_keys`] may be undefined.
    pub(crate) fn compatible(
        &self,
        base: &Requirements,
        incoming: &Requirements,
    ) -> crate::requirements::Result<(), crate::requirements::Incompatibility> {
        if self.custom_keys.is_empty() {
            return base.compatible(incoming, Undefined::AllowWellKnown);
        }
        base.compatible_allowing(incoming, Undefined::AllowWellKnown, &|k| {
            self.custom_keys.contains(k)
        })
    }

    /// Taints pods must tolerate (startup taints are ignored, as Karpenter does).
    pub(crate) fn taints(&self) -> &[Taint] {
        &self.np.taints
    }
}

/// Number of distinct values of `key` among `types`.
pub(crate) fn distinct_values<'t>(types: impl Iterator<Item = &'t TypeEntry>, key: &str) -> usize {
    let mut set = BTreeSet::new();
    for t in types {
        for v in t.values(key) {
            set.insert(v);
        }
    }
    set.len()
}

/// A NodePool's template requirements.
pub(crate) fn template_requirements(np: &NodePool) -> crate::requirements::Result<Requirements> {
    let mut reqs = Requirements::from_input(&np.requirements)?;
    for (k, v) in &np.labels {
        reqs.add(Requirement::is_in(k.clone(), [v.clone()]));
    }
    reqs.add(Requirement::is_in(labels::NODEPOOL, [np.name.clone()]));
    Ok(reqs)
}

/// Well-known keys that an instance type defines itself (absent ones read `DoesNotExist`).
fn type_defined_key(key: &str) -> bool {
    !matches!(
        key,
        labels::NODEPOOL
            | labels::ZONE
            | labels::REGION
            | labels::CAPACITY_TYPE
            | labels::EC2_NODE_CLASS
            | "topology.k8s.aws/zone-id"
            | "karpenter.k8s.aws/capacity-reservation-id"
            | "karpenter.k8s.aws/capacity-reservation-type"
            | "node.kubernetes.io/windows-build"
    )
}

/// Builds the entry of one type for a pool, or `None` when the pool cannot launch it.
fn type_entry(it: &InstanceType, pool_reqs: &Requirements, d: &Dims) -> Option<TypeEntry> {
    let zone = pool_reqs.get(labels::ZONE);
    let ct = pool_reqs.get(labels::CAPACITY_TYPE);
    let offerings: Vec<Offer> = it
        .offerings
        .iter()
        .filter(|o| o.available && o.price.is_finite() && o.price >= 0.0)
        .filter(|o| zone.is_none_or(|z| z.has(&o.zone)))
        .filter(|o| ct.is_none_or(|c| c.has(&o.capacity_type)))
        .map(|o| Offer {
            zone: o.zone.clone(),
            capacity_type: o.capacity_type.clone(),
            price: o.price,
        })
        .collect();
    if offerings.is_empty() {
        return None;
    }
    // Most types of a catalog fall to the pool's requirements on labels they carry (family,
    // arch, size): the check at the end sees exactly `key In [label]` on those keys, so it is
    // made here first, before the entry is built (the scheduler is rebuilt for every state of a
    // disruption plan, over every type of the catalog).
    for r in pool_reqs.iter() {
        let key = r.key();
        if key == labels::OS || key == labels::ZONE || key == labels::CAPACITY_TYPE {
            // The entry narrows these further; left to the full check.
            continue;
        }
        let value = if key == labels::INSTANCE_TYPE {
            Some(&it.name)
        } else {
            it.labels.get(key)
        };
        if let Some(v) = value {
            let label = Requirement::is_in(key, [v.as_str()]);
            if !(r.intersects(&label) || r.allows_absent() && label.allows_absent()) {
                return None;
            }
        }
    }
    let mut type_labels = it.labels.clone();
    type_labels.insert(labels::INSTANCE_TYPE.to_string(), it.name.clone());
    let os: Vec<String> = if it.os.is_empty() {
        vec!["linux".to_string()]
    } else {
        it.os.clone()
    };
    if os.len() == 1 {
        type_labels.insert(labels::OS.to_string(), os[0].clone());
    }
    let mut reqs = Requirements::from_labels(&type_labels);
    reqs.add(Requirement::is_in(labels::OS, os));
    for key in well_known::WELL_KNOWN {
        if type_defined_key(key) && !reqs.has(key) {
            reqs.add(Requirement::does_not_exist(*key));
        }
    }
    reqs.add(Requirement::is_in(
        labels::ZONE,
        offerings.iter().map(|o| o.zone.clone()),
    ));
    reqs.add(Requirement::is_in(
        labels::CAPACITY_TYPE,
        offerings.iter().map(|o| o.capacity_type.clone()),
    ));
    if pool_reqs.intersects(&reqs).is_err() {
        return None;
    }
    let price = offerings
        .iter()
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min);
    Some(TypeEntry {
        name: it.name.clone(),
        alloc: d.capacity(&it.allocatable()),
        capacity: d.node_capacity(&it.capacity),
        daemon: d.zero(),
        free: d.zero(),
        reqs,
        offerings,
        price,
        labels: type_labels,
        zone_mask: 0,
        ct_mask: 0,
    })
}

/// A DaemonSet as the scheduler uses it.
#[derive(Clone, Debug)]
pub(crate) struct DaemonInfo<'a> {
    /// The DaemonSet.
    pub(crate) ds: &'a DaemonSet,
    /// Requests of its pod.
    pub(crate) requests: Vector,
    /// Host ports its pod binds.
    pub(crate) host_ports: Vec<HostPort>,
    /// `nodeSelector` plus each required node-affinity term (ORed); one entry when there is no
    /// term. `None` when the template's requirements are malformed (it then runs nowhere).
    terms: Option<Vec<Requirements>>,
}

// === impl DaemonInfo ===

impl<'a> DaemonInfo<'a> {
    /// Prepares a DaemonSet.
    pub(crate) fn new(ds: &'a DaemonSet, d: &Dims) -> Self {
        let t = &ds.template;
        let mut terms = Some(Vec::new());
        let base = Requirements::from_labels(&t.node_selector);
        if t.required_node_affinity.is_empty() {
            terms = Some(vec![base]);
        } else {
            for term in &t.required_node_affinity {
                match Requirements::from_term(term) {
                    Ok(r) => {
                        let mut all = base.clone();
                        all.add_all(&r);
                        if let Some(v) = terms.as_mut() {
                            v.push(all);
                        }
                    }
                    Err(_) => {
                        terms = None;
                        break;
                    }
                }
            }
        }
        Self {
            ds,
            requests: d.vector(&t.requests),
            host_ports: super::ports::normalize_ports(&t.host_ports),
            terms,
        }
    }

    /// Whether its pod would run on nodes of a template (Karpenter's `isDaemonPodCompatible`:
    /// tolerate the taints, PreferNoSchedule always tolerated; some required term compatible).
    /// `custom` are label keys the template's instance types define (see [`Pool::custom_keys`]).
    pub(crate) fn compatible_with_template(
        &self,
        reqs: &Requirements,
        taints_: &[Taint],
        custom: &BTreeSet<String>,
    ) -> bool {
        if !self.tolerates(taints_) {
            return false;
        }
        self.terms.as_ref().is_some_and(|terms| {
            terms.iter().any(|t| {
                reqs.compatible_allowing(t, Undefined::AllowWellKnown, &|k| custom.contains(k))
                    .is_ok()
            })
        })
    }

    /// Whether its pod would run on a node of an instance type (given as the type's
    /// requirements): some required term intersects them.
    pub(crate) fn compatible_with_type(&self, type_reqs: &Requirements) -> bool {
        self.terms
            .as_ref()
            .is_some_and(|terms| terms.iter().any(|t| type_reqs.intersects(t).is_ok()))
    }

    /// Whether its pod would run on an existing node with these labels and taints.
    pub(crate) fn compatible_with_node(&self, node_labels: &Labels, taints_: &[Taint]) -> bool {
        if !self.tolerates(taints_) {
            return false;
        }
        self.terms
            .as_ref()
            .is_some_and(|terms| terms.iter().any(|t| t.matches_labels(node_labels)))
    }

    fn tolerates(&self, taints_: &[Taint]) -> bool {
        let mut tolerations = self.ds.template.tolerations.clone();
        tolerations.push(taints::prefer_no_schedule_toleration());
        taints::tolerates_all(taints_, &tolerations)
    }
}
