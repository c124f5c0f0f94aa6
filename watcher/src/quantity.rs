//! Kubernetes resource quantities (`500m`, `2Gi`, `1.5`, `1e3`) as milli-units, and back to text.
//!
//! The watcher sums container requests into a pod's effective requests, so it has to read
//! quantities; it writes the sums back in a canonical form (`1500m`, `2147483648`) that the
//! planner reads as the same amount.

use thiserror::Error;

/// A quantity that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid quantity {input:?}: {why}")]
pub struct Error {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Parses a quantity into milli-units, rounded up as Kubernetes rounds requests up.
///
/// # Errors
/// When `s` is not a Kubernetes quantity, or is too large.
pub fn parse_milli(s: &str) -> Result<i128> {
    let err = |why| Error {
        input: s.to_string(),
        why,
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(err("empty"));
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'-' => (-1i128, &t[1..]),
        b'+' => (1, &t[1..]),
        _ => (1, t),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return Err(err("expected a number"));
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.len() + frac_part.len() > 30 {
        return Err(err("too many digits"));
    }
    let mantissa: i128 = format!("{int_part}{frac_part}")
        .parse()
        .map_err(|_| err("expected a number"))?;
    let mut den: i128 = 10i128.pow(frac_part.len() as u32);
    let (mut num_mul, mut den_mul): (i128, i128) = (1000, 1);
    match suffix {
        "" => {}
        "n" => den_mul = 1_000_000_000,
        "u" => den_mul = 1_000_000,
        "m" => den_mul = 1_000,
        "k" => num_mul *= 1_000,
        "M" => num_mul *= 1_000_000,
        "G" => num_mul *= 1_000_000_000,
        "T" => num_mul *= 1_000_000_000_000,
        "P" => num_mul *= 1_000_000_000_000_000,
        "E" => num_mul *= 1_000_000_000_000_000_000,
        "Ki" => num_mul <<= 10,
        "Mi" => num_mul <<= 20,
        "Gi" => num_mul <<= 30,
        "Ti" => num_mul <<= 40,
        "Pi" => num_mul <<= 50,
        "Ei" => num_mul <<= 60,
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().map_err(|_| err("bad exponent"))?;
            if !(-30..=30).contains(&e) {
                return Err(err("exponent out of range"));
            }
            if e >= 0 {
                num_mul *= 10i128.pow(e.unsigned_abs());
            } else {
                den_mul = 10i128.pow(e.unsigned_abs());
            }
        }
        _ => return Err(err("unknown suffix")),
    }
    den = den.checked_mul(den_mul).ok_or_else(|| err("too large"))?;
    let n = mantissa
        .checked_mul(num_mul)
        .ok_or_else(|| err("too large"))?;
    // Round up (away from zero for positive amounts), as Kubernetes does for requests.
    let v = (n + den - 1) / den;
    if v > i128::from(i64::MAX) {
        return Err(err("too large"));
    }
    Ok(sign * v)
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
    fn suffixes_and_rounding() {
        assert_eq!(parse_milli("500m"), Ok(500));
        assert_eq!(parse_milli("1.5"), Ok(1500));
        assert_eq!(parse_milli("2Gi"), Ok(2 * 1024 * 1024 * 1024 * 1000));
        assert_eq!(parse_milli("1k"), Ok(1_000_000));
        assert_eq!(parse_milli("1e3"), Ok(1_000_000));
        assert_eq!(parse_milli("1n"), Ok(1), "rounds up");
        assert_eq!(parse_milli("0.1m"), Ok(1), "rounds up");
    }

    #[test]
    fn garbage_is_refused_naming_the_input() {
        let e = parse_milli("lots").expect_err("invalid");
        assert_eq!(
            e.to_string(),
            "invalid quantity \"lots\": expected a number"
        );
        assert!(parse_milli("1Qi").is_err());
        assert!(parse_milli("").is_err());
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
