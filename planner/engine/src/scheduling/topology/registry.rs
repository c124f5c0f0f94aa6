//! Registration on a [`Topology`]: pods' identities, label signatures, selector specs,
//! topology keys and the groups that count them.

use super::*;

impl Topology {
    /// Adds an empty domain for `key` to every group on that key (e.g. a new claim's placeholder
    /// hostname, or an existing node's).
    pub(crate) fn register(&mut self, key: &str, value: &str) {
        self.register_all(key, std::iter::once(value));
    }

    /// [`Topology::register`] of every value in order, looking `key` up once.
    pub(crate) fn register_all<'v>(&mut self, key: &str, values: impl Iterator<Item = &'v str>) {
        let Some(&k) = self.key_ids.get(key) else {
            return;
        };
        for value in values {
            let id = self.keys[k as usize].intern(value);
            let (regular, inverse) = &self.key_groups[k as usize];
            for &gid in regular {
                self.groups[gid as usize].register(id);
            }
            for &gid in inverse {
                self.inverse[gid as usize].register(id);
            }
        }
    }

    /// What topology sees of `pod` (see [`Identity`]).
    pub(crate) fn identity(&self, p: &Pod) -> Identity {
        let known = self.pods.get(&p.uid).and_then(|e| {
            let fp = fingerprint(p);
            let state = self.specs[e.spec as usize]
                .states
                .iter()
                .position(|(f, _)| *f == fp)?;
            Some(Identity::Known {
                spec: e.spec,
                state: u32::try_from(state).unwrap_or(u32::MAX),
                selection: self.sigs[e.sig as usize].selection,
            })
        });
        known.unwrap_or_else(|| {
            Identity::Other(Box::new(Constraints {
                namespace: p.namespace.clone(),
                labels: p.labels.clone(),
                spreads: p.topology_spread.clone(),
                affinity: p.pod_affinity.clone(),
                anti_affinity: p.pod_anti_affinity.clone(),
                preferred_affinity: p.preferred_pod_affinity.clone(),
                preferred_anti_affinity: p.preferred_pod_anti_affinity.clone(),
                node_selector: p.node_selector.clone(),
                required_node_affinity: p.required_node_affinity.clone(),
                tolerations: p.tolerations.clone(),
            }))
        })
    }

    /// Number of distinct groups (regular, inverse).
    #[cfg(test)]
    pub(crate) fn group_count(&self) -> (usize, usize) {
        (self.groups.len(), self.inverse.len())
    }

    // === construction ===

    /// The nodes that count, with their indices in the base.
    pub(super) fn live_nodes(&self) -> impl Iterator<Item = (usize, &NodeInfo)> {
        self.cluster
            .nodes
            .iter()
            .zip(&self.node_live)
            .enumerate()
            .filter(|(_, (_, live))| **live)
            .map(|(i, (n, _))| (i, n))
    }

    /// Prepares the groups of a pod in every relaxation state, its label signature and the
    /// inverse groups of its required anti-affinity.
    pub(super) fn register_pod(&mut self, pod: &Pod) {
        add_selector_keys(&mut self.selector_keys, pod);
        let spec = self.spec_for(pod);
        if !pod.pod_anti_affinity.is_empty() && !self.inverse_owned.contains_key(&pod.uid) {
            let ids: Vec<u32> = pod
                .pod_anti_affinity
                .iter()
                .map(|term| self.add_inverse(affinity_key(Kind::AntiAffinity, pod, term)))
                .collect();
            self.inverse_owned.insert(pod.uid.clone(), ids);
        }
        let sig = self.sig_for(&pod.namespace, &pod.labels);
        self.pods.insert(pod.uid.clone(), PodEntry { spec, sig });
    }

    pub(super) fn spec_for(&mut self, pod: &Pod) -> u32 {
        let mut h = FxHasher::default();
        hash_constraints(pod, &self.selector_keys, &mut h);
        let hash = h.finish();
        if let Some(ids) = self.spec_ids.get(&hash) {
            for &id in ids {
                if same_constraints(&self.specs[id as usize].pod, pod, &self.selector_keys) {
                    return id;
                }
            }
        }
        let base = constraint_copy(pod);
        let prefs = Preferences {
            tolerate_prefer_no_schedule: true,
        };
        let mut states: Vec<(Fingerprint, Vec<u32>)> = Vec::new();
        let mut stripped = base.clone();
        strip_preferences(&mut stripped);
        for mut p in [base.clone(), stripped] {
            loop {
                let fp = fingerprint(&p);
                if !states.iter().any(|(f, _)| *f == fp) {
                    let ids: Vec<u32> = group_keys(&p)
                        .into_iter()
                        .map(|k| self.add_group(k))
                        .collect();
                    states.push((fp, ids));
                }
                if !prefs.relax(&mut p) {
                    break;
                }
            }
        }
        let id = u32::try_from(self.specs.len()).unwrap_or(u32::MAX);
        self.specs.push(Spec { pod: base, states });
        self.spec_ids.entry(hash).or_default().push(id);
        id
    }

    pub(super) fn sig_for(&mut self, namespace: &str, labels: &Labels) -> u32 {
        let mut h = FxHasher::default();
        namespace.hash(&mut h);
        labels.hash(&mut h);
        let hash = h.finish();
        if let Some(ids) = self.sig_ids.get(&hash) {
            for &id in ids {
                let s = &self.sigs[id as usize];
                if s.namespace == namespace && &s.labels == labels {
                    return id;
                }
            }
        }
        let selecting = (0..self.groups.len())
            .filter(|&i| self.groups[i].selects(namespace, labels, &self.base.ns_labels))
            .map(|i| i as u32)
            .collect();
        let selecting_inverse = (0..self.inverse.len())
            .filter(|&i| self.inverse[i].selects(namespace, labels, &self.base.ns_labels))
            .map(|i| i as u32)
            .collect();
        let id = u32::try_from(self.sigs.len()).unwrap_or(u32::MAX);
        self.sigs.push(LabelSig {
            namespace: namespace.to_string(),
            labels: labels.clone(),
            selecting,
            selecting_inverse,
            selection: 0,
        });
        self.sig_ids.entry(hash).or_default().push(id);
        self.refresh_selection(id as usize);
        id
    }

    pub(super) fn refresh_selection(&mut self, sig: usize) {
        let s = &self.sigs[sig];
        let key = (s.selecting.clone(), s.selecting_inverse.clone());
        let next = u32::try_from(self.selections.len()).unwrap_or(u32::MAX);
        let id = *self.selections.entry(key).or_insert(next);
        self.sigs[sig].selection = id;
    }

    /// The index of a key, creating its domains from the universe and the existing nodes.
    pub(super) fn ensure_key(&mut self, key: &str) -> u32 {
        if let Some(&k) = self.key_ids.get(key) {
            return k;
        }
        let mut kd = KeyDomains::default();
        if let Some(values) = self.base.universe.get(key) {
            for v in values {
                let id = kd.intern(v);
                for pool in &self.base.pools {
                    if pool.reqs.get(key).is_none_or(|r| r.has(v)) {
                        kd.add_source(id, &pool.taints);
                    }
                }
            }
        }
        let nd = if self.cluster.nodes.is_empty() {
            Arc::default()
        } else {
            self.cluster.domains(key)
        };
        let mut value_ids = vec![u32::MAX; nd.values.len()];
        for (i, _) in self.live_nodes() {
            let vi = nd.of_node[i];
            if vi == u32::MAX {
                continue;
            }
            let id = match value_ids[vi as usize] {
                u32::MAX => {
                    let id = kd.intern(&nd.values[vi as usize]);
                    value_ids[vi as usize] = id;
                    id
                }
                id => id,
            };
            kd.add_node(id, u32::try_from(i).unwrap_or(u32::MAX));
        }
        for pl in &self.placements {
            if let Some(r) = pl.reqs.get(key).filter(|r| !r.is_complement()) {
                for v in r.values() {
                    kd.intern(v);
                }
            }
        }
        let k = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        self.keys.push(kd);
        self.key_nodes.push((nd, value_ids));
        self.key_ids.insert(key.to_string(), k);
        self.key_groups.push((Vec::new(), Vec::new()));
        k
    }

    /// A new group with its domains and the bound pods it counts (not stored).
    pub(super) fn build_group(&self, spec: GroupKey) -> Group {
        let key_id = self.key_ids.get(&spec.key).copied();
        let mut g = Group::new(spec, key_id.unwrap_or(u32::MAX));
        let Some(k) = key_id else {
            return g;
        };
        let kd = &self.keys[k as usize];
        // Domains: those NodePools can launch (unless the spread honours taints the pod does
        // not tolerate), those of existing nodes that pass the spread's node filter, and values
        // with no known source (recorded or registered ones).
        let honor_taints = g
            .spec
            .filter
            .as_ref()
            .filter(|f| f.taints == NodeInclusionPolicy::Honor)
            .map(|f| f.tolerations.clone());
        for id in 0..kd.len() as u32 {
            let from_pools = kd.is_pool_domain(id);
            let nodes = kd.nodes(id);
            let present = (from_pools && honor_taints.as_ref().is_none_or(|t| kd.tolerated(id, t)))
                || nodes.iter().any(|&n| {
                    let n = &self.cluster.nodes[n as usize];
                    g.node_counts(&n.taints, &n.reqs)
                })
                || (!from_pools && nodes.is_empty());
            if present {
                g.register(id);
            }
        }
        // Bound pods: those the group counts with every node there, minus the ones this run
        // does not count (on removed nodes, or being placed).
        if !self.bound_live.is_empty() {
            // A counted pod's node counts, so its value was interned with the key.
            let (nd, value_ids) = &self.key_nodes[k as usize];
            for &b in self.cluster.counted(&g, &self.base.ns_labels).iter() {
                if !self.bound_live[b as usize] {
                    continue;
                }
                let vi = nd.of_node[self.cluster.bound[b as usize].node];
                if let Some(&id) = value_ids.get(vi as usize).filter(|&&id| id != u32::MAX) {
                    g.add(id, 1);
                }
            }
        }
        for pl in &self.placements {
            let sig = &self.sigs[pl.sig as usize];
            if !g.selects(&sig.namespace, &sig.labels, &self.base.ns_labels)
                || !g.node_counts(&pl.taints, &pl.reqs)
            {
                continue;
            }
            let Some(r) = pl.reqs.get(&g.spec.key).filter(|r| !r.is_complement()) else {
                continue;
            };
            if g.spec.kind == Kind::AntiAffinity || r.values().len() == 1 {
                for v in r.values() {
                    if let Some(id) = kd.id(v) {
                        g.add(id, pl.delta);
                    }
                }
            }
        }
        g
    }

    pub(super) fn add_group(&mut self, spec: GroupKey) -> u32 {
        if let Some(&gid) = self.group_ids.get(&spec) {
            return gid;
        }
        self.note_selector_keys(&spec);
        let k = self.ensure_key(&spec.key);
        let g = self.build_group(spec.clone());
        let gid = u32::try_from(self.groups.len()).unwrap_or(u32::MAX);
        self.mark_selecting(&g, gid, false);
        self.groups.push(g);
        self.group_ids.insert(spec, gid);
        self.key_groups[k as usize].0.push(gid);
        gid
    }

    pub(super) fn add_inverse(&mut self, spec: GroupKey) -> u32 {
        if let Some(&gid) = self.inverse_ids.get(&spec) {
            return gid;
        }
        self.note_selector_keys(&spec);
        let k = self.ensure_key(&spec.key);
        let mut g = Group::new(spec.clone(), k);
        for id in 0..self.keys[k as usize].len() as u32 {
            g.register(id);
        }
        let gid = u32::try_from(self.inverse.len()).unwrap_or(u32::MAX);
        self.mark_selecting(&g, gid, true);
        self.inverse.push(g);
        self.inverse_ids.insert(spec, gid);
        self.key_groups[k as usize].1.push(gid);
        gid
    }

    /// Remembers the label keys `spec`'s selector reads.
    fn note_selector_keys(&mut self, spec: &GroupKey) {
        if let Some(sel) = &spec.selector {
            self.selector_keys.extend(sel.match_labels.keys().cloned());
            self.selector_keys
                .extend(sel.match_expressions.iter().map(|e| e.key.clone()));
        }
    }

    /// Records group `gid` (of the inverse table when `inverse`) on every label signature `g`
    /// selects, and refreshes those signatures' selections.
    fn mark_selecting(&mut self, g: &Group, gid: u32, inverse: bool) {
        let mut touched = Vec::new();
        for (i, s) in self.sigs.iter_mut().enumerate() {
            if g.selects(&s.namespace, &s.labels, &self.base.ns_labels) {
                if inverse {
                    s.selecting_inverse.push(gid);
                } else {
                    s.selecting.push(gid);
                }
                touched.push(i);
            }
        }
        for i in touched {
            self.refresh_selection(i);
        }
    }
}
