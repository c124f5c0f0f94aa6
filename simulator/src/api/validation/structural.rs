//! A CustomResourceDefinition's `openAPIV3Schema` applied as a structural schema, as
//! apiextensions-apiserver applies it to every write of a custom resource:
//!
//! 1. [`prune_and_default`]: fields the schema does not declare are dropped (unless
//!    `x-kubernetes-preserve-unknown-fields`; `apiVersion`, `kind` and `metadata` of the object
//!    and of `x-kubernetes-embedded-resource`s are kept), `null`s of non-nullable fields are
//!    dropped, and missing fields with a `default` get it (defaults are pruned and defaulted in
//!    turn) — `pkg/apiserver/schema/pruning` and `pkg/apiserver/schema/defaulting`.
//! 2. [`validate`]: types (`x-kubernetes-int-or-string` is an integer or a string), `nullable`,
//!    `enum`, `pattern`, `format: date-time`, `minimum`/`maximum` (and exclusive),
//!    `multipleOf`, `minLength`/`maxLength`, `minItems`/`maxItems`,
//!    `minProperties`/`maxProperties`, `required`, `allOf`/`anyOf`/`oneOf`, and the
//!    `x-kubernetes-list-type: set|map` invariants (no duplicate items or keys,
//!    `pkg/apiserver/schema/listtype`). Messages are kube-openapi's
//!    (`pkg/validation/errors/schema.go`: `spec.weight in body should be greater than or equal
//!    to 1`), turned into field errors as `kubeOpenAPIResultToFieldErrors` does
//!    (apiextensions-apiserver `pkg/apiserver/validation/validation.go`).
//!
//! With an old object (an update), a value equal to the old value at the same place is not
//! validated again (ratcheting; lists of `x-kubernetes-list-type: map` correlate items by key,
//! other lists only as a whole).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value, json};

use super::ErrorType;
use super::FieldError;

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Drops what the schema does not declare and fills in defaults, in place. `root`: `value` is
/// a whole object, whose `apiVersion`, `kind` and `metadata` are kept as they are.
pub fn prune_and_default(schema: &Value, value: &mut Value, root: bool) {
    prune(schema, value, root, 0);
}

const MAX_DEPTH: usize = 64;

fn prune(schema: &Value, value: &mut Value, keep_meta: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    match value {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let additional_schema = additional.filter(|a| a.is_object());
            let any_additional = additional == Some(&Value::Bool(true));
            if props.is_none() && additional.is_none() && !keep_meta {
                // `type: object` without properties: nothing declared inside to prune or
                // default, and with preserve-unknown-fields everything is kept.
                if !preserve {
                    m.clear();
                }
                return;
            }
            let embedded = keep_meta || flag(schema, "x-kubernetes-embedded-resource");
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_schema = props.and_then(|p| p.get(&k)).or(additional_schema);
                match child_schema {
                    Some(s) => {
                        if m[&k].is_null() && !flag(s, "nullable") {
                            m.remove(&k);
                        }
                    }
                    None if preserve || any_additional => {}
                    None => {
                        m.remove(&k);
                    }
                }
            }
            for (k, s) in props.into_iter().flatten() {
                if !m.contains_key(k)
                    && let Some(d) = s.get("default")
                {
                    m.insert(k.clone(), d.clone());
                }
            }
            for (k, v) in m.iter_mut() {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(s) = props.and_then(|p| p.get(k)).or(additional_schema) {
                    prune(s, v, false, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for v in items {
                    prune(s, v, false, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// The schema errors of `value` (a whole object when `root`, whose `apiVersion`, `kind` and
/// `metadata` the schema does not judge), at field paths under `path`. `old`: the stored
/// object, for ratcheting.
pub fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    root: bool,
) -> Vec<FieldError> {
    let mut w = Walker { errors: Vec::new() };
    w.node(schema, value, old, path, root, 0);
    w.errors
}

struct Walker {
    errors: Vec<FieldError>,
}

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

fn type_ok(want: &str, v: &Value) -> bool {
    match (want, v) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// A number as Go's `%v` prints a float64 bound (`1`, `0.5`).
fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => format!("{f}"),
        None => v.to_string(),
    }
}

fn regex(pattern: &str) -> Option<Regex> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    c.entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok())
        .clone()
}

// === impl Walker ===

impl Walker {
    fn invalid(&mut self, path: &str, value: &Value, detail: String) {
        self.errors
            .push(FieldError::invalid(path, value.clone(), detail));
    }

    fn node(
        &mut self,
        schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        root: bool,
        depth: usize,
    ) {
        if depth > MAX_DEPTH || old == Some(value) {
            return;
        }
        let int_or_string = flag(schema, "x-kubernetes-int-or-string");
        let want = schema.get("type").and_then(Value::as_str);
        if value.is_null() {
            if !flag(schema, "nullable")
                && let Some(t) = want
            {
                self.errors.push(FieldError::new(
                    ErrorType::TypeInvalid,
                    path,
                    Some(json!("null")),
                    format!("{path} in body must be of type {t}: \"null\""),
                ));
            }
            return;
        }
        let wrong_type = if int_or_string {
            (!type_ok("integer", value) && !type_ok("string", value)).then_some("integer,string")
        } else {
            want.filter(|t| !type_ok(t, value))
        };
        if let Some(t) = wrong_type {
            let got = json_type(value);
            self.errors.push(FieldError::new(
                ErrorType::TypeInvalid,
                path,
                Some(json!(got)),
                format!("{path} in body must be of type {t}: \"{got}\""),
            ));
            return;
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array)
            && !values.contains(value)
        {
            let supported: Vec<String> = values
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect();
            self.errors
                .push(FieldError::not_supported(path, value.clone(), &supported));
        }
        match value {
            Value::String(s) => self.string(schema, s, value, path),
            Value::Number(_) => self.number(schema, value, path),
            Value::Array(items) => self.array(schema, items, old, path, depth),
            Value::Object(m) => self.object(schema, m, old, path, root, depth),
            Value::Bool(_) | Value::Null => {}
        }
        if !int_or_string {
            self.junctors(schema, value, path, depth);
        }
    }

    fn string(&mut self, schema: &Value, s: &str, value: &Value, path: &str) {
        let chars = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && chars > max
        {
            self.errors.push(FieldError::too_long(path, max));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && chars < min
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && let Some(re) = regex(p)
            && !re.is_match(s)
        {
            self.invalid(path, value, format!("{path} in body should match '{p}'"));
        }
        if schema.get("format").and_then(Value::as_str) == Some("date-time")
            && chrono::DateTime::parse_from_rfc3339(s).is_err()
        {
            self.errors.push(FieldError::new(
                ErrorType::TypeInvalid,
                path,
                Some(value.clone()),
                format!("{path} in body must be of type date-time: {}", value),
            ));
        }
    }

    fn number(&mut self, schema: &Value, value: &Value, path: &str) {
        let Some(v) = value.as_f64() else { return };
        if let Some(min) = schema.get("minimum") {
            let m = min.as_f64().unwrap_or(f64::MIN);
            if flag(schema, "exclusiveMinimum") {
                if v <= m {
                    self.invalid(
                        path,
                        value,
                        format!("{path} in body should be greater than {}", num(min)),
                    );
                }
            } else if v < m {
                self.invalid(
                    path,
                    value,
                    format!(
                        "{path} in body should be greater than or equal to {}",
                        num(min)
                    ),
                );
            }
        }
        if let Some(max) = schema.get("maximum") {
            let m = max.as_f64().unwrap_or(f64::MAX);
            if flag(schema, "exclusiveMaximum") {
                if v >= m {
                    self.invalid(
                        path,
                        value,
                        format!("{path} in body should be less than {}", num(max)),
                    );
                }
            } else if v > m {
                self.invalid(
                    path,
                    value,
                    format!(
                        "{path} in body should be less than or equal to {}",
                        num(max)
                    ),
                );
            }
        }
        if let Some(f) = schema.get("multipleOf").and_then(Value::as_f64)
            && f > 0.0
            && (v / f).fract() != 0.0
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should be a multiple of {}", num(&json!(f))),
            );
        }
    }

    fn array(
        &mut self,
        schema: &Value,
        items: &[Value],
        old: Option<&Value>,
        path: &str,
        depth: usize,
    ) {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            self.errors
                .push(FieldError::too_many(path, items.len(), max));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            self.invalid(
                path,
                &json!(items.len()),
                format!("{path} in body should have at least {min} items"),
            );
        }
        let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
        let map_keys: Vec<&str> = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let key_of = |v: &Value| -> Value {
            let mut k = Map::new();
            for key in &map_keys {
                if let Some(x) = v.get(*key) {
                    k.insert((*key).to_string(), x.clone());
                }
            }
            Value::Object(k)
        };
        match list_type {
            Some("set") => {
                for (i, v) in items.iter().enumerate() {
                    if items[..i].contains(v) {
                        self.errors
                            .push(FieldError::duplicate(&format!("{path}[{i}]"), v.clone()));
                    }
                }
            }
            Some("map") if !map_keys.is_empty() => {
                for (i, v) in items.iter().enumerate() {
                    let k = key_of(v);
                    if items[..i].iter().any(|o| key_of(o) == k) {
                        self.errors
                            .push(FieldError::duplicate(&format!("{path}[{i}]"), k));
                    }
                }
            }
            _ => {}
        }
        let Some(item_schema) = schema.get("items") else {
            return;
        };
        let old_items = old.and_then(Value::as_array);
        for (i, v) in items.iter().enumerate() {
            // Only items of a map list correlate with old items (by their keys).
            let old_item = match (list_type, old_items) {
                (Some("map"), Some(olds)) if !map_keys.is_empty() => {
                    let k = key_of(v);
                    olds.iter().find(|o| key_of(o) == k)
                }
                _ => None,
            };
            self.node(
                item_schema,
                v,
                old_item,
                &format!("{path}[{i}]"),
                false,
                depth + 1,
            );
        }
    }

    fn object(
        &mut self,
        schema: &Value,
        m: &Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        root: bool,
        depth: usize,
    ) {
        let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
        let is_meta = |k: &str| embedded && matches!(k, "apiVersion" | "kind" | "metadata");
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !m.contains_key(r) && !is_meta(r) {
                self.errors.push(FieldError::required(&join(path, r), ""));
            }
        }
        let count = m.len();
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count as u64 > max
        {
            self.errors.push(FieldError::too_many(path, count, max));
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && (count as u64) < min
        {
            self.invalid(
                path,
                &json!(count),
                format!("{path} in body should have at least {min} properties"),
            );
        }
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (k, v) in m {
            if is_meta(k) {
                continue;
            }
            let Some(s) = props.and_then(|p| p.get(k)).or(additional) else {
                continue;
            };
            let old_child = old.and_then(|o| o.get(k));
            self.node(s, v, old_child, &join(path, k), false, depth + 1);
        }
    }

    /// `allOf`, `anyOf` and `oneOf`, with kube-openapi's messages
    /// (`pkg/validation/validate/schema_props.go`, `schema_messages.go`). Their errors have no
    /// field (`<nil>`), as the API server reports them.
    fn junctors(&mut self, schema: &Value, value: &Value, path: &str, depth: usize) {
        let run = |s: &Value| {
            let mut w = Walker { errors: Vec::new() };
            w.node(s, value, None, path, false, depth + 1);
            w.errors
        };
        let quoted = Value::String(path.to_string()).to_string();
        let nil = |msg: String| FieldError::invalid("<nil>", json!(""), msg);
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            let mut failed = 0;
            for s in all {
                let errs = run(s);
                if !errs.is_empty() {
                    failed += 1;
                    self.errors.extend(errs);
                }
            }
            if failed > 0 {
                let extra = if failed == all.len() {
                    ". None validated"
                } else {
                    ""
                };
                self.errors.push(nil(format!(
                    "{quoted} must validate all the schemas (allOf){extra}"
                )));
            }
        }
        if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
            && !any.is_empty()
        {
            let results: Vec<Vec<FieldError>> = any.iter().map(run).collect();
            if results.iter().all(|r| !r.is_empty()) {
                self.errors.push(nil(format!(
                    "{quoted} must validate at least one schema (anyOf)"
                )));
                if let Some(best) = results.into_iter().min_by_key(Vec::len) {
                    self.errors.extend(best);
                }
            }
        }
        if let Some(one) = schema.get("oneOf").and_then(Value::as_array)
            && !one.is_empty()
        {
            let results: Vec<Vec<FieldError>> = one.iter().map(run).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let extra = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.errors.push(nil(format!(
                    "{quoted} must validate one and only one schema (oneOf). {extra}"
                )));
                if valid == 0
                    && let Some(best) = results.into_iter().min_by_key(Vec::len)
                {
                    self.errors.extend(best);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["ref"], "properties": {
                "weight": {"type": "integer", "minimum": 1, "maximum": 100, "format": "int32"},
                "policy": {"type": "string", "enum": ["A", "B"], "default": "A"},
                "nodes": {"type": "string", "pattern": "^((100|[0-9]{1,2})%|[0-9]+)$", "default": "10%"},
                "ref": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}},
                "limits": {"type": "object", "additionalProperties": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": true,
                    "pattern": "^[0-9]+$"}},
                "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "reqs": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"],
                         "items": {"type": "object", "properties": {"key": {"type": "string"}, "min": {"type": "integer", "maximum": 50}}}},
                "when": {"type": "string", "format": "date-time", "nullable": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
        }})
    }

    fn fields(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn unknown_fields_are_pruned_and_defaults_applied() {
        let mut v = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "extra": 1,
            "spec": {"ref": {"name": "n", "typo": 1}, "weight": null, "free": {"any": {"thing": 1}}}});
        prune_and_default(&schema(), &mut v, true);
        assert_eq!(
            v,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
                "spec": {"ref": {"name": "n"}, "policy": "A", "nodes": "10%", "free": {"any": {"thing": 1}}}})
        );
    }

    #[test]
    fn every_kind_of_constraint_names_the_field() {
        let v = json!({"spec": {
            "weight": 0, "policy": "C", "nodes": "150%", "ref": {"name": ""},
            "limits": {"cpu": "lots", "memory": true},
            "tags": ["a", "a", "b"],
            "reqs": [{"key": "k", "min": 51}, {"key": "k"}],
            "when": "yesterday",
        }});
        let errors = fields(&validate(&schema(), &v, None, "", true));
        let want = [
            "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1",
            r#"spec.policy: Unsupported value: "C": supported values: "A", "B""#,
            r#"spec.nodes: Invalid value: "150%": spec.nodes in body should match '^((100|[0-9]{1,2})%|[0-9]+)$'"#,
            r#"spec.ref.name: Invalid value: "": spec.ref.name in body should be at least 1 chars long"#,
            r#"spec.limits.cpu: Invalid value: "lots": spec.limits.cpu in body should match '^[0-9]+$'"#,
            r#"spec.limits.memory: Invalid value: "boolean": spec.limits.memory in body must be of type integer,string: "boolean""#,
            "spec.tags: Too many: 3: must have at most 2 items",
            r#"spec.tags[1]: Duplicate value: "a""#,
            r#"spec.reqs[1]: Duplicate value: {"key":"k"}"#,
            "spec.reqs[0].min: Invalid value: 51: spec.reqs[0].min in body should be less than or equal to 50",
            r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#,
        ];
        for w in want {
            assert!(errors.iter().any(|e| e == w), "{w} not in {errors:#?}");
        }
        assert_eq!(errors.len(), want.len(), "{errors:#?}");
        let missing = validate(&schema(), &json!({"spec": {}}), None, "", true);
        assert_eq!(fields(&missing), vec!["spec.ref: Required value"]);
        let typed = validate(
            &schema(),
            &json!({"spec": {"ref": {}, "weight": "3"}}),
            None,
            "",
            true,
        );
        assert_eq!(
            fields(&typed),
            vec![
                r#"spec.weight: Invalid value: "string": spec.weight in body must be of type integer: "string""#
            ]
        );
    }

    #[test]
    fn unchanged_values_ratchet_on_update() {
        let old = json!({"spec": {"ref": {}, "weight": 0, "reqs": [{"key": "a", "min": 99}]}});
        let mut new = old.clone();
        new["spec"]["reqs"] = json!([{"key": "b", "min": 1}, {"key": "a", "min": 99}]);
        assert!(validate(&schema(), &new, Some(&old), "", true).is_empty());
        new["spec"]["weight"] = json!(-1);
        assert_eq!(validate(&schema(), &new, Some(&old), "", true).len(), 1);
    }

    #[test]
    fn one_of_reports_as_kube_openapi_does() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object",
            "oneOf": [{"required": ["role"]}, {"required": ["profile"]}],
            "properties": {"role": {"type": "string"}, "profile": {"type": "string"}}}}});
        let both = fields(&validate(
            &s,
            &json!({"spec": {"role": "r", "profile": "p"}}),
            None,
            "",
            true,
        ));
        assert_eq!(
            both,
            vec![
                r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
            ]
        );
        let none = fields(&validate(&s, &json!({"spec": {}}), None, "", true));
        assert!(
            none.contains(&"spec.role: Required value".to_string()),
            "{none:?}"
        );
    }
}
