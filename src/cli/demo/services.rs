//! The dovetail services as real processes of this one executable.
//!
//! `dovetail demo` re-executes its own binary with `argv[0]` set to the service's binary name
//! (`dovetail-planner`, `dovetail-watcher`, `dovetail-actuator`); [`service_main`] then runs that
//! service's program (`planner_service::cli::main`, `watcher::cli::main`, `actuator::cli::main`,
//! which the services' own binaries call too), so the processes are the services exactly as
//! they run in production: their flags, their start-up, their gRPC.
//! Each child's stderr goes to a log file; the planner and the actuator announce their bound
//! address on stdout (`... listening grpc=ADDR ...`), which is how the demo learns the ports
//! (all bound as `127.0.0.1:0`).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The services `dovetail` can run as, by binary name.
const SERVICES: [&str; 3] = ["dovetail-planner", "dovetail-watcher", "dovetail-actuator"];

/// The variable through which the demo gives its children its process id.
pub(crate) const PARENT_PID: &str = "DOVETAIL_DEMO_PARENT_PID";

/// Runs the service named by this process's `argv[0]` (its file name), if it names one.
///
/// A child of `dovetail demo` (`DOVETAIL_DEMO_PARENT_PID` set) exits as soon as the demo is
/// gone, even when the demo was SIGKILLed and could not stop it.
pub(crate) fn service_main() -> Option<ExitCode> {
    let arg0: OsString = std::env::args_os().next()?;
    let name = Path::new(&arg0).file_name()?.to_str()?.to_string();
    if !SERVICES.contains(&name.as_str()) {
        return None;
    }
    if let Some(parent) = std::env::var(PARENT_PID)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        std::thread::spawn(move || {
            loop {
                if std::os::unix::process::parent_id() != parent {
                    std::process::exit(0);
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }
    match name.as_str() {
        "dovetail-planner" => Some(planner_service::cli::main()),
        "dovetail-watcher" => Some(watcher::cli::main()),
        "dovetail-actuator" => Some(actuator::cli::main()),
        _ => None,
    }
}

/// How a service process is started, kept to start it again.
#[derive(Clone, Debug)]
struct Spec {
    binary: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    announces: bool,
    /// The watcher's health address (it announces none): a restart waits for it to serve.
    health: Option<(SocketAddr, String)>,
    timeout: Duration,
}

/// One service process.
#[derive(Debug)]
pub(crate) struct Service {
    /// A name for people, e.g. `planner-1`.
    pub(crate) name: String,
    /// Its process id.
    pub(crate) pid: u32,
    /// The address it announced (`grpc=`), if it announces one.
    pub(crate) grpc_addr: Option<String>,
    /// The metrics address it announced (`metrics=`, unless `off`).
    pub(crate) metrics_addr: Option<String>,
    /// Its stderr.
    pub(crate) log: PathBuf,
    /// Whether the demo killed it.
    killed: bool,
    /// When the running process was started.
    since: tokio::time::Instant,
    spec: Spec,
    child: Child,
}

/// Environment variables a child must not inherit: every service reads its `DOVETAIL_*`
/// settings and the AWS SDK its `AWS_*` ones, and the demo passes everything as flags.
fn scrubbed(key: &str) -> bool {
    key.starts_with("DOVETAIL_") || key.starts_with("AWS_") || key == "KUBECONFIG"
}

/// A started process and what it announced.
struct Started {
    pid: u32,
    grpc_addr: Option<String>,
    metrics_addr: Option<String>,
    child: Child,
}

impl Service {
    /// Starts `binary` (one of the service names) as `name` with `args`, its stderr in
    /// `log_dir/<name>.log` and `env` added to a scrubbed environment. When `announces` is true,
    /// waits (up to `timeout`) for its `listening grpc=ADDR` line. The addresses it announces
    /// replace `127.0.0.1:0` in its `--listen` and `--metrics-listen` flags, so that a restart
    /// ([`Service::restart`]) serves where its clients look.
    ///
    /// # Errors
    /// When the process cannot be started, exits before announcing, or is silent too long.
    pub(crate) async fn start(
        binary: &str,
        name: &str,
        args: &[String],
        env: &[(&str, String)],
        log_dir: &Path,
        announces: bool,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        debug_assert!(SERVICES.contains(&binary));
        let mut spec = Spec {
            binary: binary.to_string(),
            args: args.to_vec(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
            announces,
            health: None,
            timeout,
        };
        let log = log_dir.join(format!("{name}.log"));
        let started = spawn(&spec, name, &log, false).await?;
        pin(&mut spec.args, "--listen", started.grpc_addr.as_deref());
        pin(
            &mut spec.args,
            "--metrics-listen",
            started.metrics_addr.as_deref(),
        );
        Ok(Self {
            name: name.to_string(),
            pid: started.pid,
            grpc_addr: started.grpc_addr,
            metrics_addr: started.metrics_addr,
            log,
            killed: false,
            since: tokio::time::Instant::now(),
            spec,
            child: started.child,
        })
    }

    /// Waits until the process reports `service` SERVING on `grpc.health.v1` at `addr` (the
    /// watcher: every informer synced); a restart waits for the same.
    ///
    /// # Errors
    /// When the process exits first (its status and log tail in the message), or is not
    /// SERVING within `timeout`.
    pub(crate) async fn wait_serving(
        &mut self,
        addr: SocketAddr,
        service: &str,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        self.spec.health = Some((addr, service.to_string()));
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last: String;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!(
                    "{} exited before it was ready ({status}); its log: {}\n{}",
                    self.name,
                    self.log.display(),
                    tail(&self.log, 15)
                );
            }
            match health(addr, service).await {
                Ok(ServingStatus::Serving) => return Ok(()),
                Ok(other) => last = format!("{other:?}"),
                Err(e) => last = format!("{e:#}"),
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "{} was not SERVING on {addr} after {timeout:?} ({last}); its log: {}\n{}",
                    self.name,
                    self.log.display(),
                    tail(&self.log, 15)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// How the process ended, if it has: its exit status, whether the demo killed it, and how
    /// long it had run.
    pub(crate) fn ended(&mut self) -> Option<(std::process::ExitStatus, bool, Duration)> {
        let status = self.child.try_wait().ok().flatten()?;
        Some((status, self.killed, self.since.elapsed()))
    }

    /// Starts the process again with the same flags (the addresses it first bound), its log
    /// appended to, and waits until it is ready as at first.
    ///
    /// # Errors
    /// As [`Service::start`] and [`Service::wait_serving`].
    pub(crate) async fn restart(&mut self) -> anyhow::Result<()> {
        let started = spawn(&self.spec, &self.name, &self.log, true).await?;
        self.pid = started.pid;
        self.child = started.child;
        self.killed = false;
        self.since = tokio::time::Instant::now();
        if let Some((addr, service)) = self.spec.health.clone() {
            self.wait_serving(addr, &service, self.spec.timeout).await?;
        }
        Ok(())
    }

    /// SIGKILLs the process and reaps it.
    pub(crate) async fn kill(&mut self) {
        self.killed = true;
        let _ = self.child.kill().await;
    }
}

/// Replaces a `127.0.0.1:0` value of `flag` in `args` with the address the process bound.
fn pin(args: &mut [String], flag: &str, bound: Option<&str>) {
    let Some(bound) = bound else { return };
    if let Some(i) = args.iter().position(|a| a == flag)
        && let Some(v) = args.get_mut(i + 1)
        && v.ends_with(":0")
    {
        *v = bound.to_string();
    }
}

/// Starts one process of `spec` as `name`, its stderr into `log` (appended to when `append`).
async fn spawn(spec: &Spec, name: &str, log: &Path, append: bool) -> anyhow::Result<Started> {
    let binary = spec.binary.as_str();
    let exe = std::env::current_exe().context("locating the dovetail executable")?;
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(log)
        .with_context(|| format!("creating the log file {}", log.display()))?;
    let mut cmd = Command::new(&exe);
    cmd.arg0(binary)
        .args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(scrubbed) {
            cmd.env_remove(&key);
        }
    }
    cmd.env("NO_COLOR", "1");
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "info");
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {binary} ({})", exe.display()))?;
    let pid = child.id().unwrap_or(0);
    let stdout = child.stdout.take().context("the child's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut grpc_addr = None;
    let mut metrics_addr = None;
    if spec.announces {
        let wait = async {
            while let Some(line) = lines.next_line().await? {
                let field = |key: &str| {
                    line.split_whitespace()
                        .find_map(|w| w.strip_prefix(key))
                        .map(str::to_string)
                };
                if let Some(addr) = field("grpc=") {
                    return Ok::<_, std::io::Error>(Some((addr, field("metrics="))));
                }
            }
            Ok(None)
        };
        let timeout = spec.timeout;
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(Some((addr, metrics)))) => {
                grpc_addr = Some(addr);
                metrics_addr = metrics.filter(|m| m != "off");
            }
            Ok(Ok(None)) | Ok(Err(_)) => {
                let status = child.wait().await.ok();
                bail!(
                    "{name} ({binary}) exited before it was ready ({}); its log: {}\n{}",
                    status.map_or_else(|| "unknown status".into(), |s| s.to_string()),
                    log.display(),
                    tail(log, 15)
                );
            }
            Err(_) => bail!(
                "{name} ({binary}) was not ready after {timeout:?}; its log: {}\n{}",
                log.display(),
                tail(log, 15)
            ),
        }
    }
    // Keep draining stdout so that the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Started {
        pid,
        grpc_addr,
        metrics_addr,
        child,
    })
}

/// The `grpc.health.v1` status of `service` ("" for the whole server) at `addr`.
async fn health(addr: SocketAddr, service: &str) -> anyhow::Result<ServingStatus> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await?;
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    request.set_timeout(Duration::from_secs(2));
    Ok(HealthClient::new(channel)
        .check(request)
        .await?
        .into_inner()
        .status())
}

/// A free loopback port: bound by the OS, then released for a service that cannot announce the
/// port it binds (the watcher's health port).
///
/// # Errors
/// When no port can be bound.
pub(crate) fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The last `n` lines of a log file (for error messages).
pub(crate) fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
