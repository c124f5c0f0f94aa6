//! What a solve or simulation produced, and its conversion to the plan's output shapes.

use crate::labels;
use crate::model::PodKey;
use crate::plan::{PlannedNodeClaim, TaintOut};

use super::node_claim::Claim;
use super::pools::Pool;
use super::run::Run;

/// Most instance types listed on one claim (Karpenter launches with at most 60).
pub const MAX_INSTANCE_TYPES: usize = 60;

/// The outcome of [`super::Scheduler::solve`] or [`super::Scheduler::simulate`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Results {
    /// New NodeClaims with their pods, instance types (cheapest first), zones, capacity types,
    /// price, labels and taints.
    pub new_claims: Vec<PlannedNodeClaim>,
    /// Pods placed on existing Nodes or in-flight NodeClaims, by node name (sorted).
    pub existing: Vec<(String, Vec<PodKey>)>,
    /// Pods that cannot be placed, with reasons (sorted by pod).
    pub unschedulable: Vec<(PodKey, String)>,
    /// A proven lower bound on the hourly cost of new capacity for the pods on `new_claims`
    /// (computed by `solve` only; 0 from `simulate`).
    pub lower_bound: f64,
    /// Things a person should know (relaxed minValues, catalog notes).
    pub notes: Vec<String>,
}

// === impl Results ===

impl Results {
    /// Sum of the new claims' prices, USD per hour.
    pub fn cost(&self) -> f64 {
        // Not `sum()`: an empty f64 sum is -0.0, which shows as `"costPerHour": -0.0`.
        self.new_claims.iter().fold(0.0, |a, c| a + c.price)
    }

    /// Number of pods placed (new claims and existing nodes).
    pub fn scheduled(&self) -> usize {
        self.new_claims.iter().map(|c| c.pods.len()).sum::<usize>()
            + self.existing.iter().map(|(_, p)| p.len()).sum::<usize>()
    }
}

/// A listed type: price, name, index in its pool.
type Priced<'a> = (f64, &'a str, usize);

/// Kubernetes' name-suffix alphabet (no vowels, no confusable characters).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `<pool>-<5 chars>` from a hash of the pool, the claim's index and its pods.
pub(super) fn claim_name(pool: &str, index: usize, pods: &[PodKey]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    feed(pool.as_bytes());
    feed(&(index as u64).to_le_bytes());
    for p in pods {
        feed(p.as_bytes());
    }
    let mut suffix = String::with_capacity(5);
    for _ in 0..5 {
        suffix.push(ALPHABET[(h % ALPHABET.len() as u64) as usize] as char);
        h /= ALPHABET.len() as u64;
    }
    format!("{pool}-{suffix}")
}

/// The plan's view of a claim of `pool`: its cheapest types (at most [`MAX_INSTANCE_TYPES`]),
/// the zones and capacity types they can launch in, the labels every one of them carries, the
/// pool's taints, and `pods`.
pub(super) fn planned_claim(
    pool: &Pool<'_>,
    c: &Claim,
    name: String,
    pods: Vec<PodKey>,
) -> PlannedNodeClaim {
    let zone_req = c.reqs.get(labels::ZONE);
    let ct_req = c.reqs.get(labels::CAPACITY_TYPE);
    // Only the listed (cheapest) types can be launched, so zones, capacity types and
    // shared labels are theirs. Fast path: the claim does not narrow zones or capacity types beyond its pool, so
    // every usable offering is allowed, prices are the pool's and `c.types` is already
    // cheapest first.
    let fast = zone_req == pool.reqs.get(labels::ZONE)
        && ct_req == pool.reqs.get(labels::CAPACITY_TYPE)
        && pool.zone_names.is_some()
        && pool.capacity_type_names.is_some();
    let (priced, zones, cts): (Vec<Priced<'_>>, Vec<String>, Vec<String>) = if fast {
        let priced: Vec<(f64, &str, usize)> = c
            .types
            .iter()
            .take(MAX_INSTANCE_TYPES)
            .map(|&t| {
                let te = &pool.types[t as usize];
                (te.price, te.name.as_str(), t as usize)
            })
            .collect();
        let (mut zm, mut cm) = (0u64, 0u64);
        for &(_, _, t) in &priced {
            zm |= pool.types[t].zone_mask;
            cm |= pool.types[t].ct_mask;
        }
        let decode = |names: &Option<Vec<String>>, m: u64| -> Vec<String> {
            names
                .iter()
                .flatten()
                .enumerate()
                .filter(|(i, _)| m & (1 << i) != 0)
                .map(|(_, n)| n.clone())
                .collect()
        };
        let zones = decode(&pool.zone_names, zm);
        let cts = decode(&pool.capacity_type_names, cm);
        (priced, zones, cts)
    } else {
        let mut priced: Vec<(f64, &str, usize)> = c
            .types
            .iter()
            .filter_map(|&t| {
                let te = &pool.types[t as usize];
                te.cheapest_allowed(&c.reqs)
                    .map(|o| (o.price, te.name.as_str(), t as usize))
            })
            .collect();
        priced.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        priced.truncate(MAX_INSTANCE_TYPES);
        // Few distinct values: linear dedup on borrowed strings, cloned once at the end.
        let mut zones: Vec<&str> = Vec::new();
        let mut cts: Vec<&str> = Vec::new();
        for &(_, _, t) in &priced {
            for o in &pool.types[t].offerings {
                if zone_req.is_none_or(|z| z.has(&o.zone))
                    && ct_req.is_none_or(|r| r.has(&o.capacity_type))
                {
                    if !zones.contains(&o.zone.as_str()) {
                        zones.push(&o.zone);
                    }
                    if !cts.contains(&o.capacity_type.as_str()) {
                        cts.push(&o.capacity_type);
                    }
                }
            }
        }
        zones.sort_unstable();
        cts.sort_unstable();
        (
            priced,
            zones.into_iter().map(str::to_string).collect(),
            cts.into_iter().map(str::to_string).collect(),
        )
    };
    let mut node_labels = pool.np.labels.clone();
    node_labels.extend(c.reqs.labels());
    node_labels.insert(labels::NODEPOOL.to_string(), pool.name().to_string());
    if zones.len() == 1 {
        node_labels.insert(
            labels::ZONE.to_string(),
            zones.first().cloned().unwrap_or_default(),
        );
    }
    if cts.len() == 1 {
        node_labels.insert(
            labels::CAPACITY_TYPE.to_string(),
            cts.first().cloned().unwrap_or_default(),
        );
    }
    // Labels every listed type carries with the same value (instance family, cpu, arch,
    // ...; the instance type itself when only one is listed).
    if let Some(&(_, _, first)) = priced.first() {
        for (key, value) in &pool.types[first].labels {
            if priced[1..]
                .iter()
                .all(|&(_, _, t)| pool.types[t].labels.get(key) == Some(value))
            {
                node_labels.insert(key.clone(), value.clone());
            }
        }
    }
    node_labels.remove(labels::HOSTNAME);
    PlannedNodeClaim {
        name,
        node_pool: pool.name().to_string(),
        instance_types: priced
            .iter()
            .take(MAX_INSTANCE_TYPES)
            .map(|(_, n, _)| n.to_string())
            .collect(),
        zones,
        capacity_types: cts,
        price: priced.first().map(|p| p.0).unwrap_or(0.0),
        labels: node_labels,
        taints: pool.taints().iter().map(TaintOut::from).collect(),
        pods,
    }
}

// === impl Run ===

impl Run<'_, '_> {
    /// The output of this run.
    pub(super) fn results(&self) -> Results {
        let mut out = Results::default();
        for (index, c) in self
            .claims
            .iter()
            .filter(|c| !c.pods.is_empty())
            .enumerate()
        {
            let mut pods: Vec<PodKey> = c
                .pods
                .iter()
                .map(|&i| self.items[i as usize].pod.key())
                .collect();
            pods.sort();
            let pool = &self.s.pools[c.pool];
            let name = claim_name(pool.name(), index, &pods);
            for (key, wanted, kept) in &c.relaxed {
                out.notes.push(format!(
                    "NodeClaim {name}: minValues {wanted} for {key} relaxed to {kept} (BestEffort)"
                ));
            }
            out.new_claims.push(planned_claim(pool, c, name, pods));
        }
        for n in &self.existing {
            if !n.pods().is_empty() {
                let mut pods: Vec<PodKey> = n
                    .pods()
                    .iter()
                    .map(|&i| self.items[i as usize].pod.key())
                    .collect();
                pods.sort();
                out.existing.push((n.node.name.clone(), pods));
            }
        }
        out.existing.sort();
        for (i, reason) in &self.unschedulable {
            out.unschedulable
                .push((self.items[*i as usize].pod.key(), reason.clone()));
        }
        out.unschedulable.sort();
        out
    }
}
