//! Go `time.ParseDuration` text (`15m`, `1h30m`, `1.5h`, `300ms`), as Karpenter accepts in the
//! `karpenter.sh/do-not-disrupt` pod annotation.

/// Parses a Go duration into whole seconds (fractions are rounded down). `None` when the text is
/// not a Go duration.
pub(crate) fn parse_go_duration_secs(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        nanos += value * unit;
    }
    let secs = (nanos / 1e9).floor() as i64;
    Some(if neg { -secs } else { secs })
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration_secs as p;

    #[test]
    fn go_durations() {
        assert_eq!(p("15m"), Some(900));
        assert_eq!(p("1h30m"), Some(5400));
        assert_eq!(p("1.5h"), Some(5400));
        assert_eq!(p("90s"), Some(90));
        assert_eq!(p("-5m"), Some(-300));
        assert_eq!(p("0s"), Some(0));
        assert_eq!(p("0"), Some(0));
        assert_eq!(p("true"), None);
        assert_eq!(p("10"), None);
        assert_eq!(p("5d"), None);
        assert_eq!(p(""), None);
    }
}
