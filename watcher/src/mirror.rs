//! The compact mirror of the cluster: every object the planner reads, in its `dovetail.v1`
//! form, keyed by kind and uid, plus the changes not yet sent.
//!
//! Informers write into it (one writer per kind), the publisher reads a full snapshot from it
//! when a session opens and drains the coalesced delta from it afterwards. Snapshot and delta
//! are taken under the same lock, so every change is in exactly one of them: nothing lost,
//! nothing sent twice. Changes that leave an object's compact form unchanged (a status
//! heartbeat, a resourceVersion bump) are dropped here.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use proto::v1 as pb;
use proto::v1::upsert::Object;
use tokio::sync::Notify;

pub use proto::Kind;

/// The key an object is upserted and deleted with: its uid, else `namespace/name` or `name`
/// (the planner keys sessions the same way, by `Object::key`).
pub fn key(o: &Object) -> String {
    o.key()
}

fn is_pending(o: &Object) -> bool {
    matches!(o, Object::Pod(p) if p.node_name.is_none())
}

/// The objects and the unsent changes.
#[derive(Debug, Default)]
pub struct State {
    objects: [BTreeMap<String, Object>; Kind::ALL.len()],
    delta: BTreeSet<(Kind, String)>,
    /// Pending pods by `namespace/name` → uid (plans name pods by `namespace/name`).
    pending: HashMap<String, String>,
    /// Pending pods that arrived since the publisher last looked.
    new_pending: usize,
}

/// What one upsert changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The compact form is what the mirror already held.
    Unchanged,
    /// Created or changed.
    Changed,
    /// A pod that was not pending before and is now.
    NewPending,
}

// === impl State ===

impl State {
    /// Creates or replaces an object.
    pub fn upsert(&mut self, o: Object) -> Applied {
        let kind = Kind::of(&o);
        let k = key(&o);
        let map = &mut self.objects[kind.index()];
        let was_pending = map.get(&k).is_some_and(is_pending);
        if map.get(&k) == Some(&o) {
            return Applied::Unchanged;
        }
        let pending = is_pending(&o);
        if let Object::Pod(p) = &o {
            let name = common::key::namespaced(&p.namespace, &p.name);
            if pending {
                self.pending.insert(name, k.clone());
            } else {
                self.pending.remove(&name);
            }
        }
        map.insert(k.clone(), o);
        self.delta.insert((kind, k));
        if pending && !was_pending {
            self.new_pending += 1;
            Applied::NewPending
        } else {
            Applied::Changed
        }
    }

    /// Removes an object; false when it was not there.
    pub fn delete(&mut self, kind: Kind, key: &str) -> bool {
        let Some(old) = self.objects[kind.index()].remove(key) else {
            return false;
        };
        if let Object::Pod(p) = &old {
            self.pending
                .remove(&common::key::namespaced(&p.namespace, &p.name));
        }
        self.delta.insert((kind, key.to_string()));
        true
    }

    /// After a relist: removes every object of `kind` the list did not return (deleted while
    /// the watch was down). Returns how many went.
    pub fn retain(&mut self, kind: Kind, listed: &BTreeSet<String>) -> usize {
        let gone: Vec<String> = self.objects[kind.index()]
            .keys()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            self.delete(kind, k);
        }
        gone.len()
    }

    /// The object of `kind` with `key`.
    pub fn get(&self, kind: Kind, key: &str) -> Option<&Object> {
        self.objects[kind.index()].get(key)
    }

    /// Every object of a kind.
    pub fn iter(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        self.objects[kind.index()].values()
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.objects.iter().map(BTreeMap::len).sum()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pending pods held.
    pub fn pending_pods(&self) -> usize {
        self.pending.len()
    }

    /// The uid of a pending pod named `namespace/name`.
    pub fn pending_uid(&self, name: &str) -> Option<&str> {
        self.pending.get(name).map(String::as_str)
    }

    /// How many pods became pending since the last call.
    pub fn take_new_pending(&mut self) -> usize {
        std::mem::take(&mut self.new_pending)
    }

    /// True when changes wait to be sent.
    pub fn has_delta(&self) -> bool {
        !self.delta.is_empty()
    }

    /// Everything, as a snapshot; the unsent changes are in it, so they are dropped.
    pub fn snapshot(&mut self) -> pb::ClusterSnapshot {
        self.delta.clear();
        let mut s = pb::ClusterSnapshot::default();
        for map in &self.objects {
            for o in map.values() {
                match o.clone() {
                    Object::Pod(x) => s.pods.push(x),
                    Object::Node(x) => s.nodes.push(x),
                    Object::NodeClaim(x) => s.node_claims.push(x),
                    Object::NodePool(x) => s.node_pools.push(x),
                    Object::NodeClass(x) => s.node_classes.push(x),
                    Object::DaemonSet(x) => s.daemon_sets.push(x),
                    Object::Pdb(x) => s.pdbs.push(x),
                    Object::Namespace(x) => s.namespaces.push(x),
                    Object::Pvc(x) => s.pvcs.push(x),
                    Object::Pv(x) => s.pvs.push(x),
                    Object::StorageClass(x) => s.storage_classes.push(x),
                    Object::NodeOverlay(x) => s.node_overlays.push(x),
                    Object::CapacityBuffer(x) => s.capacity_buffers.push(x),
                    Object::ResourceClaim(x) => s.resource_claims.push(x),
                    Object::DeviceClass(x) => s.device_classes.push(x),
                    Object::ResourceSlice(x) => s.resource_slices.push(x),
                }
            }
        }
        s
    }

    /// The changes since the last snapshot or delta, each object once in its latest state
    /// (`None` when there are none).
    pub fn take_delta(&mut self) -> Option<pb::Delta> {
        if self.delta.is_empty() {
            return None;
        }
        let mut d = pb::Delta::default();
        for (kind, k) in std::mem::take(&mut self.delta) {
            match self.objects[kind.index()].get(&k) {
                Some(o) => d.upserts.push(pb::Upsert {
                    object: Some(o.clone()),
                }),
                None => d.deletes.push(pb::Delete {
                    kind: kind.wire_name().to_string(),
                    uid: k,
                }),
            }
        }
        Some(d)
    }
}

/// The shared mirror: the state behind a lock, and a signal for the publisher.
#[derive(Debug, Clone, Default)]
pub struct Mirror {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
}

// === impl Mirror ===

impl Mirror {
    /// An empty mirror.
    pub fn new() -> Self {
        Self::default()
    }

    /// Locks the state (held briefly: no IO under it).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `f` to the state and wakes the publisher when something changed.
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut s = self.lock();
        let out = f(&mut s);
        let dirty = s.has_delta();
        drop(s);
        if dirty {
            self.changed.notify_one();
        }
        out
    }

    /// Resolves when a change may be waiting (spurious wake-ups are possible).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, node: Option<&str>) -> Object {
        Object::Pod(pb::Pod {
            namespace: "default".into(),
            name: format!("p-{uid}"),
            uid: uid.into(),
            node_name: node.map(String::from),
            ..Default::default()
        })
    }

    #[test]
    fn deltas_coalesce_per_object_and_skip_no_op_changes() {
        let mut s = State::default();
        assert_eq!(s.upsert(pod("a", None)), Applied::NewPending);
        assert_eq!(s.upsert(pod("a", None)), Applied::Unchanged);
        assert_eq!(s.upsert(pod("b", None)), Applied::NewPending);
        assert_eq!(s.upsert(pod("a", Some("n1"))), Applied::Changed);
        assert_eq!(s.take_new_pending(), 2);
        assert!(s.delete(Kind::Pod, "b"));
        let d = s.take_delta().expect("delta");
        assert_eq!(
            d.upserts,
            vec![pb::Upsert {
                object: Some(pod("a", Some("n1")))
            }]
        );
        assert_eq!(
            d.deletes,
            vec![pb::Delete {
                kind: "Pod".into(),
                uid: "b".into()
            }]
        );
        assert!(s.take_delta().is_none());
        assert_eq!(s.pending_pods(), 0);
    }

    #[test]
    fn a_snapshot_absorbs_unsent_changes_and_a_relist_drops_the_missing() {
        let mut s = State::default();
        s.upsert(pod("a", None));
        s.upsert(pod("b", Some("n1")));
        let snap = s.snapshot();
        assert_eq!(snap.pods.len(), 2);
        assert!(s.take_delta().is_none(), "in the snapshot already");
        let listed = BTreeSet::from(["b".to_string()]);
        assert_eq!(s.retain(Kind::Pod, &listed), 1);
        let d = s.take_delta().expect("delta");
        assert_eq!(d.deletes.len(), 1);
        assert_eq!(d.deletes[0].uid, "a");
    }
}
