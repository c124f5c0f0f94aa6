//! Core validation of Pods: a documented subset of what the API server checks
//! (kubernetes `pkg/apis/core/validation/validation.go`), with its messages:
//!
//! - `ValidateResourceRequirements` / `ValidateResourceQuantityValue` /
//!   `validateContainerResourceName`, for the requests and limits of containers, init
//!   containers and `spec.overhead`: every quantity parses (else 400, as decoding fails) and
//!   is not negative ("must be greater than or equal to 0"); a resource name is a standard
//!   container resource (`cpu`, `memory`, `ephemeral-storage`, `hugepages-*`) or an extended
//!   one (`example.com/gpu`, "must be a standard resource for containers"); integer resources
//!   (`pods`, extended resources) are whole ("must be an integer"); a request is at most its
//!   limit ("must be less than or equal to cpu limit of 1"), and extended resources and
//!   hugepages, which cannot be overcommitted, request exactly their limit and must have one;
//! - `validateContainers` / `validateInitContainers`: container names are required, DNS
//!   labels and unique across containers and init containers;
//! - `validateContainerPorts` / `AccumulateUniqueHostPorts`: `containerPort` and a non-zero
//!   `hostPort` are in 1–65535, the protocol is TCP, UDP or SCTP, and no two containers take the
//!   same host port and protocol;
//! - `validateRestartPolicy` and `validateTolerations` (operator `Exists` or `Equal`; `Exists`
//!   with an empty value; a known effect);
//! - `metadata.labels` (`ValidateLabels`: qualified-name keys, values of at most 63
//!   characters).
//!
//! Not checked (the simulator's clients do not depend on them): images, volumes, probes,
//! security contexts, affinity terms, and the immutability of a Pod's spec on update. On
//! updates, a container, port or list unchanged from the stored Pod is not checked again.

use serde_json::{Value, json};

use super::FieldError;
use crate::api::error::{ApiError, Result as ApiResult};
use crate::resources::parse_milli;

const QUANTITY_REGEX: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// The Pod's errors; `Err` for a quantity that does not parse (the API server cannot decode
/// such a Pod: 400 BadRequest).
pub fn validate(pod: &Value, old: Option<&Value>) -> ApiResult<Vec<FieldError>> {
    let mut errors = Vec::new();
    let spec = &pod["spec"];
    let old_spec = old.map(|o| &o["spec"]);
    labels(
        &pod["metadata"]["labels"],
        old.map(|o| &o["metadata"]["labels"]),
        "metadata.labels",
        &mut errors,
    );
    let mut names: Vec<String> = Vec::new();
    let mut host_ports: Vec<String> = Vec::new();
    for list in ["initContainers", "containers"] {
        let olds = old_spec.and_then(|s| s[list].as_array());
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let path = format!("spec.{list}[{i}]");
            let name = c["name"].as_str().unwrap_or("");
            let unchanged = olds.and_then(|o| o.get(i)) == Some(c);
            if !unchanged {
                container(c, &path, &mut errors)?;
            }
            if name.is_empty() {
                if !unchanged {
                    errors.push(FieldError::required(&format!("{path}.name"), ""));
                }
            } else if names.iter().any(|n| n == name) {
                errors.push(FieldError::duplicate(&format!("{path}.name"), json!(name)));
            } else {
                names.push(name.to_string());
            }
            for (j, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
                let Some(hp) = p["hostPort"].as_i64().filter(|h| *h != 0) else {
                    continue;
                };
                let key = format!("{}/{hp}", p["protocol"].as_str().unwrap_or("TCP"));
                if host_ports.contains(&key) && !unchanged {
                    errors.push(FieldError::duplicate(
                        &format!("{path}.ports[{j}].hostPort"),
                        json!(key),
                    ));
                }
                host_ports.push(key);
            }
        }
    }
    if spec["containers"].as_array().is_none_or(|c| c.is_empty()) {
        errors.push(FieldError::required("spec.containers", ""));
    }
    if old_spec.map(|s| &s["overhead"]) != Some(&spec["overhead"]) {
        quantities(&spec["overhead"], "spec.overhead", true, &mut errors)?;
    }
    if let Some(p) = spec["restartPolicy"].as_str()
        && !matches!(p, "Always" | "OnFailure" | "Never")
        && old_spec.map(|s| &s["restartPolicy"]) != Some(&spec["restartPolicy"])
    {
        errors.push(FieldError::not_supported(
            "spec.restartPolicy",
            json!(p),
            &["Always".into(), "Never".into(), "OnFailure".into()],
        ));
    }
    if old_spec.map(|s| &s["tolerations"]) != Some(&spec["tolerations"]) {
        tolerations(&spec["tolerations"], &mut errors);
    }
    Ok(errors)
}

fn container(c: &Value, path: &str, errors: &mut Vec<FieldError>) -> ApiResult<()> {
    if let Some(name) = c["name"].as_str()
        && !name.is_empty()
        && let Some(why) = dns_label(name)
    {
        errors.push(FieldError::invalid(
            &format!("{path}.name"),
            json!(name),
            why,
        ));
    }
    let res = &c["resources"];
    let lim_path = format!("{path}.resources.limits");
    let req_path = format!("{path}.resources.requests");
    let limits = quantities(&res["limits"], &lim_path, false, errors)?;
    let requests = quantities(&res["requests"], &req_path, false, errors)?;
    for (name, text, milli) in &requests {
        let limit = limits.iter().find(|(n, _, _)| n == name);
        let overcommit = overcommit_allowed(name);
        match limit {
            Some((_, ltext, lmilli)) if !overcommit && milli != lmilli => {
                errors.push(FieldError::invalid(
                    &req_path,
                    json!(text),
                    format!("must be equal to {name} limit of {ltext}"),
                ));
            }
            Some((_, ltext, lmilli)) if milli > lmilli => {
                errors.push(FieldError::invalid(
                    &req_path,
                    json!(text),
                    format!("must be less than or equal to {name} limit of {ltext}"),
                ));
            }
            None if !overcommit => {
                errors.push(FieldError::required(
                    &lim_path,
                    "Limit must be set for non overcommitable resources",
                ));
            }
            _ => {}
        }
    }
    for (j, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
        let pp = format!("{path}.ports[{j}]");
        let range = "must be between 1 and 65535, inclusive";
        match p.get("containerPort") {
            None | Some(Value::Null) => {
                errors.push(FieldError::required(&format!("{pp}.containerPort"), ""));
            }
            Some(v) if !v.as_i64().is_some_and(|n| (1..=65535).contains(&n)) => {
                errors.push(FieldError::invalid(
                    &format!("{pp}.containerPort"),
                    v.clone(),
                    range,
                ));
            }
            _ => {}
        }
        if let Some(v) = p
            .get("hostPort")
            .filter(|v| !v.is_null() && v.as_i64() != Some(0))
            && !v.as_i64().is_some_and(|n| (1..=65535).contains(&n))
        {
            errors.push(FieldError::invalid(
                &format!("{pp}.hostPort"),
                v.clone(),
                range,
            ));
        }
        if let Some(proto) = p["protocol"].as_str()
            && !matches!(proto, "TCP" | "UDP" | "SCTP")
        {
            errors.push(FieldError::not_supported(
                &format!("{pp}.protocol"),
                json!(proto),
                &["SCTP".into(), "TCP".into(), "UDP".into()],
            ));
        }
    }
    Ok(())
}

/// The resource list's `(name, text, milli-units)`, with the errors of each entry.
/// `overhead`: `spec.overhead` (any resource name; no integer rule).
fn quantities(
    list: &Value,
    path: &str,
    overhead: bool,
    errors: &mut Vec<FieldError>,
) -> ApiResult<Vec<(String, String, i128)>> {
    let mut out = Vec::new();
    for (name, q) in list.as_object().into_iter().flatten() {
        let fp = format!("{path}.{name}");
        let text = match q {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(ApiError::bad_request(format!(
                    "Pod in version \"v1\" cannot be handled as a Pod: {fp}: quantities must be strings or numbers, not {other}"
                )));
            }
        };
        let Some(milli) = parse_milli(&text) else {
            return Err(ApiError::bad_request(format!(
                "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '{QUANTITY_REGEX}' ({fp}: {text:?})"
            )));
        };
        if !overhead && let Some(why) = resource_name(name) {
            errors.push(FieldError::invalid(&fp, json!(name), why));
        }
        if milli < 0 {
            errors.push(FieldError::invalid(
                &fp,
                json!(text),
                "must be greater than or equal to 0",
            ));
        } else if !overhead && integer_resource(name) && milli % 1000 != 0 {
            errors.push(FieldError::invalid(&fp, json!(text), "must be an integer"));
        }
        out.push((name.clone(), text, milli));
    }
    Ok(out)
}

fn standard(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// kubernetes `IsExtendedResourceName`: outside the `kubernetes.io` domain, with a domain.
fn extended(name: &str) -> bool {
    name.contains('/')
        && !name.contains("kubernetes.io/")
        && !name.starts_with("requests.")
        && qualified_name(name).is_none()
}

fn overcommit_allowed(name: &str) -> bool {
    !extended(name) && !name.starts_with("hugepages-")
}

fn integer_resource(name: &str) -> bool {
    extended(name) || name == "pods"
}

fn resource_name(name: &str) -> Option<String> {
    if let Some(why) = qualified_name(name) {
        return Some(why);
    }
    (!standard(name) && !extended(name))
        .then(|| "must be a standard resource for containers".to_string())
}

/// `IsDNS1123Label`'s message, or `None` when `s` is one.
fn dns_label(s: &str) -> Option<String> {
    let ok = s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()
    })
}

fn name_part_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// `IsQualifiedName`'s message (`[prefix/]name`), or `None` when `s` is one.
fn qualified_name(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && l.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && l.ends_with(|c: char| c.is_ascii_alphanumeric())
            })
    });
    (!prefix_ok || !name_part_ok(name)).then(|| {
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string()
    })
}

fn labels(labels: &Value, old: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    if old == Some(labels) {
        return;
    }
    for (k, v) in labels.as_object().into_iter().flatten() {
        if let Some(why) = qualified_name(k) {
            errors.push(FieldError::invalid(path, json!(k), why));
        }
        let value = v.as_str().unwrap_or("");
        if !value.is_empty() && !name_part_ok(value) {
            errors.push(FieldError::invalid(
                path,
                json!(value),
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ));
        }
    }
}

fn tolerations(list: &Value, errors: &mut Vec<FieldError>) {
    for (i, t) in list.as_array().into_iter().flatten().enumerate() {
        let path = format!("spec.tolerations[{i}]");
        let op = t["operator"].as_str().unwrap_or("Equal");
        match op {
            "Exists" => {
                if t["value"].as_str().is_some_and(|v| !v.is_empty()) {
                    errors.push(FieldError::invalid(
                        &format!("{path}.operator"),
                        t["value"].clone(),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            "Equal" | "" => {
                if t["key"].as_str().unwrap_or("").is_empty() {
                    errors.push(FieldError::invalid(
                        &format!("{path}.operator"),
                        json!(op),
                        "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                    ));
                }
            }
            other => errors.push(FieldError::not_supported(
                &format!("{path}.operator"),
                json!(other),
                &["Equal".into(), "Exists".into()],
            )),
        }
        if let Some(e) = t["effect"].as_str()
            && !matches!(e, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            errors.push(FieldError::not_supported(
                &format!("{path}.effect"),
                json!(e),
                &[
                    "NoExecute".into(),
                    "NoSchedule".into(),
                    "PreferNoSchedule".into(),
                ],
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(container: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [container]}})
    }

    fn messages(p: &Value) -> Vec<String> {
        validate(p, None)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn quantities_are_non_negative_and_requests_within_limits() {
        let p = pod(json!({"name": "a", "resources": {"requests": {"cpu": "-2"}}}));
        assert_eq!(
            messages(&p),
            vec![
                r#"spec.containers[0].resources.requests.cpu: Invalid value: "-2": must be greater than or equal to 0"#
            ]
        );
        let p = pod(
            json!({"name": "a", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
        );
        assert_eq!(
            messages(&p),
            vec![
                r#"spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1"#
            ]
        );
        let p = pod(json!({"name": "a", "resources": {"requests": {"example.com/gpu": "1"}}}));
        assert_eq!(
            messages(&p),
            vec![
                "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
            ]
        );
        let p = pod(json!({"name": "a", "resources": {"requests": {"gpu": "1"}}}));
        assert_eq!(
            messages(&p),
            vec![
                r#"spec.containers[0].resources.requests.gpu: Invalid value: "gpu": must be a standard resource for containers"#
            ]
        );
        let p = pod(json!({"name": "a", "resources": {"requests": {"cpu": "lots"}}}));
        let e = validate(&p, None).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("requests.cpu"), "{}", e.message);
        let ok =
            pod(json!({"name": "a", "resources": {"requests": {"cpu": "4Ei", "memory": "4Ei"}}}));
        assert!(messages(&ok).is_empty());
    }

    #[test]
    fn names_ports_and_tolerations() {
        let p = json!({"metadata": {"labels": {"a": "x".repeat(64)}}, "spec": {
            "containers": [
                {"name": "a", "ports": [{"containerPort": 80, "hostPort": 70000}]},
                {"name": "a", "ports": [{"containerPort": 0}]},
            ],
            "tolerations": [{"operator": "Exists", "value": "x"}, {"key": "k", "effect": "Never"}],
            "restartPolicy": "Sometimes",
        }});
        let m = messages(&p);
        for want in [
            "spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            r#"spec.containers[1].name: Duplicate value: "a""#,
            "spec.containers[1].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive",
            r#"spec.tolerations[0].operator: Invalid value: "x": value must be empty when `operator` is 'Exists'"#,
            r#"spec.tolerations[1].effect: Unsupported value: "Never": supported values: "NoExecute", "NoSchedule", "PreferNoSchedule""#,
            r#"spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure""#,
        ] {
            assert!(m.iter().any(|e| e == want), "{want} not in {m:#?}");
        }
        assert!(
            m.iter()
                .any(|e| e.starts_with("metadata.labels: Invalid value: \"xxxx")),
            "{m:#?}"
        );
        assert_eq!(m.len(), 7, "{m:#?}");
    }

    #[test]
    fn unchanged_containers_are_not_checked_again() {
        let old = pod(json!({"name": "a", "resources": {"requests": {"cpu": "-2"}}}));
        let mut new = old.clone();
        new["spec"]["nodeName"] = json!("n1");
        assert!(validate(&new, Some(&old)).unwrap().is_empty());
    }
}
