//! Patch types: JSON merge patch (RFC 7386), JSON patch (RFC 6902), a strategic-merge patch
//! that merges lists of objects by their `name`/`type`/`key`, and server-side apply in a simple
//! form (the applied configuration is merged into the live object like a strategic merge).

use serde_json::{Map, Value};

use super::error::{ApiError, Result};

/// A supported patch content type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

// === impl PatchType ===

impl PatchType {
    /// From a `Content-Type` header.
    ///
    /// # Errors
    /// 415 naming the content type.
    pub fn from_content_type(ct: &str) -> Result<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            _ => Err(ApiError::unsupported_media_type(ct)),
        }
    }

    /// Parses the patch body.
    ///
    /// # Errors
    /// 400 naming the patch type when the body is not valid JSON (YAML for apply).
    pub fn parse_body(self, body: &[u8]) -> Result<Value> {
        match self {
            Self::Apply => serde_yaml::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid apply patch body: {e}"))),
            _ => serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid {self:?} patch body: {e}"))),
        }
    }

    /// Applies `patch` to `target` in place.
    ///
    /// # Errors
    /// 422 when a JSON patch operation fails (path missing, failed `test`), 400 when the patch is
    /// not a valid JSON patch document.
    pub fn apply(self, target: &mut Value, patch: &Value) -> Result<()> {
        match self {
            Self::Merge => {
                json_patch::merge(target, patch);
                Ok(())
            }
            Self::Json => {
                let p: json_patch::Patch = serde_json::from_value(patch.clone())
                    .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                json_patch::patch(target, &p).map_err(|e| ApiError {
                    code: 422,
                    reason: "Invalid",
                    message: format!("the JSON patch could not be applied: {e}"),
                    details: None,
                })
            }
            Self::Strategic | Self::Apply => {
                strategic_merge(target, patch);
                Ok(())
            }
        }
    }
}

/// Keys that identify list elements for a strategic merge, in the order they are tried.
pub const MERGE_KEYS: [&str; 5] = ["name", "type", "key", "containerPort", "devicePath"];

/// Strategic-merge `patch` into `target`: objects merge recursively, `null` deletes, lists of
/// objects that all carry one of [`MERGE_KEYS`] merge element-wise by that key, other lists are
/// replaced. `$patch`/`$retainKeys`/`$setElementOrder` directives are honoured only as far as
/// `$patch: delete` on list elements and otherwise ignored.
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut p = p.clone();
                p.remove("$patch");
                *t = p;
                return;
            }
            for (k, pv) in p {
                if k.starts_with('$') {
                    continue;
                }
                if pv.is_null() {
                    t.remove(k);
                    continue;
                }
                match t.get_mut(k) {
                    Some(tv) => strategic_merge(tv, pv),
                    None => {
                        let mut v = Value::Object(Map::new());
                        if pv.is_object() {
                            strategic_merge(&mut v, pv);
                        } else {
                            v = strip_directives(pv);
                        }
                        t.insert(k.clone(), v);
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(p)) => {
            let key = MERGE_KEYS.iter().find(|k| {
                !p.is_empty()
                    && p.iter().all(|e| e.get(**k).is_some())
                    && t.iter().all(|e| e.get(**k).is_some())
            });
            match key {
                Some(key) => {
                    for pe in p {
                        let id = &pe[*key];
                        let delete = pe.get("$patch").and_then(Value::as_str) == Some("delete");
                        match t.iter().position(|te| &te[*key] == id) {
                            Some(i) if delete => {
                                t.remove(i);
                            }
                            Some(i) => strategic_merge(&mut t[i], pe),
                            None if delete => {}
                            None => t.push(strip_directives(pe)),
                        }
                    }
                }
                None => *t = p.iter().map(strip_directives).collect(),
            }
        }
        (t, p) => *t = strip_directives(p),
    }
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_deletes() {
        let mut t = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        PatchType::Merge
            .apply(
                &mut t,
                &json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
            )
            .unwrap();
        assert_eq!(t, json!({"metadata": {"labels": {"b": "2", "c": "3"}}}));
    }

    #[test]
    fn strategic_merges_lists_by_key() {
        let mut t = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
                                     "taints": [{"key": "k1", "effect": "NoSchedule"}]}});
        let p = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}],
                                "taints": [{"key": "k1", "$patch": "delete"}]}});
        PatchType::Strategic.apply(&mut t, &p).unwrap();
        assert_eq!(
            t["spec"]["containers"],
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}])
        );
        assert_eq!(t["spec"]["taints"], json!([]));
    }

    #[test]
    fn json_patch_failure_is_422() {
        let mut t = json!({"metadata": {}});
        let e = PatchType::Json
            .apply(
                &mut t,
                &json!([{"op": "remove", "path": "/metadata/finalizers/0"}]),
            )
            .unwrap_err();
        assert_eq!(e.code, 422);
        PatchType::Json
            .apply(
                &mut t,
                &json!([{"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]),
            )
            .unwrap();
        assert_eq!(t["metadata"]["finalizers"], json!(["f"]));
    }

    #[test]
    fn unknown_content_type_is_415() {
        let e = PatchType::from_content_type("text/plain").unwrap_err();
        assert_eq!(e.code, 415);
        assert!(e.message.contains("text/plain"));
    }
}
