//! Server-side field validation (`?fieldValidation=Strict|Warn`), as the API server does it
//! for kubectl: fields the kind's schema does not declare are errors (Strict) or warnings (Warn).
//!
//! This is the request-level check of unknown fields only; what the stored object must be
//! (types, enums, CEL rules, pruning, defaults, core Pod rules) is [`crate::api::validation`].

use serde_json::{Map, Value};

/// What the request asked for in `fieldValidation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown fields are dropped silently (the default when the parameter is absent).
    #[default]
    Ignore,
    /// Unknown fields are reported in `Warning` headers; the request succeeds.
    Warn,
    /// Unknown fields fail the request with 400 BadRequest.
    Strict,
}

// === impl FieldValidation ===

impl FieldValidation {
    /// Parses the query parameter's value; `None` for an unknown directive.
    pub fn parse(v: &str) -> Option<Self> {
        match v {
            "Ignore" | "" => Some(Self::Ignore),
            "Warn" => Some(Self::Warn),
            "Strict" => Some(Self::Strict),
            _ => None,
        }
    }
}

/// Resolves `$ref` and single-element `allOf` wrappers against `defs`.
fn resolve<'a>(mut schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    for _ in 0..16 {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or_default();
            match defs.get(name) {
                Some(s) => schema = s,
                None => return schema,
            }
        } else if let Some([inner]) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            schema = inner;
        } else {
            return schema;
        }
    }
    schema
}

/// The fields of `obj` that `schema` does not declare, as paths in the API server's style
/// (`spec.template.spec.containers[0].imagee`), sorted. Keys of patch directives (`$patch`,
/// `$setElementOrder/...`, `$retainKeys`) are not fields and are skipped, and so are unknown
/// fields set to `null` (a patch deleting them), so patches can be checked as they are.
pub fn unknown_fields(obj: &Value, schema: &Value, defs: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    walk(obj, schema, defs, "", &mut out);
    out.sort();
    out
}

fn walk(obj: &Value, schema: &Value, defs: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    let schema = resolve(schema, defs);
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        || schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
    {
        return;
    }
    match obj {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            if props.is_none() && additional.is_none() {
                // `type: object` alone: a free-form map.
                return;
            }
            for (k, v) in m {
                if k.starts_with('$') {
                    continue;
                }
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) | (None, Some(s)) => walk(v, s, defs, &sub, out),
                    (None, None)
                        if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") => {
                    }
                    // In a merge patch, `null` deletes the field (kubectl apply removes a field
                    // it set before this way): the patched object does not hold it.
                    (None, None) if v.is_null() => {}
                    (None, None) => out.push(sub),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    walk(v, item_schema, defs, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_fields_are_named_by_path_and_known_ones_pass() {
        let defs: Map<String, Value> = serde_json::from_value(json!({
            "C": {"type": "object", "properties": {"name": {"type": "string"}, "env": {"type": "array", "items": {"$ref": "#/components/schemas/E"}}}},
            "E": {"type": "object", "properties": {"name": {"type": "string"}}},
        }))
        .unwrap();
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "containers": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/C"}]}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
        }});
        let obj = json!({"spec": {
            "containers": [{"name": "a", "imagee": "x", "env": [{"name": "A", "valu": "1"}]}],
            "labels": {"anything": "goes"},
            "free": {"any": {"thing": 1}},
            "$setElementOrder/containers": [{"name": "a"}],
            "replica": 3,
        }});
        assert_eq!(
            unknown_fields(&obj, &schema, &defs),
            vec![
                "spec.containers[0].env[0].valu".to_string(),
                "spec.containers[0].imagee".to_string(),
                "spec.replica".to_string(),
            ]
        );
        let ok = json!({"spec": {"containers": [{"name": "a"}], "labels": {"x": "y"}}});
        assert!(unknown_fields(&ok, &schema, &defs).is_empty());
    }

    #[test]
    fn directives_parse() {
        assert_eq!(
            FieldValidation::parse("Strict"),
            Some(FieldValidation::Strict)
        );
        assert_eq!(FieldValidation::parse("Warn"), Some(FieldValidation::Warn));
        assert_eq!(
            FieldValidation::parse("Ignore"),
            Some(FieldValidation::Ignore)
        );
        assert_eq!(FieldValidation::parse("strict"), None);
    }
}
