//! The one rule that names Kubernetes objects: `namespace/name` for namespaced objects, the
//! name alone for cluster-scoped ones; and the key a session stores an object under, its uid
//! when it has one.

/// `namespace/name`, how pods, PDBs and claims are named in plans, events and errors.
pub fn namespaced(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The key an object is upserted and deleted with in a session: its uid, else
/// `namespace/name` (namespaced objects) or its name (cluster-scoped ones). The watcher keys
/// its mirror and the planner its session state by it, so a delete finds what an upsert put.
pub fn object(uid: &str, namespace: Option<&str>, name: &str) -> String {
    match (uid.is_empty(), namespace) {
        (false, _) => uid.to_string(),
        (true, Some(ns)) => namespaced(ns, name),
        (true, None) => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_first_then_the_name() {
        assert_eq!(object("u-1", Some("default"), "web"), "u-1");
        assert_eq!(object("", Some("default"), "web"), "default/web");
        assert_eq!(object("", None, "node-1"), "node-1");
        assert_eq!(namespaced("shop", "api-0"), "shop/api-0");
    }
}
