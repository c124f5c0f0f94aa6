//! Go duration strings (`720h`, `1h30m`, `10s`, `1.5h`, `300ms`): the one parser for the syntax
//! of Karpenter's `expireAfter`, `consolidateAfter`, budget `duration`, the
//! `karpenter.sh/do-not-disrupt` annotation and (through `service-shell`, which refuses a bare
//! number) the services' duration flags and variables.

use std::time::Duration;

use thiserror::Error;

/// A text that is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid duration {input:?}: {why} (expected e.g. 720h, 1h30m, 10s)")]
pub struct DurationError {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Parses a Go duration into whole seconds, rounded toward zero (`1500ms` is 1 s).
///
/// Accepted as Go's `time.ParseDuration` accepts it: an optional sign, then one or more
/// `<number><unit>` parts with units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`, and `0` alone.
///
/// # Errors
/// [`DurationError`] naming `s` when it is not a Go duration.
pub fn parse_go_duration(s: &str) -> Result<i64, DurationError> {
    let nanos = parse_go_duration_nanos(s)?;
    i64::try_from(nanos / 1_000_000_000).map_err(|_| DurationError {
        input: s.to_string(),
        why: "too large",
    })
}

/// Parses a non-negative Go duration into a [`Duration`], keeping sub-second parts (`500ms`).
///
/// # Errors
/// [`DurationError`] naming `s` when it is not a Go duration or is negative.
pub fn parse_std_duration(s: &str) -> Result<Duration, DurationError> {
    let nanos = parse_go_duration_nanos(s)?;
    let bad = |why| DurationError {
        input: s.to_string(),
        why,
    };
    if nanos < 0 {
        return Err(bad("negative"));
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad("too large"))?;
    // The remainder of a division by 10^9 always fits.
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, sub))
}

/// Parses a Go duration into nanoseconds (the sign applied).
///
/// # Errors
/// [`DurationError`] naming `s` when it is not a Go duration.
pub fn parse_go_duration_nanos(s: &str) -> Result<i128, DurationError> {
    let bad = |why: &'static str| DurationError {
        input: s.to_string(),
        why,
    };
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
    Ok(if neg { -total } else { total })
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
        assert_eq!(parse_go_duration("-1500ms").unwrap(), -1);
    }

    #[test]
    fn std_durations_keep_milliseconds_and_refuse_negatives() {
        assert_eq!(
            parse_std_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            parse_std_duration("1m30s").unwrap(),
            Duration::from_secs(90)
        );
        assert!(parse_std_duration("-1s").is_err());
        let e = parse_std_duration("5 parsecs").unwrap_err();
        assert!(e.to_string().contains("\"5 parsecs\""), "{e}");
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
