//! The one table of Kubernetes kinds the manifest reader knows, with whether objects of the
//! kind live in a namespace. Which apiVersions of a kind are read is decided where the object
//! is converted; a known kind under another apiVersion is skipped with a warning that says so.

/// Where objects of a kind live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// In a namespace (`default` when the object leaves it out).
    Namespaced,
    /// Cluster-wide.
    Cluster,
}

use Scope::{Cluster, Namespaced};

/// Every kind the reader converts, with its scope.
const KINDS: &[(&str, Scope)] = &[
    ("Pod", Namespaced),
    ("Deployment", Namespaced),
    ("ReplicaSet", Namespaced),
    ("StatefulSet", Namespaced),
    ("Job", Namespaced),
    ("DaemonSet", Namespaced),
    ("PodDisruptionBudget", Namespaced),
    ("PersistentVolumeClaim", Namespaced),
    ("Node", Cluster),
    ("Namespace", Cluster),
    ("PersistentVolume", Cluster),
    ("StorageClass", Cluster),
    ("PriorityClass", Cluster),
    ("NodePool", Cluster),
    ("NodeClaim", Cluster),
    ("EC2NodeClass", Cluster),
];

fn scope(kind: &str) -> Option<Scope> {
    KINDS
        .iter()
        .find(|(name, _)| *name == kind)
        .map(|(_, s)| *s)
}

/// Whether the reader converts objects of `kind` (under some apiVersion).
pub(super) fn is_known(kind: &str) -> bool {
    scope(kind).is_some()
}

/// Whether objects of `kind` live in a namespace; false for kinds the reader does not know.
pub(super) fn is_namespaced(kind: &str) -> bool {
    scope(kind) == Some(Namespaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_kinds_and_cluster_kinds() {
        assert!(is_known("Deployment") && is_namespaced("Deployment"));
        assert!(is_known("NodePool") && !is_namespaced("NodePool"));
        assert!(!is_known("ConfigMap") && !is_namespaced("ConfigMap"));
    }

    #[test]
    fn names_are_unique() {
        for (i, (name, _)) in KINDS.iter().enumerate() {
            assert!(KINDS[..i].iter().all(|(o, _)| o != name), "{name} twice");
        }
    }
}
