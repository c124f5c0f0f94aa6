//! Replacing, patching and mutating objects: resourceVersion conflicts, subresources,
//! `metadata.generation`, validation and finalizer-held deletions that end.

use serde_json::{Value, json};

use super::{
    EventType, Inner, Store, Subresource, check_type, crd_of, finalizers_empty, lookup,
    validate_name,
};
use crate::api::error::{ApiError, Result};
use crate::api::kinds::KindInfo;
use crate::api::patch::PatchType;
use crate::api::validation::{self, Admission};

// === impl Store ===

impl Store {
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
