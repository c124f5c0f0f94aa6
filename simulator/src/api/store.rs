//! The object store: every object as JSON, keyed by resource, namespace and name, with one
//! global, monotonically increasing `resourceVersion` and a bounded history of changes that
//! watches replay from.
//!
//! All writes go through here (HTTP handlers and the in-process controllers alike), so every
//! change is seen by watches in `resourceVersion` order.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use super::error::{ApiError, Result};
use super::events;
use super::kinds::{KindInfo, Kinds, ResKey};
use crate::clock::Clock;

mod create;
mod delete;
mod update;

pub use super::kinds::Subresource;

/// What a watch event says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

// === impl EventType ===

impl EventType {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the history and sent to watches.
#[derive(Clone, Debug)]
pub struct Change {
    /// `resourceVersion` of the change.
    pub rv: u64,
    /// Resource.
    pub res: ResKey,
    /// Namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (the last state for deletions).
    pub object: Value,
    /// The object before the change, for selector transitions.
    pub prev: Option<Value>,
}

type Objects = BTreeMap<ResKey, BTreeMap<(String, String), Value>>;

#[derive(Debug)]
struct Inner {
    rv: u64,
    uid: u64,
    objects: Objects,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// `resourceVersion` of the newest change dropped from the history (0: none dropped).
    compacted: u64,
}

/// The store. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<Inner>,
    kinds: Kinds,
    changes: broadcast::Sender<Arc<Change>>,
    generation: watch::Sender<u64>,
    clock: Clock,
}

/// What a watch starts from.
#[derive(Debug)]
pub struct Subscription {
    /// Changes to replay (or synthetic ADDED events for the current state).
    pub initial: Vec<Arc<Change>>,
    /// The live stream of later changes (all resources; filter by `res`).
    pub live: broadcast::Receiver<Arc<Change>>,
    /// The store's `resourceVersion` when the subscription was taken.
    pub rv: u64,
}

// === impl Store ===

impl Store {
    /// An empty store with the built-in kinds, keeping `history_limit` changes for watches.
    pub fn new(clock: Clock, history_limit: usize) -> Self {
        let (changes, _) = broadcast::channel(history_limit.max(1024));
        let (generation, _) = watch::channel(0);
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                uid: 0,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                compacted: 0,
            }),
            kinds: Kinds::new(),
            changes,
            generation,
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A detached copy with the same objects, versions and kinds, for dry runs: writes to it
    /// are seen by nobody.
    pub fn scratch(&self) -> Store {
        let inner = self.lock();
        let copy = Store::new(self.clock.clone(), 1);
        {
            let mut c = copy.lock();
            c.rv = inner.rv;
            c.uid = inner.uid;
            c.objects = inner.objects.clone();
        }
        copy.kinds.replace_all(self.kinds.all());
        copy
    }

    /// The kind registry.
    pub fn kinds(&self) -> &Kinds {
        &self.kinds
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// A receiver that changes whenever any object changes (for level-triggered controllers).
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// The current `resourceVersion`.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Drops every change from the history, so that any watch from an older version gets 410.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted = inner.rv;
    }

    /// One object.
    ///
    /// # Errors
    /// 404 when it does not exist.
    pub fn get(&self, kind: &KindInfo, ns: &str, name: &str) -> Result<Value> {
        let inner = self.lock();
        inner
            .objects
            .get(&kind.key())
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.qualified(), name))
    }

    /// Objects of a kind (in one namespace, or all), ordered by namespace and name, with the
    /// `resourceVersion` of the list.
    pub fn list(&self, kind: &KindInfo, ns: Option<&str>) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = inner
            .objects
            .get(&kind.key())
            .map(|m| {
                m.iter()
                    .filter(|((n, _), _)| ns.is_none_or(|want| n == want))
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .unwrap_or_default();
        (items, inner.rv)
    }

    fn commit(
        &self,
        inner: &mut Inner,
        res: ResKey,
        key: (String, String),
        kind: EventType,
        mut obj: Value,
        prev: Option<Value>,
    ) -> Value {
        inner.rv += 1;
        let rv = inner.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let mirror = events::is_new_api(&res).then(|| key.clone());
        if kind != EventType::Deleted {
            inner
                .objects
                .entry(res.clone())
                .or_default()
                .insert(key.clone(), obj.clone());
        }
        let change = Arc::new(Change {
            rv,
            res,
            namespace: key.0,
            kind,
            object: obj.clone(),
            prev,
        });
        inner.history.push_back(change.clone());
        while inner.history.len() > inner.history_limit {
            if let Some(old) = inner.history.pop_front() {
                inner.compacted = old.rv;
            }
        }
        let _ = self.changes.send(change);
        self.generation.send_replace(rv);
        if let Some(key) = mirror {
            self.mirror_event(inner, key, kind, &obj);
        }
        obj
    }

    /// Writes the core `v1` copy of an `events.k8s.io` Event just committed (see [`events`]).
    fn mirror_event(&self, inner: &mut Inner, key: (String, String), kind: EventType, obj: &Value) {
        let core = events::core();
        let prev = inner.objects.get(&core).and_then(|m| m.get(&key)).cloned();
        if kind == EventType::Deleted {
            if let Some(prev) = prev {
                if let Some(m) = inner.objects.get_mut(&core) {
                    m.remove(&key);
                }
                self.commit(inner, core, key, EventType::Deleted, prev, None);
            }
            return;
        }
        let copy = events::to_core(obj);
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.commit(inner, core, key, kind, copy, prev);
    }

    /// Starts a watch of `kind`. `from: None` (or `Some(0)`) starts with synthetic ADDED events
    /// for every current object; `Some(rv)` replays the changes after `rv`.
    ///
    /// # Errors
    /// 410 when `rv` is older than the retained history.
    pub fn subscribe(&self, kind: &KindInfo, from: Option<u64>) -> Result<Subscription> {
        let inner = self.lock();
        let res = kind.key();
        let initial = match from {
            None | Some(0) => inner
                .objects
                .get(&res)
                .map(|m| {
                    m.iter()
                        .map(|((ns, _), o)| {
                            Arc::new(Change {
                                rv: inner.rv,
                                res: res.clone(),
                                namespace: ns.clone(),
                                kind: EventType::Added,
                                object: o.clone(),
                                prev: None,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
            Some(rv) => {
                if rv < inner.compacted {
                    return Err(ApiError::gone(rv, inner.compacted));
                }
                inner
                    .history
                    .iter()
                    .filter(|c| c.rv > rv && c.res == res)
                    .cloned()
                    .collect()
            }
        };
        Ok(Subscription {
            initial,
            live: self.changes.subscribe(),
            rv: inner.rv,
        })
    }

    /// Every object of a resource as `(namespace, name, object)` (controllers' view).
    pub fn all(&self, res: &ResKey) -> Vec<Value> {
        let inner = self.lock();
        inner
            .objects
            .get(res)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }
}

fn lookup<'a>(objects: &'a Objects, kind: &KindInfo, ns: &str, name: &str) -> Option<&'a Value> {
    let ns = if kind.namespaced { ns } else { "" };
    objects
        .get(&kind.key())
        .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
}

fn finalizers_empty(obj: &Value) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_none_or(|a| a.is_empty())
}

fn check_type(kind: &KindInfo, obj: &Value) -> Result<()> {
    if let Some(k) = obj["kind"].as_str()
        && k != kind.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind of the body ({k}) does not match the resource {} (kind {})",
            kind.qualified(),
            kind.kind
        )));
    }
    if let Some(v) = obj["apiVersion"].as_str()
        && v != kind.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the apiVersion of the body ({v}) does not match the resource {} ({})",
            kind.qualified(),
            kind.api_version()
        )));
    }
    Ok(())
}

fn validate_name(kind: &KindInfo, name: &str) -> Result<()> {
    let valid_name = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !valid_name {
        return Err(ApiError::invalid(
            &kind.kind,
            name,
            "metadata.name",
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ));
    }
    Ok(())
}

/// The CustomResourceDefinition of a custom resource kind (`None` for built-in kinds).
fn crd_of<'a>(objects: &'a Objects, kind: &KindInfo) -> Option<&'a Value> {
    if kind.group.is_empty() {
        return None;
    }
    objects
        .get(&ResKey::new(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        ))?
        .get(&(String::new(), kind.qualified()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::patch::PatchType;

    fn store() -> Store {
        let s = Store::new(Clock::at(std::time::Duration::from_secs(1_800_000_000)), 4);
        let ns = s.kinds().find("", "v1", "namespaces").unwrap();
        s.create(&ns, "", json!({"metadata": {"name": "default"}}))
            .unwrap();
        s
    }

    fn pod(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c"}]}})
    }

    #[tokio::test]
    async fn update_with_stale_version_conflicts() {
        let s = store();
        let pods = s.kinds().find("", "v1", "pods").unwrap();
        let p = s.create(&pods, "default", pod("a")).unwrap();
        let mut p2 = p.clone();
        p2["metadata"]["labels"] = json!({"x": "1"});
        s.update(&pods, "default", "a", p2, Subresource::Main)
            .unwrap();
        let mut stale = p.clone();
        stale["metadata"]["labels"] = json!({"x": "2"});
        let e = s
            .update(&pods, "default", "a", stale, Subresource::Main)
            .unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(e.reason, "Conflict");
    }

    #[tokio::test]
    async fn finalizers_hold_deletion_until_removed() {
        let s = store();
        let pods = s.kinds().find("", "v1", "pods").unwrap();
        let mut p = pod("a");
        p["metadata"]["finalizers"] = json!(["example.com/hold"]);
        s.create(&pods, "default", p).unwrap();
        let d = s.delete(&pods, "default", "a", None).unwrap();
        assert!(d["metadata"]["deletionTimestamp"].is_string());
        assert!(s.get(&pods, "default", "a").is_ok());
        s.patch(
            &pods,
            "default",
            "a",
            PatchType::Merge,
            &json!({"metadata": {"finalizers": null}}),
            Subresource::Main,
        )
        .unwrap();
        assert_eq!(s.get(&pods, "default", "a").unwrap_err().code, 404);
    }

    #[tokio::test]
    async fn status_subresource_is_separate() {
        let s = store();
        let pods = s.kinds().find("", "v1", "pods").unwrap();
        s.create(&pods, "default", pod("a")).unwrap();
        let p = s
            .patch(
                &pods,
                "default",
                "a",
                PatchType::Merge,
                &json!({"status": {"phase": "Running"}}),
                Subresource::Main,
            )
            .unwrap();
        assert_eq!(
            p["status"]["phase"], "Pending",
            "main resource writes keep the status"
        );
        let p = s
            .patch(
                &pods,
                "default",
                "a",
                PatchType::Merge,
                &json!({"status": {"phase": "Running"}, "spec": {"nodeName": "x"}}),
                Subresource::Status,
            )
            .unwrap();
        assert_eq!(p["status"]["phase"], "Running");
        assert!(
            p["spec"]["nodeName"].is_null(),
            "status writes keep the spec"
        );
    }

    #[tokio::test]
    async fn history_window_gives_gone() {
        let s = store();
        let pods = s.kinds().find("", "v1", "pods").unwrap();
        let first = s.current_rv();
        for i in 0..6 {
            s.create(&pods, "default", pod(&format!("p{i}"))).unwrap();
        }
        assert_eq!(s.subscribe(&pods, Some(first)).unwrap_err().code, 410);
        let recent = s.current_rv() - 2;
        assert_eq!(s.subscribe(&pods, Some(recent)).unwrap().initial.len(), 2);
    }

    #[tokio::test]
    async fn invalid_objects_are_422_naming_the_field() {
        let s = store();
        let pods = s.kinds().find("", "v1", "pods").unwrap();
        let e = s.create(&pods, "default", pod("Bad_Name")).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("metadata.name"), "{}", e.message);
        let e = s
            .create(
                &pods,
                "default",
                json!({"metadata": {"name": "a"}, "spec": {}}),
            )
            .unwrap_err();
        assert!(e.message.contains("spec.containers"), "{}", e.message);
        let e = s.create(&pods, "nope", pod("a")).unwrap_err();
        assert_eq!(e.code, 404);
    }

    #[tokio::test]
    async fn deleting_an_owner_collects_dependents() {
        let s = store();
        let pods = s.kinds().find("", "v1", "pods").unwrap();
        let deps = s.kinds().find("apps", "v1", "deployments").unwrap();
        let d = s
            .create(
                &deps,
                "default",
                json!({"metadata": {"name": "web"}, "spec": {}}),
            )
            .unwrap();
        let mut p = pod("web-1");
        p["metadata"]["ownerReferences"] =
            json!([{"uid": d["metadata"]["uid"], "kind": "Deployment", "name": "web"}]);
        s.create(&pods, "default", p).unwrap();
        s.delete(&deps, "default", "web", None).unwrap();
        assert_eq!(s.get(&pods, "default", "web-1").unwrap_err().code, 404);
    }
}
