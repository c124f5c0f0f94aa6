//! Validation of writes as a real API server does it, so that the simulated cluster refuses
//! what a cluster refuses:
//!
//! - custom resources against their CustomResourceDefinition ([`structural`]: the
//!   `openAPIV3Schema` as a structural schema — unknown fields pruned, defaults applied, types,
//!   enums, patterns, formats, ranges, lengths, required fields, list sets and maps — and
//!   [`cel`]: the `x-kubernetes-validations` rules, transition rules with `oldSelf` on updates);
//! - Pods against a documented subset of the core validation ([`pod`]).
//!
//! Refusals are `422 Invalid` with the real server's `metav1.Status`: the message
//! `NodePool.karpenter.sh "x" is invalid: spec.weight: Invalid value: 0: ...` and one
//! `details.causes[]` entry (`reason`, `message`, `field`) per field error, the shapes of
//! apimachinery's `field.Error` (`pkg/util/validation/field/errors.go`) and
//! `errors.NewInvalid` (`pkg/api/errors/errors.go`).
//!
//! Updates ratchet as with `CRDValidationRatcheting` (on by default since Kubernetes 1.30,
//! apiextensions-apiserver `pkg/apiserver/validation/ratcheting.go`): a value unchanged from the
//! stored object is not refused again, so an object stored before a rule existed (or injected
//! with [`Admission::Skip`]) can still get status and metadata writes. The simulator applies the
//! same ratcheting to Pods; a real API server re-validates a Pod's whole spec on update, but a
//! Pod's resources and containers are immutable there anyway.
//!
//! [`Admission::Skip`] writes an object as it is (no pruning, defaulting or validation): an
//! object that a newer CRD or another version of the API server accepted (version skew), which
//! the isolation tests push into the running system. Over HTTP it is the simulator-only query
//! parameter `simulatorSkipValidation=true` (see [`SKIP_VALIDATION_PARAM`]).

pub mod cel;
pub mod pod;
pub mod structural;

use serde_json::{Value, json};

use super::error::{ApiError, Result};
use super::kinds::{KindInfo, Subresource};

/// The query parameter that makes a create, update or patch skip validation (simulator only;
/// no real API server has it): `?simulatorSkipValidation=true`.
pub const SKIP_VALIDATION_PARAM: &str = "simulatorSkipValidation";

/// Whether a write is validated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Admission {
    /// Pruned, defaulted and validated as a real API server does.
    #[default]
    Validate,
    /// Stored as it is: an object from a newer schema (version skew), for tests of what the
    /// services do with objects they cannot use.
    Skip,
}

/// apimachinery's `field.ErrorType`: the cause's `reason` and the message's first words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// `FieldValueRequired`: "Required value".
    Required,
    /// `FieldValueInvalid`: "Invalid value".
    Invalid,
    /// `FieldValueTypeInvalid`: "Invalid value" (a value of the wrong type).
    TypeInvalid,
    /// `FieldValueNotSupported`: "Unsupported value".
    NotSupported,
    /// `FieldValueTooLong`: "Too long".
    TooLong,
    /// `FieldValueTooMany`: "Too many".
    TooMany,
    /// `FieldValueDuplicate`: "Duplicate value".
    Duplicate,
    /// `FieldValueForbidden`: "Forbidden".
    Forbidden,
}

// === impl ErrorType ===

impl ErrorType {
    /// The cause's `reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Forbidden => "FieldValueForbidden",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Duplicate => "Duplicate value",
            Self::Forbidden => "Forbidden",
        }
    }
}

/// One field error, as apimachinery's `field.Error`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: ErrorType,
    /// The field path (`spec.template.spec.requirements[0].minValues`).
    pub field: String,
    /// The value at fault, printed for the value-carrying types (`None`: not printed).
    pub value: Option<Value>,
    /// What the rule says.
    pub detail: String,
}

// === impl FieldError ===

impl FieldError {
    /// `Required value`.
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, None, detail)
    }

    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(field: &str, value: Value, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, Some(value), detail)
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: Value, supported: &[String]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, field, Some(value), detail)
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: &str, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, None, detail)
    }

    /// `Duplicate value: <value>`.
    pub fn duplicate(field: &str, value: Value) -> Self {
        Self::new(ErrorType::Duplicate, field, Some(value), "")
    }

    /// `Too long: may not be more than <max> bytes`.
    pub fn too_long(field: &str, max: u64) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            ErrorType::TooLong,
            field,
            None,
            format!("may not be more than {max} {unit}"),
        )
    }

    /// `Too many: <actual>: must have at most <max> items`.
    pub fn too_many(field: &str, actual: usize, max: u64) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self::new(
            ErrorType::TooMany,
            field,
            Some(json!(actual)),
            format!("must have at most {max} {unit}"),
        )
    }

    /// A field error of any type.
    pub fn new(
        kind: ErrorType,
        field: &str,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.to_string(),
            value,
            detail: detail.into(),
        }
    }

    /// The message without the field (`ErrorBody`): `Invalid value: 0: spec.weight in body
    /// should be greater than or equal to 1`.
    pub fn body(&self) -> String {
        let mut s = match (&self.kind, &self.value) {
            (
                ErrorType::Invalid
                | ErrorType::TypeInvalid
                | ErrorType::NotSupported
                | ErrorType::TooMany
                | ErrorType::Duplicate,
                Some(v),
            ) => format!("{}: {}", self.kind.words(), go_value(v)),
            _ => self.kind.words().to_string(),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// Whether this error keeps the CEL rules from running (apiextensions-apiserver
    /// `hasBlockingErr`: the value is not of the schema's shape).
    pub fn blocks_rules(&self) -> bool {
        matches!(
            self.kind,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// A string as Go's `%q` prints it.
fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// A value as `field.Error` prints it: numbers and booleans plainly, strings quoted, anything
/// else as JSON.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        other => other.to_string(),
    }
}

/// The error a refused write answers with: `422 Invalid`, the message naming every field (one:
/// `... is invalid: <error>`; several: `... is invalid: [<error>, <error>]`), one cause each.
pub fn refusal(kind: &KindInfo, name: &str, errors: &[FieldError]) -> ApiError {
    let qualified = if kind.group.is_empty() {
        kind.kind.clone()
    } else {
        format!("{}.{}", kind.kind, kind.group)
    };
    let mut seen = Vec::new();
    for e in errors {
        let text = e.to_string();
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    let aggregate = match seen.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.field}))
        .collect();
    let mut details = json!({"name": name, "kind": kind.kind, "causes": causes});
    if !kind.group.is_empty() {
        details["group"] = json!(kind.group);
    }
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("{qualified} {} is invalid: {aggregate}", quote(name)),
        details: Some(details),
    }
}

/// Prunes, defaults and validates a write of `obj` (`old`: the stored object on updates) as
/// the API server does, for the part of the object the write may change: `Status` writes only
/// `status`, `Main` writes all but `status` when the kind has a status subresource. `crd`: the
/// kind's CustomResourceDefinition when it is a custom resource.
///
/// # Errors
/// 422 Invalid naming every field at fault; 400 for a Pod quantity that does not parse.
pub(crate) fn admit(
    kind: &KindInfo,
    name: &str,
    obj: &mut Value,
    old: Option<&Value>,
    sub: Subresource,
    crd: Option<&Value>,
) -> Result<()> {
    let errors = if let Some(crd) = crd {
        custom_resource(kind, crd, obj, old, sub)
    } else if kind.group.is_empty() && kind.resource == "pods" && sub != Subresource::Status {
        pod::validate(obj, old)?
    } else {
        Vec::new()
    };
    if errors.is_empty() {
        Ok(())
    } else {
        Err(refusal(kind, name, &errors))
    }
}

fn custom_resource(
    kind: &KindInfo,
    crd: &Value,
    obj: &mut Value,
    old: Option<&Value>,
    sub: Subresource,
) -> Vec<FieldError> {
    let Some(version) = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == kind.version.as_str())
    else {
        return Vec::new();
    };
    let schema = &version["schema"]["openAPIV3Schema"];
    if !schema.is_object() {
        return Vec::new();
    }
    let key = format!(
        "{}/{}/{}",
        crd["metadata"]["name"].as_str().unwrap_or(""),
        crd["metadata"]["resourceVersion"].as_str().unwrap_or(""),
        kind.version
    );
    if sub == Subresource::Status {
        // Only `status` changes: its schema and the rules under it.
        let status_schema = &schema["properties"]["status"];
        if !status_schema.is_object() || obj.get("status").is_none_or(Value::is_null) {
            return Vec::new();
        }
        structural::prune_and_default(status_schema, &mut obj["status"], false);
        let old_status = old.and_then(|o| o.get("status"));
        let mut errors =
            structural::validate(status_schema, &obj["status"], old_status, "status", false);
        if cel::has_rules(status_schema) && !errors.iter().any(FieldError::blocks_rules) {
            let found = cel::errors(
                &format!("{key}/status"),
                status_schema,
                &obj["status"],
                old_status,
            );
            errors.extend(found.into_iter().map(|mut e| {
                e.field = if e.field == "<nil>" {
                    "status".to_string()
                } else {
                    format!("status.{}", e.field)
                };
                e
            }));
        }
        return errors;
    }
    // What the write may change: all but `metadata` (checked by the store), and all but
    // `status` when the kind has a status subresource (the stored status is kept).
    let judged = |o: &Value| {
        let mut o = o.clone();
        if let Some(m) = o.as_object_mut() {
            m.remove("metadata");
            if sub == Subresource::Main && kind.status_subresource {
                m.remove("status");
            }
        }
        o
    };
    if let Some(old) = old
        && judged(obj) == judged(old)
    {
        // A metadata-only write (labels, finalizers): nothing the schema judges changed, and
        // an object stored as a newer schema wrote it keeps its fields.
        return Vec::new();
    }
    let status = (sub == Subresource::Main && kind.status_subresource)
        .then(|| obj.as_object_mut().and_then(|m| m.remove("status")))
        .flatten();
    structural::prune_and_default(schema, obj, true);
    let old_view = old.map(judged);
    let mut errors = structural::validate(schema, obj, old_view.as_ref(), "", true);
    if cel::has_rules(schema) {
        if errors.iter().any(FieldError::blocks_rules) {
            errors.push(FieldError::invalid(
                "<nil>",
                Value::Null,
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            errors.extend(cel::errors(&key, schema, obj, old_view.as_ref()));
        }
    }
    if let (Some(s), Some(m)) = (status, obj.as_object_mut()) {
        m.insert("status".into(), s);
    }
    errors
}

/// The value at a field path in the API's style (`spec.items[2].name`), when there is one.
pub(crate) fn at_path<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = root;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            cur = cur.get(key)?;
        }
        for idx in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            cur = cur.get(idx.parse::<usize>().ok()?)?;
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools() -> KindInfo {
        KindInfo {
            group: "karpenter.sh".into(),
            version: "v1".into(),
            resource: "nodepools".into(),
            singular: "nodepool".into(),
            kind: "NodePool".into(),
            namespaced: false,
            status_subresource: true,
            short_names: vec![],
        }
    }

    #[test]
    fn errors_print_as_apimachinery_prints_them() {
        let e = FieldError::invalid(
            "spec.weight",
            json!(0),
            "spec.weight in body should be greater than or equal to 1",
        );
        assert_eq!(
            e.to_string(),
            "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"
        );
        let e = FieldError::not_supported(
            "spec.disruption.consolidationPolicy",
            json!("Sometimes"),
            &["WhenEmpty".into(), "WhenEmptyOrUnderutilized".into()],
        );
        assert_eq!(
            e.body(),
            r#"Unsupported value: "Sometimes": supported values: "WhenEmpty", "WhenEmptyOrUnderutilized""#
        );
        assert_eq!(
            FieldError::required("spec.template.spec.nodeClassRef", "").body(),
            "Required value"
        );
        assert_eq!(
            FieldError::too_long("metadata.labels", 63).body(),
            "Too long: may not be more than 63 bytes"
        );
        assert_eq!(
            FieldError::too_many("spec.x", 101, 100).body(),
            "Too many: 101: must have at most 100 items"
        );
    }

    #[test]
    fn a_refusal_is_a_422_status_with_one_cause_per_field() {
        let one = refusal(
            &pools(),
            "p",
            &[FieldError::required("spec.template.spec.nodeClassRef", "")],
        );
        assert_eq!(one.code, 422);
        assert_eq!(
            one.message,
            r#"NodePool.karpenter.sh "p" is invalid: spec.template.spec.nodeClassRef: Required value"#
        );
        let status = one.to_status();
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["details"]["group"], "karpenter.sh");
        assert_eq!(
            status["details"]["causes"][0],
            json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template.spec.nodeClassRef"})
        );
        let two = refusal(
            &pools(),
            "p",
            &[
                FieldError::required("spec.a", ""),
                FieldError::forbidden("spec.b", "no"),
            ],
        );
        assert_eq!(
            two.message,
            r#"NodePool.karpenter.sh "p" is invalid: [spec.a: Required value, spec.b: Forbidden: no]"#
        );
    }

    #[test]
    fn paths_find_values() {
        let v = json!({"spec": {"items": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(at_path(&v, "spec.items[1].name"), Some(&json!("b")));
        assert_eq!(at_path(&v, "spec.items[2].name"), None);
        assert_eq!(at_path(&v, ""), Some(&v));
    }
}
