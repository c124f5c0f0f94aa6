//! Creating objects: names (given or generated), namespaces, validation, CRDs registered as
//! kinds.

use serde_json::{Value, json};

use super::{EventType, Store, Subresource, check_type, crd_of, validate_name};
use crate::api::error::{ApiError, Result};
use crate::api::kinds::{KindInfo, ResKey};
use crate::api::validation::{self, Admission};

// === impl Store ===

impl Store {
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
            crate::api::limit_range::admit(&mut obj, &ranges);
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
