//! The kinds of object a session carries ([`Kind`]: their names in a `Delete`, a snapshot and
//! an `Upsert`), and who an object is: its namespace (none for cluster-scoped kinds), name and
//! uid, and the key the watcher's mirror and the planner's session store it under, by the one
//! rule `common::key::object`.

use crate::v1::upsert::Object;

/// A kind of object a session carries, in the order of the snapshot's lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Pods.
    Pod,
    /// Nodes.
    Node,
    /// Karpenter NodeClaims.
    NodeClaim,
    /// Karpenter NodePools.
    NodePool,
    /// EC2NodeClasses.
    NodeClass,
    /// DaemonSets.
    DaemonSet,
    /// PodDisruptionBudgets.
    Pdb,
    /// Namespaces.
    Namespace,
    /// PersistentVolumeClaims.
    Pvc,
    /// PersistentVolumes.
    Pv,
    /// StorageClasses.
    StorageClass,
    /// Karpenter NodeOverlays.
    NodeOverlay,
    /// CapacityBuffers with their resolved templates.
    CapacityBuffer,
    /// DRA ResourceClaims (resource.k8s.io/v1).
    ResourceClaim,
    /// DRA DeviceClasses.
    DeviceClass,
    /// DRA ResourceSlices.
    ResourceSlice,
}

impl Kind {
    /// Every kind, in snapshot order.
    pub const ALL: [Kind; 16] = [
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
        Kind::NodeOverlay,
        Kind::CapacityBuffer,
        Kind::ResourceClaim,
        Kind::DeviceClass,
        Kind::ResourceSlice,
    ];

    /// The kind of an object.
    pub fn of(o: &Object) -> Kind {
        match o {
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
            Object::NodeOverlay(_) => Kind::NodeOverlay,
            Object::CapacityBuffer(_) => Kind::CapacityBuffer,
            Object::ResourceClaim(_) => Kind::ResourceClaim,
            Object::DeviceClass(_) => Kind::DeviceClass,
            Object::ResourceSlice(_) => Kind::ResourceSlice,
        }
    }

    /// Its position in [`Kind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in a `Delete` message.
    pub fn wire_name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::NodeClaim => "NodeClaim",
            Kind::NodePool => "NodePool",
            Kind::NodeClass => "NodeClass",
            Kind::DaemonSet => "DaemonSet",
            Kind::Pdb => "PodDisruptionBudget",
            Kind::Namespace => "Namespace",
            Kind::Pvc => "PersistentVolumeClaim",
            Kind::Pv => "PersistentVolume",
            Kind::StorageClass => "StorageClass",
            Kind::NodeOverlay => "NodeOverlay",
            Kind::CapacityBuffer => "CapacityBuffer",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceSlice => "ResourceSlice",
        }
    }

    /// The kind a `Delete` names ([`Kind::wire_name`]; `EC2NodeClass` too).
    pub fn named(kind: &str) -> Option<Kind> {
        if kind == "EC2NodeClass" {
            return Some(Kind::NodeClass);
        }
        Kind::ALL.into_iter().find(|k| k.wire_name() == kind)
    }

    /// The field of `ClusterSnapshot` holding this kind.
    pub fn list(self) -> &'static str {
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
            Kind::NodeOverlay => "node_overlays",
            Kind::CapacityBuffer => "capacity_buffers",
            Kind::ResourceClaim => "resource_claims",
            Kind::DeviceClass => "device_classes",
            Kind::ResourceSlice => "resource_slices",
        }
    }

    /// The field of `Upsert.object` holding this kind.
    pub fn upsert_field(self) -> &'static str {
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
            Kind::NodeOverlay => "node_overlay",
            Kind::CapacityBuffer => "capacity_buffer",
            Kind::ResourceClaim => "resource_claim",
            Kind::DeviceClass => "device_class",
            Kind::ResourceSlice => "resource_slice",
        }
    }
}

impl Object {
    /// `(namespace, name, uid)`; the namespace is `None` for a cluster-scoped kind.
    pub fn identity(&self) -> (Option<&str>, &str, &str) {
        match self {
            Object::Pod(p) => (Some(&p.namespace), &p.name, &p.uid),
            Object::Node(n) => (None, &n.name, &n.uid),
            Object::NodeClaim(c) => (None, &c.name, &c.uid),
            Object::NodePool(p) => (None, &p.name, &p.uid),
            Object::NodeClass(c) => (None, &c.name, &c.uid),
            Object::DaemonSet(d) => (Some(&d.namespace), &d.name, &d.uid),
            Object::Pdb(p) => (Some(&p.namespace), &p.name, &p.uid),
            Object::Namespace(n) => (None, &n.name, &n.uid),
            Object::Pvc(c) => (Some(&c.namespace), &c.name, &c.uid),
            Object::Pv(v) => (None, &v.name, &v.uid),
            Object::StorageClass(c) => (None, &c.name, &c.uid),
            Object::NodeOverlay(o) => (None, &o.name, &o.uid),
            Object::CapacityBuffer(b) => (Some(&b.namespace), &b.name, &b.uid),
            Object::ResourceClaim(c) => (Some(&c.namespace), &c.name, &c.uid),
            Object::DeviceClass(c) => (None, &c.name, &c.uid),
            Object::ResourceSlice(s) => (None, &s.name, &s.uid),
        }
    }

    /// The key an object is upserted and deleted with: its uid, else `namespace/name` or its
    /// name.
    pub fn key(&self) -> String {
        let (namespace, name, uid) = self.identity();
        common::key::object(uid, namespace, name)
    }

    /// Whether it has a uid (and is keyed by it).
    pub fn has_uid(&self) -> bool {
        !self.identity().2.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Kind;
    use crate::v1 as pb;
    use crate::v1::upsert::Object;

    #[test]
    fn every_kind_is_named_back_from_its_delete_name() {
        for (i, k) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(Kind::named(k.wire_name()), Some(k));
        }
        assert_eq!(Kind::named("EC2NodeClass"), Some(Kind::NodeClass));
        assert_eq!(Kind::named("Deployment"), None);
    }

    #[test]
    fn namespaced_kinds_key_by_namespace_and_name_without_a_uid() {
        let pod = Object::Pod(pb::Pod {
            namespace: "default".into(),
            name: "web".into(),
            ..Default::default()
        });
        assert_eq!(pod.key(), "default/web");
        assert!(!pod.has_uid());
        let node = Object::Node(pb::Node {
            name: "n1".into(),
            uid: "u-1".into(),
            ..Default::default()
        });
        assert_eq!(node.key(), "u-1");
        assert!(node.has_uid());
        let pool = Object::NodePool(pb::NodePool {
            name: "default".into(),
            ..Default::default()
        });
        assert_eq!(pool.key(), "default");
    }
}
