//! The CEL selectors of DeviceClasses and device requests, in the subset dovetail evaluates:
//! a conjunction (`&&`, parentheses allowed) of
//!
//! - `device.driver == "name"` (or `!=`),
//! - `device.attributes["domain"].name == literal` (or `!=`; a string, an integer, `true` or
//!   `false`),
//! - `device.attributes["domain"].name` (a bool attribute that must be true),
//! - `"name" in device.attributes["domain"]`,
//! - `true`.
//!
//! Anything else is refused when the selector is read, naming the expression: Karpenter
//! evaluates full CEL (`k8s.io/dynamic-resource-allocation/cel`); a selector dovetail cannot
//! evaluate is never guessed. As in CEL, an attribute a device lacks makes the selector not
//! match (Karpenter's `DeviceMatchesSelectors` treats the evaluation error as no match).

use std::collections::BTreeMap;

/// A compiled selector: atoms that must all hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selector {
    atoms: Vec<Atom>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Atom {
    True,
    Driver {
        equal: bool,
        value: String,
    },
    Attribute {
        key: String,
        equal: bool,
        value: String,
    },
    Has {
        key: String,
    },
}

impl Selector {
    /// Compiles `expr`, or `None` when it is outside the subset.
    pub(crate) fn compile(expr: &str) -> Option<Self> {
        let mut atoms = Vec::new();
        for part in split_and(strip_parens(expr.trim()))? {
            atoms.push(atom(strip_parens(part.trim()))?);
        }
        Some(Self { atoms })
    }

    /// True when a device of `driver` with `attributes` (qualified names, literal values)
    /// matches.
    pub(crate) fn matches(&self, driver: &str, attributes: &BTreeMap<String, String>) -> bool {
        self.atoms.iter().all(|a| match a {
            Atom::True => true,
            Atom::Driver { equal, value } => (driver == value) == *equal,
            Atom::Attribute { key, equal, value } => match attributes.get(key) {
                Some(v) => (v == value) == *equal,
                None => false,
            },
            Atom::Has { key } => attributes.contains_key(key),
        })
    }
}

/// Removes parentheses that enclose the whole expression.
fn strip_parens(mut s: &str) -> &str {
    loop {
        let t = s.trim();
        if t.starts_with('(') && t.ends_with(')') && closes_at_end(t) {
            s = &t[1..t.len() - 1];
        } else {
            return t;
        }
    }
}

/// True when the `(` at the start of `s` is closed by its last character.
fn closes_at_end(s: &str) -> bool {
    let mut depth = 0i32;
    let mut in_str = false;
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_str {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
        } else if c == b'(' {
            depth += 1;
        } else if c == b')' {
            depth -= 1;
            if depth == 0 && i != bytes.len() - 1 {
                return false;
            }
        }
        i += 1;
    }
    depth == 0
}

/// Splits on top-level `&&`; `None` when there is a top-level `||` or `!` negation of a group.
fn split_and(s: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let (mut depth, mut in_str, mut start, mut i) = (0i32, false, 0usize, 0usize);
    while i < bytes.len() {
        let c = bytes[i];
        if in_str {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_str = false;
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'&' if depth == 0 && bytes.get(i + 1) == Some(&b'&') => {
                    out.push(&s[start..i]);
                    start = i + 2;
                    i += 1;
                }
                b'|' if depth == 0 => return None,
                _ => {}
            }
        }
        i += 1;
    }
    out.push(&s[start..]);
    Some(out)
}

fn atom(s: &str) -> Option<Atom> {
    if s == "true" {
        return Some(Atom::True);
    }
    if let Some((name, rest)) = s.split_once(" in ").filter(|_| s.starts_with('"')) {
        let name = string_literal(name.trim())?;
        let domain = attributes_domain(rest.trim())?;
        return Some(Atom::Has {
            key: qualify(&domain, &name),
        });
    }
    let (lhs, equal, rhs) = if let Some((l, r)) = s.split_once("==") {
        (l.trim(), true, Some(r.trim()))
    } else if let Some((l, r)) = s.split_once("!=") {
        (l.trim(), false, Some(r.trim()))
    } else {
        (s, true, None)
    };
    if lhs == "device.driver" {
        let value = string_literal(rhs?)?;
        return Some(Atom::Driver { equal, value });
    }
    let key = attribute_key(lhs)?;
    let value = match rhs {
        Some(r) => literal(r)?,
        None => "true".to_string(),
    };
    Some(Atom::Attribute { key, equal, value })
}

/// `device.attributes["domain"].name` → `domain/name`.
fn attribute_key(s: &str) -> Option<String> {
    let rest = s.strip_prefix("device.attributes[")?;
    let close = rest.find(']')?;
    let domain = string_literal(rest[..close].trim())?;
    let name = rest[close + 1..].strip_prefix('.')?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some(qualify(&domain, name))
}

/// `device.attributes["domain"]` → `domain`.
fn attributes_domain(s: &str) -> Option<String> {
    let rest = s.strip_prefix("device.attributes[")?.strip_suffix(']')?;
    string_literal(rest.trim())
}

fn qualify(domain: &str, name: &str) -> String {
    format!("{domain}/{name}")
}

/// A CEL string literal's value (double quotes, no escapes other than `\"` and `\\`).
fn string_literal(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().filter(|c| *c == '"' || *c == '\\')?),
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// A literal as the attribute map spells it: a JSON string, digits, `true`/`false`.
fn literal(s: &str) -> Option<String> {
    if let Some(v) = string_literal(s) {
        return serde_json::to_string(&v).ok();
    }
    if s == "true" || s == "false" {
        return Some(s.to_string());
    }
    s.parse::<i64>().ok().map(|n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn the_subset_compiles_and_matches() {
        let a = attrs(&[
            ("gpu.example.com/model", "\"a100\""),
            ("gpu.example.com/memory", "80"),
            ("gpu.example.com/mig", "true"),
        ]);
        let yes = [
            "device.driver == \"gpu.example.com\"",
            "device.driver == \"gpu.example.com\" && device.attributes[\"gpu.example.com\"].model == \"a100\"",
            "(device.attributes[\"gpu.example.com\"].memory == 80)",
            "device.attributes[\"gpu.example.com\"].mig",
            "\"model\" in device.attributes[\"gpu.example.com\"]",
            "device.attributes[\"gpu.example.com\"].model != \"t4\"",
            "true",
        ];
        for e in yes {
            let s = Selector::compile(e).unwrap_or_else(|| panic!("{e} compiles"));
            assert!(s.matches("gpu.example.com", &a), "{e} matches");
        }
        let no = [
            "device.driver == \"nic.example.com\"",
            "device.attributes[\"gpu.example.com\"].model == \"t4\"",
            "device.attributes[\"gpu.example.com\"].missing == 1",
        ];
        for e in no {
            let s = Selector::compile(e).unwrap_or_else(|| panic!("{e} compiles"));
            assert!(!s.matches("gpu.example.com", &a), "{e} does not match");
        }
    }

    #[test]
    fn outside_the_subset_is_refused() {
        for e in [
            "device.driver == \"a\" || device.driver == \"b\"",
            "device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"1Gi\")) >= 0",
            "device.attributes[\"x\"].v.startsWith(\"a\")",
            "",
        ] {
            assert_eq!(Selector::compile(e), None, "{e}");
        }
    }
}
