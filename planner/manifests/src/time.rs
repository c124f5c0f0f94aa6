//! RFC 3339 timestamps (`2024-05-01T12:00:00Z`, `2024-05-01T14:00:00.5+02:00`) as Unix seconds.
//!
//! Kubernetes writes every timestamp in this form. A small parser is enough here and keeps the
//! planner free of a date-time dependency.

use planner::model::Timestamp;

/// Parses an RFC 3339 date-time into seconds since the Unix epoch (UTC). Fractional seconds are
/// dropped (rounded toward the past); a lower-case `t`/`z` and a space in place of `T` are
/// accepted, as Go's parser accepts them.
///
/// # Errors
/// A message saying what is wrong when `s` is not an RFC 3339 date-time.
pub fn parse_rfc3339(s: &str) -> Result<Timestamp, String> {
    let bad = |why: &str| format!("invalid RFC 3339 time {s:?}: {why}");
    let b = s.trim().as_bytes();
    if b.len() < 20 {
        return Err(bad("too short (expected e.g. 2024-05-01T12:00:00Z)"));
    }
    let num = |from: usize, len: usize| -> Result<i64, String> {
        let part = &b[from..from + len];
        if !part.iter().all(u8::is_ascii_digit) {
            return Err(bad("expected digits"));
        }
        Ok(part
            .iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return Err(bad("expected YYYY-MM-DDTHH:MM:SS"));
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad("expected 'T' between date and time"));
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("date out of range"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("time out of range"));
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(bad("expected digits after '.'"));
        }
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if oh > 23 || om > 59 {
                return Err(bad("offset out of range"));
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'-' { -off } else { off }
        }
        _ => return Err(bad("expected 'Z' or an offset like +02:00 at the end")),
    };
    let days = days_from_civil(year, month, day);
    Ok(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Formats Unix seconds as an RFC 3339 UTC date-time (`2024-05-01T12:00:00Z`).
pub fn format_rfc3339(t: Timestamp) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utc_offsets_and_fractions() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_rfc3339("2024-05-01T12:00:00Z").unwrap(),
            1_714_564_800
        );
        assert_eq!(
            parse_rfc3339("2024-05-01T14:00:00+02:00").unwrap(),
            1_714_564_800
        );
        assert_eq!(
            parse_rfc3339("2024-05-01T11:30:00.999-00:30").unwrap(),
            1_714_564_800
        );
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z").unwrap(), 951_782_400);
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z").unwrap(), -1);
    }

    #[test]
    fn round_trips_through_format() {
        for t in [0, 951_782_400, 1_714_564_800, 4_102_444_799, -1] {
            assert_eq!(parse_rfc3339(&format_rfc3339(t)).unwrap(), t);
        }
        assert_eq!(format_rfc3339(1_714_564_800), "2024-05-01T12:00:00Z");
    }

    #[test]
    fn rejects_malformed_times() {
        for bad in [
            "",
            "2024-05-01",
            "2024-05-01T12:00:00",
            "2024-13-01T12:00:00Z",
            "2023-02-29T12:00:00Z",
            "2024-05-01T25:00:00Z",
            "2024-05-01T12:00:00+0200",
            "2024-05-01X12:00:00Z",
            "2024-05-01T12:00:00.Z",
            "yesterday at noon!!",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
