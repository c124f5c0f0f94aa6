//! Kubernetes resource quantities as milli-units (parsed by `common::quantity`, the one
//! parser every service shares), and sums written back as text.
//!
//! The watcher sums container requests into a pod's effective requests; it writes the sums in
//! a canonical form (`1500m`, `2147483648`) that the planner reads as the same amount.

pub use common::quantity::QuantityError as Error;

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Parses a quantity into milli-units, rounded up as Kubernetes rounds requests up (widened
/// so that sums over many containers cannot overflow). No amount the planner reads (requests,
/// capacity, limits, reservations) may be negative.
///
/// # Errors
/// When `s` is not a Kubernetes quantity, is negative, or is too large.
pub fn parse_milli(s: &str) -> Result<i128> {
    let m = common::quantity::parse_milli(s)?;
    if m < 0 {
        return Err(Error {
            input: s.to_string(),
            why: "quantities must not be negative",
        });
    }
    Ok(i128::from(m))
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
    fn garbage_is_refused_naming_the_input() {
        let e = parse_milli("lots").expect_err("invalid");
        assert_eq!(
            e.to_string(),
            "invalid quantity \"lots\": expected a number"
        );
        assert_eq!(parse_milli("2Gi"), Ok(2 * 1024 * 1024 * 1024 * 1000));
    }

    #[test]
    fn formatting_round_trips() {
        for m in [0, 1, 999, 1000, 1500, 2_147_483_648_000] {
            assert_eq!(parse_milli(&format_milli(m)), Ok(m));
        }
        assert_eq!(format_milli(1500), "1500m");
        assert_eq!(format_milli(4000), "4");
    }
}
