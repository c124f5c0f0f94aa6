//! What the burst and scale benches sample while the system works ([`Sampler`]), and what they
//! read of its processes ([`peak_rss_mb`], [`cpu_seconds`]) and of its Postgres ledger
//! ([`LedgerWrites`]). Figures are printed by the benches, never asserted.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::process::metric;
use crate::system::System;

/// What the sampler saw, as times since it started.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// Each batch window's close (`dovetail_watcher_batch_size_pods_count` went up).
    pub batches: Vec<Duration>,
    /// Each create call sent (`dovetail_actuator_cloud_create_calls_total`, one entry per call).
    pub creates: Vec<Duration>,
    /// When the Node count last went up, and to what.
    pub last_node: Option<(Duration, usize)>,
    /// When the first Node appeared.
    pub first_node: Option<Duration>,
}

/// Polls, every 20 ms, the watcher's batch count, the actuator's create-call count and the
/// Node count, so the times of batch closes, CreateFleet calls and Node registrations are known
/// to within one sample (≈ 20 ms plus the scrape).
pub struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<Samples>,
}

impl Sampler {
    /// Starts sampling `sys`; times are measured from `t0`.
    ///
    /// # Errors
    /// When the actuator serves no metrics.
    pub fn start(sys: &System, t0: Instant) -> anyhow::Result<Self> {
        let watcher_metrics = sys.watcher_metrics;
        let actuator_metrics = sys
            .actuator_metrics
            .ok_or_else(|| anyhow::anyhow!("the actuator serves no metrics"))?;
        let nodes_api = Api::<Node>::all(sys.kube.clone());
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut s = Samples::default();
            let (mut batches, mut creates, mut nodes) = (0.0, 0.0, 0);
            loop {
                if let Ok(Some(b)) =
                    metric(watcher_metrics, "dovetail_watcher_batch_size_pods_count").await
                    && b > batches
                {
                    s.batches.push(t0.elapsed());
                    batches = b;
                }
                if let Ok(Some(c)) = metric(
                    actuator_metrics,
                    "dovetail_actuator_cloud_create_calls_total",
                )
                .await
                    && c > creates
                {
                    let at = t0.elapsed();
                    s.creates
                        .extend(std::iter::repeat_n(at, (c - creates) as usize));
                    creates = c;
                }
                if let Ok(list) = nodes_api.list_metadata(&ListParams::default()).await
                    && list.items.len() > nodes
                {
                    nodes = list.items.len();
                    s.last_node = Some((t0.elapsed(), nodes));
                    s.first_node.get_or_insert(t0.elapsed());
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    _ = stopped.changed() => return s,
                }
            }
        });
        Ok(Self { stop, task })
    }

    /// Stops sampling and returns what was seen.
    ///
    /// # Errors
    /// When the sampling task panicked.
    pub async fn finish(self) -> anyhow::Result<Samples> {
        let _ = self.stop.send(true);
        Ok(self.task.await?)
    }
}

fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The peak resident memory of process `pid` so far (`VmHWM`), in MiB.
pub fn peak_rss_mb(pid: u32) -> Option<f64> {
    proc_status_kb(pid, "VmHWM:").map(|kb| kb as f64 / 1024.0)
}

/// The CPU time process `pid` has used so far (user + system, all threads), in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses: utime and stime are
    // the 14th and 15th fields of the line, the 12th and 13th after `) `.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux (`sysconf(_SC_CLK_TCK)`).
    Some(ticks as f64 / 100.0)
}

/// Writes to the ledger's Postgres database so far, from `pg_stat_database`: committed
/// transactions and rows inserted, updated or deleted. Postgres publishes these with a delay of
/// up to about a second, so a difference is read over a span much longer than that.
#[derive(Clone, Copy, Debug, Default)]
pub struct LedgerWrites {
    /// `xact_commit`.
    pub commits: i64,
    /// `tup_inserted + tup_updated + tup_deleted`.
    pub rows: i64,
}

impl LedgerWrites {
    /// The counters of the database behind `url` now.
    ///
    /// # Errors
    /// When Postgres cannot be asked.
    pub async fn read(url: &str) -> anyhow::Result<Self> {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(url).await?;
        let (commits, rows): (i64, i64) = sqlx::query_as(
            "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted \
             FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(&mut c)
        .await?;
        c.close().await?;
        Ok(Self { commits, rows })
    }

    /// What was written since `before`.
    pub fn since(self, before: Self) -> Self {
        Self {
            commits: self.commits - before.commits,
            rows: self.rows - before.rows,
        }
    }
}

/// Milliseconds since the epoch, to compare with the ledger's stamps.
#[allow(clippy::disallowed_methods)] // The benches compare with the actuator's wall-clock stamps.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
