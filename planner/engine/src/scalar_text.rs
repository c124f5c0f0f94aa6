//! A YAML or JSON scalar read as text: catalog files write `cpu: 2` and `cpu: "2"` for the
//! same quantity. The serde visitor for it, used by the catalog file format (`catalog::file`),
//! which parses the text itself so that errors name the field.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, Visitor};

/// Deserializes a string or a number (and, when `bools`, a boolean) as its text; anything else
/// is an error that says the field expects `expecting`.
///
/// # Errors
/// When the value is not a scalar that this call accepts.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    d: D,
    expecting: &'static str,
    bools: bool,
) -> Result<String, D::Error> {
    d.deserialize_any(ScalarText { expecting, bools })
}

/// The visitor behind [`deserialize`].
struct ScalarText {
    expecting: &'static str,
    bools: bool,
}

// === impl ScalarText ===

impl Visitor<'_> for ScalarText {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        if v.is_finite() {
            Ok(v.to_string())
        } else {
            // YAML's unquoted `.inf` / `.nan`: never a quantity or a count.
            Err(E::custom(format!("{v} is not a finite number")))
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        if self.bools {
            Ok(v.to_string())
        } else {
            // What serde's default `visit_bool` does.
            Err(E::invalid_type(de::Unexpected::Bool(v), &self))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Quantity(String);

    impl<'de> serde::Deserialize<'de> for Quantity {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            deserialize(d, "a quantity", false).map(Quantity)
        }
    }

    #[derive(Debug)]
    struct Label(String);

    impl<'de> serde::Deserialize<'de> for Label {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            deserialize(d, "a label value", true).map(Label)
        }
    }

    #[test]
    fn numbers_and_strings_read_as_their_text() {
        for (yaml, text) in [
            ("2", "2"),
            ("\"2\"", "2"),
            ("-3", "-3"),
            ("1.5", "1.5"),
            ("2Gi", "2Gi"),
        ] {
            let q: Quantity = serde_yaml::from_str(yaml).unwrap();
            assert_eq!(q.0, text, "{yaml}");
        }
    }

    #[test]
    fn booleans_only_where_allowed() {
        let l: Label = serde_yaml::from_str("true").unwrap();
        assert_eq!(l.0, "true");
        let e = serde_yaml::from_str::<Quantity>("true")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a quantity"), "{e}");
        let e = serde_yaml::from_str::<Label>("[1]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a label value"), "{e}");
    }
}
