//! A service binary as a child process: its stdout and stderr go to a log file (printed when a
//! test fails), stdout lines are also handed to the test (for `listening` and `DOVETAIL_PAUSED`
//! lines); readiness is awaited on `grpc.health.v1`; SIGKILL and SIGTERM by the child's PID.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// How to start a service.
#[derive(Clone, Debug)]
pub struct Spec {
    /// A short name (`actuator`, `planner-0`); the log file is `<name>.log`.
    pub name: String,
    /// The binary.
    pub binary: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set (on top of the test's own).
    pub env: Vec<(String, String)>,
    /// Environment variables removed.
    pub env_remove: Vec<String>,
}

/// A running service process.
#[derive(Debug)]
pub struct ServiceProcess {
    /// Its name.
    pub name: String,
    child: Child,
    log: PathBuf,
    lines: mpsc::UnboundedReceiver<String>,
}

// === impl ServiceProcess ===

impl ServiceProcess {
    /// Spawns `spec`, appending its output to `<log_dir>/<name>.log`.
    ///
    /// # Errors
    /// When the log file cannot be opened or the process cannot be spawned.
    pub fn spawn(spec: &Spec, log_dir: &Path) -> anyhow::Result<Self> {
        let log = log_dir.join(format!("{}.log", spec.name));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let file = Arc::new(Mutex::new(file));
        if let Ok(mut f) = file.lock() {
            let _ = writeln!(f, "=== {} {}", spec.binary.display(), spec.args.join(" "));
        }
        let mut cmd = Command::new(&spec.binary);
        cmd.args(&spec.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for k in &spec.env_remove {
            cmd.env_remove(k);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", spec.binary.display()))?;
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().context("no stdout")?;
        let stderr = child.stderr.take().context("no stderr")?;
        tokio::spawn(pump(stdout, file.clone(), Some(tx)));
        tokio::spawn(pump(stderr, file, None));
        Ok(Self {
            name: spec.name.clone(),
            child,
            log,
            lines,
        })
    }

    /// The next stdout line starting with `prefix`, within `timeout`.
    ///
    /// # Errors
    /// When none comes in time or the process closes its stdout.
    pub async fn wait_line(&mut self, prefix: &str, timeout: Duration) -> anyhow::Result<String> {
        let name = self.name.clone();
        tokio::time::timeout(timeout, async {
            loop {
                match self.lines.recv().await {
                    Some(l) if l.starts_with(prefix) => return Ok(l),
                    Some(_) => {}
                    None => bail!("{name} closed its stdout before a {prefix:?} line"),
                }
            }
        })
        .await
        .with_context(|| format!("{name}: no {prefix:?} line within {timeout:?}"))?
    }

    /// The `grpc=` (and `metrics=`) addresses of a `... listening grpc=A metrics=B` line.
    ///
    /// # Errors
    /// When no such line comes within `timeout`.
    pub async fn wait_listening(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<(SocketAddr, Option<SocketAddr>)> {
        let line = loop {
            let l = self.wait_line("dovetail-", timeout).await?;
            if l.contains(" listening ") {
                break l;
            }
        };
        let word = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .and_then(|a| a.parse::<SocketAddr>().ok())
        };
        let grpc = word("grpc=").with_context(|| format!("no grpc= in {line:?}"))?;
        Ok((grpc, word("metrics=")))
    }

    /// The process ID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// SIGKILL, then reaps it.
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub async fn sigkill(&mut self) -> anyhow::Result<()> {
        self.child
            .kill()
            .await
            .with_context(|| format!("SIGKILL {}", self.name))
    }

    /// SIGTERM, then waits for the exit (at most `timeout`; SIGKILL after that).
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub async fn sigterm(&mut self, timeout: Duration) -> anyhow::Result<Option<i32>> {
        let Some(pid) = self.child.id() else {
            return Ok(None);
        };
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        if !status.success() {
            bail!("kill -TERM {pid} failed");
        }
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(s) => Ok(s?.code()),
            Err(_) => {
                self.sigkill().await?;
                Ok(None)
            }
        }
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

async fn pump<R: AsyncRead + Unpin>(
    r: R,
    file: Arc<Mutex<std::fs::File>>,
    tx: Option<mpsc::UnboundedSender<String>>,
) {
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(l)) = lines.next_line().await {
        if let Ok(mut f) = file.lock() {
            let _ = writeln!(f, "{l}");
        }
        if let Some(tx) = &tx {
            let _ = tx.send(l);
        }
    }
}

pub use test_support::process::free_port;

/// The `grpc.health.v1` status of `service` ("" for the server) at `addr`.
///
/// # Errors
/// When it cannot be reached.
pub async fn health(addr: SocketAddr, service: &str) -> anyhow::Result<ServingStatus> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await?;
    let mut h = HealthClient::new(channel);
    let mut req = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    req.set_timeout(Duration::from_secs(2));
    Ok(h.check(req).await?.into_inner().status())
}

/// Waits until `service` at `addr` reports SERVING.
///
/// # Errors
/// When it does not within `timeout` (the last answer or error is in the message).
pub async fn wait_serving(
    addr: SocketAddr,
    service: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let mut last = String::from("never asked");
    let r = tokio::time::timeout(timeout, async {
        loop {
            match health(addr, service).await {
                Ok(ServingStatus::Serving) => return,
                Ok(s) => last = format!("{s:?}"),
                Err(e) => last = format!("{e:#}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    r.with_context(|| format!("{addr} not SERVING {service:?} within {timeout:?}: {last}"))
}

/// The value of the Prometheus sample `name` (exact series text, labels included) at `addr`.
///
/// # Errors
/// When the endpoint cannot be read.
pub async fn metric(addr: SocketAddr, name: &str) -> anyhow::Result<Option<f64>> {
    Ok(test_support::process::sample(&scrape(addr).await?, name))
}

/// The whole Prometheus text at `addr`'s `/metrics` (the HTTP body).
///
/// # Errors
/// When the endpoint cannot be read.
pub async fn scrape(addr: SocketAddr) -> anyhow::Result<String> {
    Ok(test_support::process::scrape(addr).await?)
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
