//! The subset of Kubernetes JSONPath that CRD printer columns use: fields (`.a.b`, with `\.`
//! escaping a dot inside a name, and `['a.b']`), indexes (`[0]`), wildcards (`[*]`) and
//! equality filters (`[?(@.type=="Ready")]`).

use serde_json::Value;

/// Errors parsing a JSONPath.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The path does not parse.
    #[error("invalid JSONPath {path:?}: {why}")]
    Invalid {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Clone, Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// Keep elements whose value at the relative field path equals the literal.
    Filter(Vec<String>, Value),
}

/// A parsed JSONPath.
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    steps: Vec<Step>,
}

// === impl Path ===

impl Path {
    /// Parses a path such as `.status.conditions[?(@.type=="Ready")].status`; a surrounding
    /// `{...}` template is accepted.
    ///
    /// # Errors
    /// [`Error::Invalid`] for syntax outside the supported subset.
    pub fn parse(path: &str) -> Result<Self> {
        let invalid = |why| Error::Invalid {
            path: path.to_string(),
            why,
        };
        let text = path.trim();
        let text = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(text);
        let text = text.strip_prefix('$').unwrap_or(text);
        let chars: Vec<char> = text.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    i += 1;
                    let (name, next) = field_name(&chars, i);
                    if name.is_empty() {
                        return Err(invalid("empty field name"));
                    }
                    steps.push(Step::Field(name));
                    i = next;
                }
                '[' => {
                    let close = find_close(&chars, i).ok_or_else(|| invalid("unclosed ["))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    steps.push(bracket(inner.trim()).ok_or_else(|| invalid("unsupported [...]"))?);
                    i = close + 1;
                }
                _ => return Err(invalid("expected . or [")),
            }
        }
        Ok(Self { steps })
    }

    /// The first value the path selects in `obj`, if any.
    pub fn first<'a>(&self, obj: &'a Value) -> Option<&'a Value> {
        let mut current = vec![obj];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in current {
                match step {
                    Step::Field(f) => next.extend(v.get(f.as_str())),
                    Step::Index(i) => next.extend(v.get(*i)),
                    Step::All => match v {
                        Value::Array(a) => next.extend(a.iter()),
                        Value::Object(m) => next.extend(m.values()),
                        _ => {}
                    },
                    Step::Filter(rel, want) => {
                        for item in v.as_array().into_iter().flatten() {
                            let got = rel.iter().try_fold(item, |x, f| x.get(f.as_str()));
                            if got == Some(want) {
                                next.push(item);
                            }
                        }
                    }
                }
            }
            current = next;
        }
        current.into_iter().next()
    }
}

/// A field name from `i`, ending at an unescaped `.` or `[`; `\.` is a literal dot.
fn field_name(chars: &[char], mut i: usize) -> (String, usize) {
    let mut name = String::new();
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                name.push(chars[i + 1]);
                i += 2;
            }
            '.' | '[' => break,
            c => {
                name.push(c);
                i += 1;
            }
        }
    }
    (name, i)
}

/// The index of the `]` closing the `[` at `open`, skipping quoted text.
fn find_close(chars: &[char], open: usize) -> Option<usize> {
    let mut quote = None;
    for (j, c) in chars.iter().enumerate().skip(open + 1) {
        match (quote, c) {
            (Some(q), c) if *c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(*c),
            (None, ']') => return Some(j),
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> Option<&str> {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')))
}

fn bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse::<usize>() {
        return Some(Step::Index(i));
    }
    if let Some(name) = unquote(inner) {
        return Some(Step::Field(name.to_string()));
    }
    let expr = inner.strip_prefix("?(")?.strip_suffix(')')?;
    let (lhs, rhs) = expr.split_once("==")?;
    let rel = lhs.trim().strip_prefix("@.")?;
    let rel: Vec<String> = rel.split('.').map(String::from).collect();
    let rhs = rhs.trim();
    let want = match unquote(rhs) {
        Some(s) => Value::String(s.to_string()),
        None => serde_json::from_str(rhs).ok()?,
    };
    Some(Step::Filter(rel, want))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn printer_column_paths_select_what_kubectl_selects() {
        let obj = json!({
            "metadata": {"labels": {"node.kubernetes.io/instance-type": "m5.large"}},
            "spec": {"weight": 10, "list": [{"a": 1}, {"a": 2}]},
            "status": {"conditions": [
                {"type": "Launched", "status": "True"},
                {"type": "Ready", "status": "False"},
            ]},
        });
        let get = |p: &str| Path::parse(p).unwrap().first(&obj).cloned();
        assert_eq!(
            get(r".metadata.labels.node\.kubernetes\.io/instance-type"),
            Some(json!("m5.large"))
        );
        assert_eq!(
            get(r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("False"))
        );
        assert_eq!(get(".spec.weight"), Some(json!(10)));
        assert_eq!(get(".spec.list[1].a"), Some(json!(2)));
        assert_eq!(get(".spec.list[*].a"), Some(json!(1)));
        assert_eq!(
            get("{.metadata.labels['node.kubernetes.io/instance-type']}"),
            Some(json!("m5.large"))
        );
        assert_eq!(get(".status.nodes"), None);
        assert_eq!(get(r#".status.conditions[?(@.type=="Gone")].status"#), None);
        assert!(Path::parse(".a[?(@.x > 1)]").is_err());
        assert!(Path::parse("a.b").is_err());
    }
}
