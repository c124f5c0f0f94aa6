//! The selector forms kube-scheduler evaluates: node selector requirements (`nodeSelector`,
//! required node affinity) and label selectors (pod anti-affinity terms, namespace selectors).
//!
//! Written from the Kubernetes API reference ("NodeSelectorRequirement", "LabelSelector") and
//! "Assigning Pods to Nodes § Node affinity".

use std::collections::BTreeMap;

use serde_json::Value;

/// Labels of an object.
pub(crate) type Labels = BTreeMap<String, String>;

/// `metadata.labels` of an object.
pub(crate) fn labels_of(o: &Value) -> Labels {
    o["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// One `NodeSelectorRequirement` against a value (`None`: the label or field is absent).
/// `Gt`/`Lt` need the value and the single operand to be integers.
pub(crate) fn node_requirement_matches(req: &Value, value: Option<&str>) -> bool {
    let values = strings(&req["values"]);
    match req["operator"].as_str().unwrap_or("") {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(v), [operand]) = (value, values.as_slice()) else {
                return false;
            };
            match (v.parse::<i64>(), operand.parse::<i64>()) {
                (Ok(v), Ok(o)) if op == "Gt" => v > o,
                (Ok(v), Ok(o)) => v < o,
                _ => false,
            }
        }
        _ => false,
    }
}

/// One `NodeSelectorTerm`: all its `matchExpressions` (on labels) and `matchFields` (on
/// `metadata.name`, the only field supported) hold. A term with neither matches no node.
pub(crate) fn node_term_matches(term: &Value, name: &str, labels: &Labels) -> bool {
    let exprs = term["matchExpressions"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let fields = term["matchFields"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs.iter().all(|r| {
        let key = r["key"].as_str().unwrap_or("");
        node_requirement_matches(r, labels.get(key).map(String::as_str))
    }) && fields.iter().all(|r| {
        let value = (r["key"] == "metadata.name").then_some(name);
        node_requirement_matches(r, value)
    })
}

/// A `LabelSelector` (`matchLabels` and `matchExpressions` with `In`, `NotIn`, `Exists`,
/// `DoesNotExist`). An empty selector matches everything; a null one matches nothing.
pub(crate) fn label_selector_matches(selector: &Value, labels: &Labels) -> bool {
    if selector.is_null() {
        return false;
    }
    let match_labels = selector["matchLabels"].as_object().into_iter().flatten();
    for (k, v) in match_labels {
        if labels.get(k).map(String::as_str) != v.as_str() {
            return false;
        }
    }
    selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|r| {
            let value = labels
                .get(r["key"].as_str().unwrap_or(""))
                .map(String::as_str);
            match r["operator"].as_str() {
                Some("In" | "NotIn" | "Exists" | "DoesNotExist") => {
                    node_requirement_matches(r, value)
                }
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn node_selector_operators() {
        // "Assigning Pods to Nodes § Node affinity": In, NotIn, Exists, DoesNotExist, Gt, Lt;
        // NotIn and DoesNotExist hold when the label is absent; Gt/Lt compare integers.
        let r = |op: &str, values: &[&str]| json!({"key": "k", "operator": op, "values": values});
        assert!(node_requirement_matches(&r("In", &["a", "b"]), Some("b")));
        assert!(!node_requirement_matches(&r("In", &["a"]), None));
        assert!(node_requirement_matches(&r("NotIn", &["a"]), None));
        assert!(!node_requirement_matches(&r("NotIn", &["a"]), Some("a")));
        assert!(node_requirement_matches(&r("Exists", &[]), Some("")));
        assert!(!node_requirement_matches(
            &r("DoesNotExist", &[]),
            Some("x")
        ));
        assert!(node_requirement_matches(&r("Gt", &["4"]), Some("8")));
        assert!(!node_requirement_matches(&r("Gt", &["8"]), Some("8")));
        assert!(node_requirement_matches(&r("Lt", &["8"]), Some("4")));
        assert!(!node_requirement_matches(&r("Lt", &["8"]), Some("x")));
        assert!(!node_requirement_matches(&r("Gt", &["1"]), None));
    }

    #[test]
    fn terms_and_their_expressions() {
        let l = labels(&[("zone", "a"), ("cpu", "8")]);
        let term = json!({"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]},
            {"key": "cpu", "operator": "Gt", "values": ["4"]},
        ]});
        assert!(node_term_matches(&term, "n1", &l), "expressions are ANDed");
        let term = json!({"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]},
            {"key": "cpu", "operator": "Gt", "values": ["16"]},
        ]});
        assert!(!node_term_matches(&term, "n1", &l));
        let fields =
            json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]});
        assert!(node_term_matches(&fields, "n1", &l));
        assert!(!node_term_matches(&fields, "n2", &l));
        assert!(
            !node_term_matches(&json!({}), "n1", &l),
            "an empty term matches nothing"
        );
    }

    #[test]
    fn label_selectors() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert!(label_selector_matches(&json!({}), &l), "empty matches all");
        assert!(
            !label_selector_matches(&Value::Null, &l),
            "null matches none"
        );
        assert!(label_selector_matches(
            &json!({"matchLabels": {"app": "web"}}),
            &l
        ));
        assert!(!label_selector_matches(
            &json!({"matchLabels": {"app": "db"}}),
            &l
        ));
        let e =
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["back"]}]});
        assert!(label_selector_matches(&e, &l));
        let e = json!({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]});
        assert!(
            !label_selector_matches(&e, &l),
            "Gt is not a label selector operator"
        );
    }
}
