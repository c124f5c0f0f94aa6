//! Kubernetes resource quantities as milli-units (parsed by `common::quantity`, the one
//! parser every service shares).
//!
//! Each quantity is parsed once, here: the messages carry milli-units (the `_milli` twins of
//! the resource maps, e.g. `Pod.requests_milli`), which the planner reads without parsing
//! again. [`format_milli`] writes an amount back as text for what Kubernetes shows (a
//! NodePool's `status.resources`).

pub use common::quantity::QuantityError as Error;

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Parses a quantity into milli-units, rounded up as Kubernetes rounds requests up. No amount
/// the planner reads (requests, capacity, limits, reservations) may be negative.
///
/// # Errors
/// When `s` is not a Kubernetes quantity, is negative, or is too large.
pub fn parse_milli(s: &str) -> Result<i64> {
    let m = common::quantity::parse_milli(s)?;
    if m < 0 {
        return Err(Error {
            input: s.to_string(),
            why: "quantities must not be negative",
        });
    }
    Ok(m)
}

/// Writes milli-units as a quantity: whole units without a suffix, the rest with `m`.
pub fn format_milli(milli: i128) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_and_negatives_are_refused_naming_the_input() {
        let e = parse_milli("lots").expect_err("invalid");
        assert_eq!(
            e.to_string(),
            "invalid quantity \"lots\": expected a number"
        );
        let e = parse_milli("-1").expect_err("negative");
        assert_eq!(
            e.to_string(),
            "invalid quantity \"-1\": quantities must not be negative"
        );
        assert_eq!(parse_milli("2Gi"), Ok(2 * 1024 * 1024 * 1024 * 1000));
    }

    #[test]
    fn formatting_round_trips() {
        for m in [0, 1, 999, 1000, 1500, 2_147_483_648_000] {
            assert_eq!(parse_milli(&format_milli(m)).map(i128::from), Ok(m));
        }
        assert_eq!(format_milli(1500), "1500m");
        assert_eq!(format_milli(4000), "4");
    }
}
