//! A small 5-field cron matcher for disruption budget `schedule`s, evaluated in UTC.
//!
//! Karpenter parses budget schedules with robfig/cron's standard parser: five fields (minute,
//! hour, day of month, month, day of week), with `*`, `?`, ranges `a-b`, steps `*/n`, `a-b/n`
//! and `a/n`, lists `a,b`, month and weekday names (`jan`, `mon`), and the descriptors
//! `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly`. Day of
//! month and day of week follow robfig's rule: when either field starts with `*` (or `?`)
//! without a step, both must match; otherwise one matching is enough.

use thiserror::Error;

use crate::Timestamp;

/// Why a schedule could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The schedule does not have five fields and is not a known `@` descriptor.
    #[error(
        "cron schedule {schedule:?}: expected 5 fields (minute hour day-of-month month day-of-week), got {count}"
    )]
    FieldCount {
        /// The schedule as written.
        schedule: String,
        /// How many fields it had.
        count: usize,
    },
    /// A field has a value that is not a number or known name, or is out of range.
    #[error("cron schedule {schedule:?}: bad {field} field {value:?}: {why}")]
    Field {
        /// The schedule as written.
        schedule: String,
        /// Which field (`minute`, `hour`, ...).
        field: &'static str,
        /// The field's text.
        value: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    dom_star: bool,
    dow_star: bool,
}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DOM: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    // Index i is month i+1.
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

// === impl Schedule ===

impl Schedule {
    /// Parses a schedule.
    ///
    /// # Errors
    /// [`enum@Error`] naming the schedule and the field at fault.
    pub fn parse(schedule: &str) -> Result<Self, Error> {
        let trimmed = schedule.trim();
        let expanded = match trimmed.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_string(),
            "@monthly" => "0 0 1 * *".to_string(),
            "@weekly" => "0 0 * * 0".to_string(),
            "@daily" | "@midnight" => "0 0 * * *".to_string(),
            "@hourly" => "0 * * * *".to_string(),
            _ => trimmed.to_string(),
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(Error::FieldCount {
                schedule: schedule.to_string(),
                count: fields.len(),
            });
        }
        let p = |f: &str, spec: &FieldSpec| parse_field(schedule, f, spec);
        let (minute, _) = p(fields[0], &MINUTE)?;
        let (hour, _) = p(fields[1], &HOUR)?;
        let (dom, dom_star) = p(fields[2], &DOM)?;
        let (month, _) = p(fields[3], &MONTH)?;
        let (mut dow, dow_star) = p(fields[4], &DOW)?;
        // robfig accepts 7 as Sunday only through ranges it clamps; fold it to 0.
        if dow & (1 << 7) != 0 {
            dow |= 1;
        }
        Ok(Self {
            minute,
            hour,
            dom,
            month,
            dow,
            dom_star,
            dow_star,
        })
    }

    /// True when the schedule fires at the minute containing `t`.
    pub fn matches(&self, t: Timestamp) -> bool {
        let c = Civil::from_timestamp(t);
        let bit = |mask: u64, v: u32| mask & (1u64 << v) != 0;
        if !(bit(self.minute, c.minute) && bit(self.hour, c.hour) && bit(self.month, c.month)) {
            return false;
        }
        let dom = bit(self.dom, c.day);
        let dow = bit(self.dow, c.weekday);
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// True when the schedule fired in `(now - duration, now]`, i.e. a budget with this schedule
    /// and `duration` seconds is active at `now` (Karpenter's `Budget.IsActive`).
    pub fn active_at(&self, now: Timestamp, duration: i64) -> bool {
        if duration <= 0 {
            return false;
        }
        // Look back at most a year of minutes: longer durations are active whenever the
        // schedule fired in the last year, which any valid schedule does.
        let horizon = duration.min(366 * 24 * 3600);
        let mut minute = now.div_euclid(60) * 60;
        while minute > now.saturating_sub(horizon) {
            if self.matches(minute) {
                return true;
            }
            minute = minute.saturating_sub(60);
        }
        false
    }
}

/// Parses one field into a bit mask; the bool says the field started with `*`/`?` without a
/// step (robfig's "star bit").
fn parse_field(schedule: &str, field: &str, spec: &FieldSpec) -> Result<(u64, bool), Error> {
    let err = |why: String| Error::Field {
        schedule: schedule.to_string(),
        field: spec.name,
        value: field.to_string(),
        why,
    };
    let mut mask = 0u64;
    let mut star = false;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| err(format!("step {s:?} is not a number")))?;
                if step == 0 {
                    return Err(err("step must be positive".to_string()));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (start, end) = if range == "*" || range == "?" {
            if step.is_none_or(|s| s == 1) {
                star = true;
            }
            (spec.min, spec.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, spec).map_err(&err)?, value(b, spec).map_err(&err)?)
        } else {
            let v = value(range, spec).map_err(&err)?;
            // `a/n` means from a to the end, every n.
            (v, if step.is_some() { spec.max } else { v })
        };
        let upper = if spec.name == DOW.name { 7 } else { spec.max };
        if start < spec.min || end > upper || start > end {
            return Err(err(format!(
                "range {start}-{end} is outside {}-{}",
                spec.min, spec.max
            )));
        }
        let step = step.unwrap_or(1);
        let mut v = start;
        while v <= end {
            mask |= 1u64 << v;
            v += step;
        }
    }
    Ok((mask, star))
}

fn value(s: &str, spec: &FieldSpec) -> Result<u32, String> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    let lower = s.to_ascii_lowercase();
    spec.names
        .iter()
        .position(|n| *n == lower)
        .map(|i| i as u32 + spec.min)
        .ok_or_else(|| format!("{s:?} is not a number or a known name"))
}

/// A UTC calendar time, minute precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Civil {
    pub(crate) year: i64,
    pub(crate) month: u32,
    pub(crate) day: u32,
    pub(crate) hour: u32,
    pub(crate) minute: u32,
    /// 0 = Sunday.
    pub(crate) weekday: u32,
}

impl Civil {
    /// Converts seconds since the epoch (Howard Hinnant's days-to-civil algorithm).
    pub(crate) fn from_timestamp(t: Timestamp) -> Self {
        let days = t.div_euclid(86_400);
        let secs = t.rem_euclid(86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Self {
            year,
            month,
            day,
            hour: (secs / 3600) as u32,
            minute: ((secs % 3600) / 60) as u32,
            weekday: (days + 4).rem_euclid(7) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-30 is a Monday.
    const MON_2026_11_30_0000: Timestamp = 1_795_996_800;

    fn at(day_offset: i64, hour: i64, minute: i64) -> Timestamp {
        MON_2026_11_30_0000 + day_offset * 86_400 + hour * 3600 + minute * 60
    }

    #[test]
    fn civil_conversion() {
        let c = Civil::from_timestamp(MON_2026_11_30_0000 + 9 * 3600 + 5 * 60 + 7);
        assert_eq!(
            c,
            Civil {
                year: 2026,
                month: 11,
                day: 30,
                hour: 9,
                minute: 5,
                weekday: 1
            }
        );
        let c = Civil::from_timestamp(951_782_400); // 2000-02-29 00:00 Tuesday
        assert_eq!((c.year, c.month, c.day, c.weekday), (2000, 2, 29, 2));
    }

    #[test]
    fn weekday_business_hours() {
        let s = Schedule::parse("0 9 * * mon-fri").unwrap();
        assert!(s.matches(at(0, 9, 0)));
        assert!(!s.matches(at(0, 9, 1)));
        assert!(!s.matches(at(5, 9, 0))); // Saturday
        // Active for 8h after 09:00 on weekdays.
        assert!(s.active_at(at(0, 16, 59), 8 * 3600));
        assert!(!s.active_at(at(0, 17, 0), 8 * 3600));
        assert!(!s.active_at(at(0, 8, 59), 8 * 3600));
        assert!(!s.active_at(at(5, 12, 0), 8 * 3600));
    }

    #[test]
    fn steps_lists_and_names() {
        let s = Schedule::parse("*/15 0-6/2 1,15 JAN,dec ?").unwrap();
        // 2026-12-01 is a Tuesday, day 1 of December.
        assert!(s.matches(at(1, 4, 45)));
        assert!(!s.matches(at(1, 3, 45)));
        assert!(!s.matches(at(1, 4, 44)));
        assert!(!s.matches(at(2, 4, 45)));
        let s = Schedule::parse("5/20 * * * *").unwrap();
        assert!(s.matches(at(0, 1, 45)));
        assert!(!s.matches(at(0, 1, 0)));
    }

    #[test]
    fn dom_dow_or_semantics() {
        // Both restricted: either matches (15th of month or Monday).
        let s = Schedule::parse("0 0 15 * 1").unwrap();
        assert!(s.matches(at(0, 0, 0))); // Monday the 30th
        assert!(!s.matches(at(1, 0, 0))); // Tuesday the 1st
        // Day of week star: both must match.
        let s = Schedule::parse("0 0 30 * *").unwrap();
        assert!(s.matches(at(0, 0, 0)));
        assert!(!s.matches(at(1, 0, 0)));
        // Sunday as 7.
        let s = Schedule::parse("0 0 * * 7").unwrap();
        assert!(s.matches(at(6, 0, 0)));
    }

    #[test]
    fn descriptors() {
        let d = Schedule::parse("@daily").unwrap();
        assert!(d.matches(at(3, 0, 0)));
        assert!(!d.matches(at(3, 1, 0)));
        assert!(d.active_at(at(3, 0, 30), 3600));
        assert_eq!(Schedule::parse("@midnight").unwrap(), d);
        assert!(Schedule::parse("@hourly").unwrap().matches(at(0, 7, 0)));
        assert!(Schedule::parse("@weekly").unwrap().matches(at(6, 0, 0)));
        assert!(Schedule::parse("@monthly").unwrap().matches(at(1, 0, 0)));
        assert!(!Schedule::parse("@yearly").unwrap().matches(at(1, 0, 0)));
    }

    #[test]
    fn bad_schedules_name_the_field() {
        let e = Schedule::parse("0 25 * * *").unwrap_err();
        assert!(e.to_string().contains("hour"), "{e}");
        let e = Schedule::parse("0 0 * foo *").unwrap_err();
        assert!(
            e.to_string().contains("month") && e.to_string().contains("foo"),
            "{e}"
        );
        let e = Schedule::parse("* * *").unwrap_err();
        assert!(matches!(e, Error::FieldCount { count: 3, .. }));
        assert!(Schedule::parse("*/0 * * * *").is_err());
    }
}
