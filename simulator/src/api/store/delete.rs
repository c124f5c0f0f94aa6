//! Deleting objects: finalizers, preconditions, graceful pod deletion and the garbage
//! collection of dependents.

use serde_json::{Value, json};

use super::{EventType, Inner, Store, finalizers_empty, lookup};
use crate::api::error::{ApiError, Result};
use crate::api::kinds::{KindInfo, ResKey};

// === impl Store ===

impl Store {
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
    /// is only marked, [`crate::api::graceful`].
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
        if let Some(next) = crate::api::graceful::begin(&self.clock, kind, &obj, grace) {
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

    pub(super) fn remove_locked(
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
}
