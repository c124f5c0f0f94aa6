//! A Prometheus summary, which prometheus-client lacks, for the Karpenter metrics that are
//! summaries (`karpenter_pods_startup_duration_seconds`, `karpenter_nodes_termination_duration_seconds`):
//! quantiles 0, 0.5, 0.9, 0.99 and 1 (Karpenter's `SummaryObjectives()`) over the observations of
//! the last 10 minutes (Go's `DefMaxAge`), with a cumulative sum and count, per label set.
//! [`Summary::render`] writes the OpenMetrics text; [`super::insert_before_eof`] puts it into a
//! registry's exposition.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// Karpenter's `SummaryObjectives()` quantiles.
pub const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];

/// How long an observation counts in the quantiles.
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// At most this many observations per label set are kept for the quantiles (oldest go first).
pub const MAX_SAMPLES: usize = 50_000;

type Labels = Vec<(String, String)>;

#[derive(Debug, Default)]
struct Series {
    window: VecDeque<(Instant, f64)>,
    sum: f64,
    count: u64,
}

/// A summary family. Cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct Summary {
    name: &'static str,
    help: &'static str,
    series: Arc<Mutex<BTreeMap<Labels, Series>>>,
}

impl Summary {
    /// A summary named `name` (the full name, prefix included).
    pub fn new(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            series: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<Labels, Series>> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Observes `value` for `labels` (empty: the unlabelled series).
    pub fn observe(&self, labels: &[(&str, &str)], value: f64) {
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut series = self.lock();
        let s = series.entry(labels).or_default();
        s.window.push_back((Instant::now(), value));
        if s.window.len() > MAX_SAMPLES {
            s.window.pop_front();
        }
        s.sum += value;
        s.count += 1;
    }

    /// The OpenMetrics text of the family: quantiles (`NaN` when the window is empty), sum and
    /// count of every series. A family with no label set yet renders its unlabelled series
    /// with count 0, as Go's client does for a summary without labels.
    pub fn render(&self) -> String {
        let mut series = self.lock();
        if series.is_empty() {
            series.insert(Labels::new(), Series::default());
        }
        let (name, help) = (self.name, self.help);
        let mut out = String::new();
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} summary");
        for (labels, s) in series.iter_mut() {
            while s.window.front().is_some_and(|(t, _)| t.elapsed() > MAX_AGE) {
                s.window.pop_front();
            }
            let mut values: Vec<f64> = s.window.iter().map(|(_, v)| *v).collect();
            values.sort_by(f64::total_cmp);
            let pairs = |extra: Option<String>| {
                let mut all: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                all.extend(extra);
                if all.is_empty() {
                    String::new()
                } else {
                    format!("{{{}}}", all.join(","))
                }
            };
            for q in QUANTILES {
                let v = if values.is_empty() {
                    f64::NAN
                } else {
                    values[((values.len() - 1) as f64 * q).round() as usize]
                };
                let _ = writeln!(
                    out,
                    "{name}{} {v}",
                    pairs(Some(format!("quantile=\"{q}\"")))
                );
            }
            let _ = writeln!(out, "{name}_sum{} {}", pairs(None), s.sum);
            let _ = writeln!(out, "{name}_count{} {}", pairs(None), s.count);
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_quantiles_sum_and_count_per_label_set() {
        let s = Summary::new("x_seconds", "An x.");
        assert!(s.render().contains("x_seconds_count 0"));
        assert!(s.render().contains("x_seconds{quantile=\"0.5\"} NaN"));
        let s = Summary::new("y_seconds", "A y.");
        for v in [1.0, 2.0, 3.0, 4.0, 5.0] {
            s.observe(&[("nodepool", "default")], v);
        }
        let text = s.render();
        for want in [
            "# TYPE y_seconds summary",
            r#"y_seconds{nodepool="default",quantile="0"} 1"#,
            r#"y_seconds{nodepool="default",quantile="0.5"} 3"#,
            r#"y_seconds{nodepool="default",quantile="1"} 5"#,
            r#"y_seconds_sum{nodepool="default"} 15"#,
            r#"y_seconds_count{nodepool="default"} 5"#,
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
    }
}
