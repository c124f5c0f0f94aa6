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
use super::patch::PatchType;
use super::validation::{self, Admission};
use crate::clock::Clock;

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

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// Everything but `status` (when the kind has a status subresource).
    Main,
    /// Only `status`.
    Status,
    /// Spec and status together (in-process controllers, the binding subresource).
    Both,
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

    /// Creates an object, validated as the API server validates it ([`validation`]).
    ///
    /// # Errors
    /// 400 for a kind or namespace that disagrees with the request, 404 for a missing
    /// namespace, 409 when the name is taken, 422 for an invalid object.
    pub fn create(&self, kind: &KindInfo, ns: &str, obj: Value) -> Result<Value> {
        self.create_with(kind, ns, obj, Admission::Validate)
    }

    /// [`Store::create`], validated or not: [`Admission::Skip`] stores the object as it is
    /// (only its name must be valid), as a newer API server would have accepted it.
    ///
    /// # Errors
    /// As [`Store::create`].
    pub fn create_with(
        &self,
        kind: &KindInfo,
        ns: &str,
        mut obj: Value,
        admission: Admission,
    ) -> Result<Value> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        check_type(kind, &obj)?;
        obj["apiVersion"] = json!(kind.api_version());
        obj["kind"] = json!(kind.kind);
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        let body_ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if kind.namespaced {
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({ns})"
                )));
            }
            obj["metadata"]["namespace"] = json!(ns);
        } else if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        let mut inner = self.lock();
        let name = match obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => match obj["metadata"]["generateName"].as_str() {
                Some(prefix) => {
                    inner.uid += 1;
                    format!("{prefix}{}", random_suffix(inner.uid))
                }
                None => {
                    return Err(ApiError::invalid(
                        &kind.kind,
                        "",
                        "metadata.name",
                        "name or generateName is required",
                    ));
                }
            },
        };
        validate_name(kind, &name)?;
        if kind.namespaced {
            let ns_key = ResKey::new("", "namespaces");
            let exists = inner
                .objects
                .get(&ns_key)
                .is_some_and(|m| m.contains_key(&(String::new(), ns.to_string())));
            if !exists {
                return Err(ApiError::not_found("namespaces", ns));
            }
        }
        let key = (
            if kind.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name.clone(),
        );
        inner.uid += 1;
        let meta = &mut obj["metadata"];
        meta["name"] = json!(name);
        meta["uid"] = json!(format!("00000000-0000-4000-8000-{:012x}", inner.uid));
        meta["creationTimestamp"] = json!(self.clock.rfc3339());
        meta["generation"] = json!(1);
        if let Some(m) = meta.as_object_mut() {
            m.remove("deletionTimestamp");
            m.remove("resourceVersion");
        }
        if kind.group.is_empty() && kind.resource == "pods" {
            let ranges: Vec<Value> = inner
                .objects
                .get(&ResKey::new("", "limitranges"))
                .into_iter()
                .flat_map(|m| m.iter())
                .filter(|((n, _), _)| n == ns)
                .map(|(_, r)| r.clone())
                .collect();
            super::limit_range::admit(&mut obj, &ranges);
            if obj["status"]["phase"].is_null() {
                obj["status"]["phase"] = json!("Pending");
            }
        }
        if admission == Admission::Validate {
            let crd = crd_of(&inner.objects, kind);
            validation::admit(kind, &name, &mut obj, None, Subresource::Main, crd)?;
        }
        // After validation, as the API server finds a taken name only when it stores.
        if inner
            .objects
            .get(&kind.key())
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::already_exists(&kind.qualified(), &name));
        }
        if kind.resource == "customresourcedefinitions" {
            let served = self.kinds.register_crd(&obj);
            if served.is_empty() {
                return Err(ApiError::invalid(
                    &kind.kind,
                    &name,
                    "spec",
                    "group, names.plural, names.kind and one served version are required",
                ));
            }
            obj["status"] = json!({
                "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
                "acceptedNames": obj["spec"]["names"].clone(),
                "storedVersions": served.iter().map(|k| k.version.clone()).collect::<Vec<_>>(),
            });
        }
        Ok(self.commit(&mut inner, kind.key(), key, EventType::Added, obj, None))
    }

    /// Replaces an object (`PUT`). A stale `metadata.resourceVersion` in the body is a conflict;
    /// an empty one updates unconditionally.
    ///
    /// # Errors
    /// 404, 409 on a stale version, 400 when the body names another object.
    pub fn update(
        &self,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        obj: Value,
        sub: Subresource,
    ) -> Result<Value> {
        self.update_with(kind, ns, name, obj, sub, Admission::Validate)
    }

    /// [`Store::update`], validated or not ([`Admission::Skip`]).
    ///
    /// # Errors
    /// As [`Store::update`].
    pub fn update_with(
        &self,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        obj: Value,
        sub: Subresource,
        admission: Admission,
    ) -> Result<Value> {
        let mut inner = self.lock();
        self.update_locked(&mut inner, kind, ns, name, obj, sub, admission)
    }

    /// Patches an object. Server-side apply creates it when it does not exist.
    ///
    /// # Errors
    /// As [`Store::update`], plus 422 when the patch cannot be applied.
    pub fn patch(
        &self,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        pt: PatchType,
        patch: &Value,
        sub: Subresource,
    ) -> Result<Value> {
        self.patch_with(kind, ns, name, pt, patch, sub, Admission::Validate)
    }

    /// [`Store::patch`], validated or not ([`Admission::Skip`]).
    ///
    /// # Errors
    /// As [`Store::patch`].
    #[allow(clippy::too_many_arguments)]
    pub fn patch_with(
        &self,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        pt: PatchType,
        patch: &Value,
        sub: Subresource,
        admission: Admission,
    ) -> Result<Value> {
        let mut inner = self.lock();
        let current = lookup(&inner.objects, kind, ns, name).cloned();
        let Some(current) = current else {
            if pt == PatchType::Apply && sub == Subresource::Main {
                drop(inner);
                let mut obj = patch.clone();
                obj["metadata"]["name"] = json!(name);
                return self.create_with(kind, ns, obj, admission);
            }
            return Err(ApiError::not_found(&kind.qualified(), name));
        };
        let mut next = current.clone();
        pt.apply(&mut next, patch)?;
        // A patch without a resourceVersion applies to whatever is stored.
        if patch["metadata"]["resourceVersion"].is_null() {
            next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        }
        self.update_locked(&mut inner, kind, ns, name, next, sub, admission)
    }

    /// Reads, changes and writes an object atomically (for the in-process controllers). `f`
    /// returns `Ok(false)` to leave it as it is.
    ///
    /// # Errors
    /// 404, or the error `f` returns.
    pub fn mutate(
        &self,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        sub: Subresource,
        f: impl FnOnce(&mut Value) -> Result<bool>,
    ) -> Result<Value> {
        let mut inner = self.lock();
        let mut obj = lookup(&inner.objects, kind, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.qualified(), name))?;
        if !f(&mut obj)? {
            return Ok(obj);
        }
        self.update_locked(&mut inner, kind, ns, name, obj, sub, Admission::Validate)
    }

    #[allow(clippy::too_many_arguments)]
    fn update_locked(
        &self,
        inner: &mut Inner,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        mut obj: Value,
        sub: Subresource,
        admission: Admission,
    ) -> Result<Value> {
        let ns = if kind.namespaced { ns } else { "" };
        let old = lookup(&inner.objects, kind, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.qualified(), name))?;
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        check_type(kind, &obj)?;
        if let Some(body_name) = obj["metadata"]["name"].as_str()
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        match obj["metadata"]["resourceVersion"].as_str() {
            Some(rv)
                if !rv.is_empty() && old["metadata"]["resourceVersion"].as_str() != Some(rv) =>
            {
                return Err(ApiError::conflict(
                    &kind.qualified(),
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            _ => {}
        }
        let mut next = match sub {
            Subresource::Status => {
                let mut n = old.clone();
                n["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
                n
            }
            Subresource::Main => {
                if kind.status_subresource {
                    match old.get("status") {
                        Some(s) => obj["status"] = s.clone(),
                        None => {
                            if let Some(m) = obj.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
                obj
            }
            Subresource::Both => obj,
        };
        next["apiVersion"] = json!(kind.api_version());
        next["kind"] = json!(kind.kind);
        // Fields the server owns.
        {
            let m = &mut next["metadata"];
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "generation",
                "resourceVersion",
            ] {
                match old["metadata"].get(f) {
                    Some(v) => m[f] = v.clone(),
                    None => {
                        if let Some(o) = m.as_object_mut() {
                            o.remove(f);
                        }
                    }
                }
            }
            m["name"] = json!(name);
            if kind.namespaced {
                m["namespace"] = json!(ns);
            }
        }
        if admission == Admission::Validate {
            let crd = crd_of(&inner.objects, kind);
            validation::admit(kind, name, &mut next, Some(&old), sub, crd)?;
        }
        if sub != Subresource::Status && spec_of(&next) != spec_of(&old) {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            next["metadata"]["generation"] = json!(g);
        }
        validate_name(kind, name)?;
        if next == old {
            return Ok(old);
        }
        let key = (ns.to_string(), name.to_string());
        let deleting = !next["metadata"]["deletionTimestamp"].is_null();
        if deleting && finalizers_empty(&next) {
            return Ok(self.remove_locked(inner, kind.key(), key, next));
        }
        if kind.resource == "customresourcedefinitions" {
            self.kinds.register_crd(&next);
        }
        Ok(self.commit(inner, kind.key(), key, EventType::Modified, next, Some(old)))
    }

    /// Deletes an object: with finalizers it only gets a `deletionTimestamp`; without, it is
    /// removed, and so (in the background, as the garbage collector does) is every object that
    /// names it as an owner. `preconditions` is the DeleteOptions' `preconditions`.
    ///
    /// # Errors
    /// 404, 409 when a precondition fails.
    pub fn delete(
        &self,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        preconditions: Option<&Value>,
    ) -> Result<Value> {
        self.delete_with_grace(kind, ns, name, preconditions, None)
    }

    /// [`Store::delete`] with the DeleteOptions' `gracePeriodSeconds`: a pod running on a node
    /// is only marked, [`super::graceful`].
    ///
    /// # Errors
    /// As [`Store::delete`].
    pub fn delete_with_grace(
        &self,
        kind: &KindInfo,
        ns: &str,
        name: &str,
        preconditions: Option<&Value>,
        grace: Option<i64>,
    ) -> Result<Value> {
        let mut inner = self.lock();
        let ns = if kind.namespaced { ns } else { "" };
        let obj = lookup(&inner.objects, kind, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.qualified(), name))?;
        if let Some(p) = preconditions {
            for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
                if let Some(want) = p[field].as_str()
                    && obj["metadata"][field].as_str() != Some(want)
                {
                    return Err(ApiError::conflict(
                        &kind.qualified(),
                        name,
                        &format!(
                            "the {what} in the precondition ({want}) does not match the {what} in record"
                        ),
                    ));
                }
            }
        }
        let key = (ns.to_string(), name.to_string());
        if let Some(next) = super::graceful::begin(&self.clock, kind, &obj, grace) {
            if next == obj {
                return Ok(obj);
            }
            return Ok(self.commit(
                &mut inner,
                kind.key(),
                key,
                EventType::Modified,
                next,
                Some(obj),
            ));
        }
        if !finalizers_empty(&obj) {
            if !obj["metadata"]["deletionTimestamp"].is_null() {
                return Ok(obj);
            }
            let mut next = obj.clone();
            next["metadata"]["deletionTimestamp"] = json!(self.clock.rfc3339());
            next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            return Ok(self.commit(
                &mut inner,
                kind.key(),
                key,
                EventType::Modified,
                next,
                Some(obj),
            ));
        }
        Ok(self.remove_locked(&mut inner, kind.key(), key, obj))
    }

    fn remove_locked(
        &self,
        inner: &mut Inner,
        res: ResKey,
        key: (String, String),
        obj: Value,
    ) -> Value {
        if let Some(m) = inner.objects.get_mut(&res) {
            m.remove(&key);
        }
        let uid = obj["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let is_namespace = res.group.is_empty() && res.resource == "namespaces";
        if res.resource == "customresourcedefinitions" {
            self.kinds.unregister_crd(&obj);
            if let (Some(g), Some(p)) = (
                obj["spec"]["group"].as_str(),
                obj["spec"]["names"]["plural"].as_str(),
            ) {
                inner.objects.remove(&ResKey::new(g, p));
            }
        }
        let out = self.commit(inner, res, key.clone(), EventType::Deleted, obj, None);
        // Garbage collection: dependents by owner UID; for a namespace, its contents.
        let mut dependents = Vec::new();
        for (r, m) in &inner.objects {
            for ((ns, name), o) in m {
                let owned = !uid.is_empty()
                    && o["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| {
                            refs.iter().any(|r| r["uid"].as_str() == Some(uid.as_str()))
                        });
                let in_ns = is_namespace && *ns == key.1;
                if owned || in_ns {
                    dependents.push((r.clone(), ns.clone(), name.clone()));
                }
            }
        }
        for (r, ns, name) in dependents {
            let Some(o) = inner
                .objects
                .get(&r)
                .and_then(|m| m.get(&(ns.clone(), name.clone())))
                .cloned()
            else {
                continue;
            };
            if finalizers_empty(&o) {
                self.remove_locked(inner, r, (ns, name), o);
            } else if o["metadata"]["deletionTimestamp"].is_null() {
                let mut next = o.clone();
                next["metadata"]["deletionTimestamp"] = json!(self.clock.rfc3339());
                self.commit(inner, r, (ns, name), EventType::Modified, next, Some(o));
            }
        }
        out
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

/// What a write must change for `metadata.generation` to move: everything but metadata and
/// status.
fn spec_of(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    o
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

/// Five characters from the alphabet Kubernetes uses for generated names, derived from `n`.
fn random_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut s = String::with_capacity(5);
    for _ in 0..5 {
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        s.push(ALPHABET[(x % ALPHABET.len() as u64) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
