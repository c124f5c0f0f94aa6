//! Interned domain values per topology key, and where each can come from: NodePools (with the
//! taints that guard them, for `nodeTaintsPolicy: Honor`, Karpenter's `TopologyDomainGroup`) and
//! existing nodes (which count only when they pass a spread's node filter).

use std::sync::Arc;

use super::fxhash::FxHashMap;

use crate::model::{Taint, Toleration};
use crate::requirements::taints::tolerates_all;

/// The values one topology key takes, interned so that groups count by index.
#[derive(Clone, Debug, Default)]
pub(super) struct KeyDomains {
    names: Vec<Arc<str>>,
    index: FxHashMap<Arc<str>, u32>,
    /// Taint sets of the NodePools that can produce each value (by index); an empty set means
    /// every pod may land there.
    taints: Vec<Vec<Vec<Taint>>>,
    /// Existing nodes (indexes into the topology's node list) that carry each value.
    nodes: Vec<Vec<u32>>,
}

// === impl KeyDomains ===

impl KeyDomains {
    /// The index of `value`, if known.
    pub(super) fn id(&self, value: &str) -> Option<u32> {
        self.index.get(value).copied()
    }

    /// The index of `value`, interning it.
    pub(super) fn intern(&mut self, value: &str) -> u32 {
        if let Some(id) = self.id(value) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        let name: Arc<str> = Arc::from(value);
        self.names.push(name.clone());
        self.index.insert(name, id);
        self.taints.push(Vec::new());
        self.nodes.push(Vec::new());
        id
    }

    /// The value of an index.
    pub(super) fn name(&self, id: u32) -> &Arc<str> {
        &self.names[id as usize]
    }

    /// Number of values.
    pub(super) fn len(&self) -> usize {
        self.names.len()
    }

    /// Records that existing node `node` carries domain `id`.
    pub(super) fn add_node(&mut self, id: u32, node: u32) {
        self.nodes[id as usize].push(node);
    }

    /// Existing nodes that carry domain `id`.
    pub(super) fn nodes(&self, id: u32) -> &[u32] {
        &self.nodes[id as usize]
    }

    /// True when some NodePool can produce domain `id`.
    pub(super) fn is_pool_domain(&self, id: u32) -> bool {
        !self.taints[id as usize].is_empty()
    }

    /// Records that a NodePool guarded by `taints` can produce domain `id`.
    pub(super) fn add_source(&mut self, id: u32, taints: &[Taint]) {
        let sets = &mut self.taints[id as usize];
        if sets.first().is_some_and(Vec::is_empty) {
            return;
        }
        if taints.is_empty() {
            *sets = vec![Vec::new()];
        } else if !sets.iter().any(|s| s.as_slice() == taints) {
            sets.push(taints.to_vec());
        }
    }

    /// True when a pod with `tolerations` tolerates some NodePool that produces domain `id`.
    pub(super) fn tolerated(&self, id: u32, tolerations: &[Toleration]) -> bool {
        self.taints[id as usize]
            .iter()
            .any(|s| tolerates_all(s, tolerations))
    }
}
