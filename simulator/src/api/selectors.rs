//! Label selectors (`labelSelector=app=web,tier in (a,b),!legacy`) and field selectors
//! (`fieldSelector=spec.nodeName=n1,status.phase!=Succeeded`) over stored JSON objects.

use serde_json::Value;

use super::error::{ApiError, Result};

/// One parsed label selector requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

// === impl LabelSelector ===

impl LabelSelector {
    /// Parses the query-string form.
    ///
    /// # Errors
    /// 400 naming the selector when it cannot be parsed.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |why: &str| {
            ApiError::bad_request(format!("unable to parse labelSelector {s:?}: {why}"))
        };
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            if let Some(k) = part.strip_prefix('!') {
                reqs.push(LabelReq::NotExists(
                    check_key(k.trim()).map_err(|e| bad(&e))?,
                ));
            } else if let Some((k, rest)) = split_set_op(part, " notin ") {
                reqs.push(LabelReq::NotIn(
                    check_key(k).map_err(|e| bad(&e))?,
                    parse_set(rest).map_err(|e| bad(&e))?,
                ));
            } else if let Some((k, rest)) = split_set_op(part, " in ") {
                reqs.push(LabelReq::In(
                    check_key(k).map_err(|e| bad(&e))?,
                    parse_set(rest).map_err(|e| bad(&e))?,
                ));
            } else if let Some((k, v)) = part.split_once("!=") {
                reqs.push(LabelReq::NotEq(
                    check_key(k.trim()).map_err(|e| bad(&e))?,
                    v.trim().into(),
                ));
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                reqs.push(LabelReq::Eq(
                    check_key(k.trim()).map_err(|e| bad(&e))?,
                    v.trim().into(),
                ));
            } else {
                reqs.push(LabelReq::Exists(check_key(part).map_err(|e| bad(&e))?));
            }
        }
        Ok(Self(reqs))
    }

    /// True when the object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn split_set_op<'a>(part: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let i = part.find(op)?;
    Some((part[..i].trim(), part[i + op.len()..].trim()))
}

fn parse_set(s: &str) -> std::result::Result<Vec<String>, String> {
    let inner = s
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, got {s:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn check_key(k: &str) -> std::result::Result<String, String> {
    let ok = !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?}"))
    }
}

/// A parsed field selector: `path=value` / `path!=value` terms over dotted JSON paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

// === impl FieldSelector ===

impl FieldSelector {
    /// Parses the query-string form. Any dotted path is accepted (`spec.nodeName`,
    /// `status.phase`, `metadata.name`, `metadata.namespace`, `involvedObject.name`, ...).
    ///
    /// # Errors
    /// 400 naming the selector when a term has no operator or an empty path.
    pub fn parse(s: &str) -> Result<Self> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, eq, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid fieldSelector {s:?}: term {part:?} has no operator"
                )));
            };
            let path = path.trim();
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(ApiError::bad_request(format!(
                    "invalid fieldSelector {s:?}: bad field path {path:?}"
                )));
            }
            terms.push((path.to_string(), eq, value.trim().to_string()));
        }
        Ok(Self(terms))
    }

    /// True when every term holds. A missing field compares as the empty string, as the API
    /// server does for `spec.nodeName=` (unbound pods).
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut v = obj;
            for seg in path.split('.') {
                v = &v[seg];
            }
            let got = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => String::new(),
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "default", "labels": {"app": "web", "tier": "fe"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selector_forms() {
        let p = pod();
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web,tier=fe", true),
            ("app!=web", false),
            ("tier in (fe, be)", true),
            ("tier notin (fe)", false),
            ("app", true),
            ("!app", false),
            ("!missing,app in (web)", true),
            ("missing notin (x)", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&p),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn label_selector_rejects_garbage_naming_it() {
        let e = LabelSelector::parse("tier in fe").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("tier in fe"), "{}", e.message);
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn field_selector_forms() {
        let p = pod();
        let unbound = json!({"metadata": {"name": "q"}, "spec": {}});
        let fs = |s: &str| FieldSelector::parse(s).unwrap();
        assert!(fs("spec.nodeName=n1").matches(&p));
        assert!(!fs("spec.nodeName=n2").matches(&p));
        assert!(fs("spec.nodeName=").matches(&unbound));
        assert!(!fs("spec.nodeName=").matches(&p));
        assert!(fs("status.phase!=Succeeded,status.phase!=Failed").matches(&p));
        assert!(fs("metadata.name=p,metadata.namespace=default").matches(&p));
        assert!(FieldSelector::parse("spec.nodeName").is_err());
        assert!(FieldSelector::parse("spec..x=1").is_err());
    }
}
