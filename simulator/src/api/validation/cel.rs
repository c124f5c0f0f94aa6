//! A CustomResourceDefinition's `x-kubernetes-validations` rules, evaluated by kube-rs's
//! `kube-cel` (the schema's defaults applied first, transition rules with `oldSelf` on
//! updates), turned into the field errors the API server reports
//! (apiextensions-apiserver `pkg/apiserver/schema/cel/validation.go`: `Invalid value:
//! "object": <message>`, or `Forbidden`/`Required value`/`Duplicate value` by the rule's
//! `reason`).
//!
//! Each schema is compiled once per thread, CRD version and `resourceVersion`. On updates a failure at
//! a place whose value did not change is dropped (ratcheting, as `cel.WithRatcheting` does).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::rc::Rc;

use serde_json::{Value, json};

use super::{ErrorType, FieldError, at_path};

thread_local! {
    /// Compiled schemas by key, per thread (kube-cel's evaluator is per thread too).
    static CACHE: RefCell<HashMap<String, Rc<kube_cel::CompiledSchema>>> =
        RefCell::new(HashMap::new());
}

fn compiled(key: &str, schema: &Value) -> Rc<kube_cel::CompiledSchema> {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(s) = c.get(key) {
            return s.clone();
        }
        if c.len() > 64 {
            c.clear();
        }
        let s = Rc::new(kube_cel::compile_schema(schema));
        c.insert(key.to_string(), s.clone());
        s
    })
}

/// Whether a schema has any rule (so objects of CRDs without rules skip the evaluator).
pub fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_rules),
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// The rules' errors for `obj` (`old`: the stored object on updates). `key` names the schema
/// for the compile cache (CRD, version and `resourceVersion`).
pub fn errors(key: &str, schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    // The schema's text is part of the key: two simulations in one process may hold CRDs of
    // the same name and version with different schemas.
    let mut h = DefaultHasher::new();
    schema.to_string().hash(&mut h);
    let compiled = compiled(&format!("{key}/{:x}", h.finish()), schema);
    let Err(errors) = kube_cel::validate_compiled(&compiled, obj, old) else {
        return Vec::new();
    };
    errors
        .iter()
        .filter(|e| {
            // Ratcheting: a failure where nothing changed is not refused again.
            let Some(old) = old else { return true };
            match (at_path(obj, &e.field_path), at_path(old, &e.field_path)) {
                (Some(n), Some(o)) => n != o,
                _ => true,
            }
        })
        .map(|e| {
            let field = if e.field_path.is_empty() {
                "<nil>".to_string()
            } else {
                e.field_path.clone()
            };
            let shape = at_path(obj, &e.field_path).map_or("object", json_type);
            match e.reason.as_deref() {
                Some("FieldValueForbidden") => FieldError::forbidden(&field, e.message.clone()),
                Some("FieldValueRequired") => FieldError::required(&field, e.message.clone()),
                Some("FieldValueDuplicate") => FieldError::duplicate(&field, json!(shape)),
                _ => FieldError::new(
                    ErrorType::Invalid,
                    &field,
                    Some(json!(shape)),
                    e.message.clone(),
                ),
            }
        })
        .collect()
}

/// The schema type name of a value, as the error's value (`"object"`, `"string"`, ...).
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "!has(self.a) || self.a != 'bad'", "message": "a must not be bad"},
                {"rule": "self.k == oldSelf.k", "message": "k is immutable"},
            ],
            "properties": {"a": {"type": "string"}, "k": {"type": "string"}}}}})
    }

    #[test]
    fn rules_fail_with_their_message_at_their_node() {
        let s = schema();
        let errs = errors("t/1", &s, &json!({"spec": {"a": "bad", "k": "x"}}), None);
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec![r#"spec: Invalid value: "object": a must not be bad"#]
        );
        let old = json!({"spec": {"k": "x"}});
        let errs = errors("t/1", &s, &json!({"spec": {"k": "y"}}), Some(&old));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].detail, "k is immutable");
    }

    #[test]
    fn unchanged_failures_ratchet() {
        let s = schema();
        let old = json!({"spec": {"a": "bad", "k": "x"}, "status": {"n": 1}});
        let new = json!({"spec": {"a": "bad", "k": "x"}, "status": {"n": 2}});
        assert!(errors("t/1", &s, &new, Some(&old)).is_empty());
    }
}
