//! Go duration strings (`720h`, `1h30m`, `10s`, `1.5h`, `300ms`), the syntax of Karpenter's
//! `expireAfter`, `consolidateAfter` and budget `duration`.

/// Parses a Go duration into whole seconds, rounded toward zero (`1500ms` is 1 s).
///
/// Accepted as Go's `time.ParseDuration` accepts it: an optional sign, then one or more
/// `<number><unit>` parts with units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`, and `0` alone.
///
/// # Errors
/// A message saying what is wrong when `s` is not a Go duration.
pub fn parse_go_duration(s: &str) -> Result<i64, String> {
    let bad = |why: &str| format!("invalid duration {s:?}: {why} (expected e.g. 720h, 1h30m, 10s)");
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad("empty"));
    }
    // Total in nanoseconds; i128 cannot overflow for any sane input length.
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad("missing unit"))?;
        let (num, tail) = rest.split_at(num_end);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(bad("expected a number"));
        }
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let nanos_per: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad("unknown unit")),
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        if int_part.len() > 20 || frac_part.len() > 20 {
            return Err(bad("too many digits"));
        }
        let int: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| bad("expected a number"))?
        };
        let mut value = int * nanos_per;
        if !frac_part.is_empty() {
            let frac: i128 = frac_part.parse().map_err(|_| bad("expected a number"))?;
            value += frac * nanos_per / 10i128.pow(frac_part.len() as u32);
        }
        total += value;
        if total > i128::from(i64::MAX) * 1_000_000_000 {
            return Err(bad("too large"));
        }
        rest = next;
    }
    let secs = i64::try_from(total / 1_000_000_000).map_err(|_| bad("too large"))?;
    Ok(if neg { -secs } else { secs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_forms() {
        assert_eq!(parse_go_duration("720h").unwrap(), 720 * 3600);
        assert_eq!(parse_go_duration("30m").unwrap(), 1800);
        assert_eq!(parse_go_duration("1h30m").unwrap(), 5400);
        assert_eq!(parse_go_duration("10s").unwrap(), 10);
        assert_eq!(parse_go_duration("0s").unwrap(), 0);
        assert_eq!(parse_go_duration("0").unwrap(), 0);
        assert_eq!(parse_go_duration("1.5h").unwrap(), 5400);
        assert_eq!(parse_go_duration("1500ms").unwrap(), 1);
        assert_eq!(parse_go_duration("720h0m0s").unwrap(), 720 * 3600);
        assert_eq!(parse_go_duration("-5m").unwrap(), -300);
    }

    #[test]
    fn rejects_non_durations() {
        for bad in ["", "Never", "10", "5d", "1h30", "h", "1..5h", "-"] {
            assert!(
                parse_go_duration(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }
}
