//! The one duration syntax of the services' flags and `DOVETAIL_*` variables: Go's
//! `time.ParseDuration`, as Kubernetes users write it (`30s`, `500ms`, `2m`, `1h30m`, `1.5h`).
//! A bare number other than `0` has no unit and is refused, as Go refuses it; so is a negative
//! duration. The parser itself is `common::duration`, shared with the manifests' durations.

use std::time::Duration;

use thiserror::Error;

/// A text that is not a duration a setting can take.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A number without a unit (`30`).
    #[error("a duration needs a unit, e.g. {0}s, 500ms or 1h30m")]
    NoUnit(String),
    /// Negative (`-5s`).
    #[error("a duration cannot be negative")]
    Negative,
    /// Anything else that Go would refuse.
    #[error("expected a duration like 30s, 500ms or 1h30m ({0})")]
    Syntax(&'static str),
}

/// Parses `s` (surrounding white space ignored) as a non-negative Go duration.
///
/// # Errors
/// [`Error`] saying what is wrong; the caller names the setting and the value.
pub fn parse(s: &str) -> Result<Duration, Error> {
    let s = s.trim();
    if s != "0"
        && s.bytes().any(|b| b.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return Err(Error::NoUnit(s.to_string()));
    }
    match common::duration::parse_go_duration_nanos(s) {
        Ok(n) if n < 0 => Err(Error::Negative),
        Ok(_) => common::duration::parse_std_duration(s).map_err(|e| Error::Syntax(e.why)),
        Err(e) => Err(Error::Syntax(e.why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_as_kubernetes_users_write_them() {
        let cases = [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("2m", Duration::from_secs(120)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5h", Duration::from_secs(5400)),
            ("1m30.5s", Duration::from_millis(90_500)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("10ns", Duration::from_nanos(10)),
            ("720h0m0s", Duration::from_secs(720 * 3600)),
            (" 15s ", Duration::from_secs(15)),
            ("+5s", Duration::from_secs(5)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn a_bare_number_needs_a_unit() {
        assert_eq!(parse("30"), Err(Error::NoUnit("30".into())));
        assert_eq!(
            parse("30").unwrap_err().to_string(),
            "a duration needs a unit, e.g. 30s, 500ms or 1h30m"
        );
        assert!(matches!(parse("1.5"), Err(Error::NoUnit(_))));
    }

    #[test]
    fn refuses_what_go_refuses_and_negatives() {
        assert_eq!(parse("-5s"), Err(Error::Negative));
        for bad in ["", "soon", "5d", "1h30", "h", "1..5h", "-", "5 s", "s5"] {
            assert!(
                matches!(parse(bad), Err(Error::Syntax(_))),
                "{bad:?}: {:?}",
                parse(bad)
            );
        }
        let e = parse("5d").unwrap_err().to_string();
        assert!(e.contains("unknown unit"), "{e}");
    }
}
