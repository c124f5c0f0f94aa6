//! Name tables of the model's enums: the one place where a variant's name is written, shared by
//! the wire conversion (`planner-wire`) and the command line (`dovetail plan`'s flags).

use super::{MinValuesPolicy, PreferencePolicy};

/// An enum whose variants have fixed names in the contract (proto strings, CLI flag values).
pub trait Named: Copy + PartialEq + 'static {
    /// Every variant with its name, in documentation order.
    const VARIANTS: &'static [(&'static str, Self)];

    /// The variant's name.
    fn as_str(self) -> &'static str {
        Self::VARIANTS
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("", |(n, _)| n)
    }

    /// The variant with exactly this name.
    fn from_name(name: &str) -> Option<Self> {
        Self::VARIANTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// The names alone, e.g. for `clap`'s possible values.
    fn names() -> Vec<&'static str> {
        Self::VARIANTS.iter().map(|(n, _)| *n).collect()
    }
}

impl Named for PreferencePolicy {
    const VARIANTS: &'static [(&'static str, Self)] =
        &[("Respect", Self::Respect), ("Ignore", Self::Ignore)];
}

impl Named for MinValuesPolicy {
    const VARIANTS: &'static [(&'static str, Self)] =
        &[("Strict", Self::Strict), ("BestEffort", Self::BestEffort)];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_debug() {
        for (name, v) in PreferencePolicy::VARIANTS {
            assert_eq!(v.as_str(), *name);
            assert_eq!(format!("{v:?}"), *name, "the wire writes Debug names today");
            assert_eq!(PreferencePolicy::from_name(name), Some(*v));
        }
        for (name, v) in MinValuesPolicy::VARIANTS {
            assert_eq!(v.as_str(), *name);
            assert_eq!(format!("{v:?}"), *name);
            assert_eq!(MinValuesPolicy::from_name(name), Some(*v));
        }
        assert_eq!(PreferencePolicy::from_name("respect"), None);
    }
}
