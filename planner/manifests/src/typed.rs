//! Kubernetes objects as JSON values into typed objects, with the path of the first bad field
//! (shared by the object reader and the workload controllers' expansion).

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Removes `null` members (Kubernetes reads them as absent) so that serde defaults apply.
pub(crate) fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// A field error before its location is known: the path in the object and the message.
pub(crate) type FieldError = (String, String);

/// Deserializes a typed object, keeping the path of the first bad field. `api_version` is the
/// one the type expects (a `policy/v1beta1` PodDisruptionBudget reads as a `policy/v1` one).
pub(crate) fn typed<T: DeserializeOwned>(
    value: &Value,
    api_version: &str,
) -> Result<T, FieldError> {
    let mut v = value.clone();
    strip_nulls(&mut v);
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version.into()));
    }
    serde_path_to_error::deserialize(&v).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        (if path == "." { String::new() } else { path }, message)
    })
}
