//! Kubernetes resource quantities (`500m`, `2Gi`, `1.5`, `1e3`) parsed into integers.

use thiserror::Error;

/// A quantity that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid quantity {input:?}: {why}")]
pub struct QuantityError {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Parses a quantity and returns its value multiplied by 1000 (milli-units), rounded up as
/// Kubernetes rounds requests up.
///
/// # Errors
/// When `s` is not a Kubernetes quantity or overflows.
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 1000)
}

/// Parses a quantity as a whole number of base units (bytes for memory), rounded up.
///
/// # Errors
/// When `s` is not a Kubernetes quantity or overflows.
pub fn parse_units(s: &str) -> Result<i64, QuantityError> {
    parse_scaled(s, 1)
}

/// Milli-units as whole base units, rounded up: `parse_units(s)` is `units_of_milli(parse_milli(s))`
/// for every quantity that is not negative, so an amount parsed once in milli-units reads as
/// its text would.
pub fn units_of_milli(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

fn parse_scaled(s: &str, scale: i128) -> Result<i64, QuantityError> {
    let err = |why| QuantityError {
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
    // Value as a fraction: mantissa / 10^frac_digits.
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.len() + frac_part.len() > 30 {
        return Err(err("too many digits"));
    }
    let digits: String = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits.parse().map_err(|_| err("expected a number"))?;
    let mut den: i128 = 10i128.pow(frac_part.len() as u32);
    // Multiplier as numerator / denominator.
    let (mut mul_num, mut mul_den): (i128, i128) = (1, 1);
    match suffix {
        "" => {}
        "n" => mul_den = 1_000_000_000,
        "u" => mul_den = 1_000_000,
        "m" => mul_den = 1_000,
        "k" => mul_num = 1_000,
        "M" => mul_num = 1_000_000,
        "G" => mul_num = 1_000_000_000,
        "T" => mul_num = 1_000_000_000_000,
        "P" => mul_num = 1_000_000_000_000_000,
        "E" => mul_num = 1_000_000_000_000_000_000,
        "Ki" => mul_num = 1 << 10,
        "Mi" => mul_num = 1 << 20,
        "Gi" => mul_num = 1 << 30,
        "Ti" => mul_num = 1 << 40,
        "Pi" => mul_num = 1 << 50,
        "Ei" => mul_num = 1 << 60,
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().map_err(|_| err("bad exponent"))?;
            if e.abs() > 18 {
                return Err(err("exponent out of range"));
            }
            if e >= 0 {
                mul_num = 10i128.pow(e as u32);
            } else {
                mul_den = 10i128.pow((-e) as u32);
            }
        }
        _ => return Err(err("unknown suffix")),
    }
    den = den.checked_mul(mul_den).ok_or_else(|| err("too large"))?;
    let num = mantissa
        .checked_mul(mul_num)
        .and_then(|v| v.checked_mul(scale))
        .ok_or_else(|| err("too large"))?;
    // Round up (toward positive infinity for positive values), as Kubernetes does for requests.
    let value = (num + den - 1) / den * sign;
    i64::try_from(value).map_err(|_| err("too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_forms() {
        assert_eq!(parse_milli("500m").unwrap(), 500);
        assert_eq!(parse_milli("2").unwrap(), 2000);
        assert_eq!(parse_milli("1.5").unwrap(), 1500);
        assert_eq!(parse_milli("0.1").unwrap(), 100);
        assert_eq!(parse_milli("100u").unwrap(), 1, "sub-milli rounds up");
        assert_eq!(parse_milli("1e3").unwrap(), 1_000_000);
    }

    #[test]
    fn parses_memory_forms() {
        assert_eq!(parse_units("2Gi").unwrap(), 2 << 30);
        assert_eq!(parse_units("100Mi").unwrap(), 100 << 20);
        assert_eq!(parse_units("1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_units("1.5Gi").unwrap(), 3 << 29);
        assert_eq!(parse_units("128974848").unwrap(), 128_974_848);
        assert_eq!(parse_units("129e6").unwrap(), 129_000_000);
        assert_eq!(
            parse_units("1500m").unwrap(),
            2,
            "fractional bytes round up"
        );
    }

    #[test]
    fn units_of_milli_round_up_as_the_text_does() {
        for q in [
            "0", "1", "1500m", "1.5Gi", "129e6", "100u", "1n", "2Gi", "999m", "1001m",
        ] {
            let milli = parse_milli(q).unwrap();
            assert_eq!(units_of_milli(milli), parse_units(q).unwrap(), "{q}");
        }
        assert_eq!(units_of_milli(i64::MAX), i64::MAX / 1000 + 1);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1Qi", "1..2", "--1", ".", "1e99"] {
            let e = parse_units(bad).unwrap_err();
            assert_eq!(e.input, bad);
        }
    }
}
