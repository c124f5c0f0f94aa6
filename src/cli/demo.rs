//! `dovetail demo`: the whole system on one machine, from nothing but this executable.
//!
//! The simulator (a Kubernetes API server with a kubelet, a kube-scheduler and workload
//! controllers, and a simulated cloud) runs in this process; the real services run as separate
//! processes on loopback ports, talking real gRPC: one `dovetail-actuator` (the embedded SQLite
//! ledger in a temporary folder), two `dovetail-planner` replicas and one `dovetail-watcher`
//! (see [`services`] for how one executable runs all of them), each restarted when it ends
//! as a Deployment's pod would be ([`supervise`]). Only the cloud and cluster endpoints differ
//! from production. Then [`story`] plays the scenario (`examples/demo/` or
//! `--scenario DIR`) while [`cluster::observe`] reads the cluster for the terminal and the web
//! page ([`web`]).

mod cluster;
mod scenario;
mod services;
mod story;
mod supervise;
mod view;
mod web;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

// The runtime's monotonic clock (clippy.toml keeps std's for clock modules).
use tokio::time::Instant;

use anyhow::Context;
use clap::Args;
use tokio::sync::watch;

pub(crate) use services::service_main;

use self::scenario::Scenario;
use self::services::Service;
use self::view::SharedBoard;
use super::CliError;

/// Flags of `dovetail demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Play your own manifests (a folder of NodePools, EC2NodeClasses, Deployments, Pods...)
    /// instead of the built-in story (examples/demo)
    #[arg(long, value_name = "DIR")]
    scenario: Option<PathBuf>,
    /// Compress time N-fold: simulated delays (instance start, node registration, interruption
    /// notice) and the phases' waits are divided by N
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_speed)]
    speed: f64,
    /// Also serve a web page with the same view on ADDR (e.g. 127.0.0.1:8080)
    #[arg(long, value_name = "ADDR")]
    serve: Option<String>,
    /// Write the simulated cluster's kubeconfig here (default: in the demo's temporary folder)
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// After the story, keep everything running (for kubectl and the page) until Ctrl-C
    #[arg(long)]
    keep_running: bool,
    /// Also write the summary as JSON to PATH
    #[arg(long, value_name = "PATH")]
    summary_json: Option<PathBuf>,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number (e.g. 1, 4, 0.5)"))?;
    if !(v.is_finite() && v > 0.0 && v <= 100.0) {
        return Err(format!(
            "{s} is out of range: between 0 (exclusive) and 100"
        ));
    }
    Ok(v)
}

/// Runs the demo.
///
/// # Errors
/// [`CliError::Input`] / [`CliError::Manifests`] for a bad flag or scenario (exit 2), before
/// anything starts; [`CliError::Remote`] when the system cannot be started or the story fails.
pub(crate) fn run(args: &DemoArgs, now: i64) -> Result<(), CliError> {
    let scenario = match &args.scenario {
        Some(dir) => Scenario::from_dir(dir)?,
        None => Scenario::builtin()?,
    };
    if let Some(addr) = &args.serve {
        addr.parse::<std::net::SocketAddr>().map_err(|e| {
            CliError::Input(format!(
                "--serve {addr}: {e} (give HOST:PORT, e.g. 127.0.0.1:8080)"
            ))
        })?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Demo(format!("starting the async runtime: {e}")))?;
    runtime
        .block_on(demo(args, scenario, now))
        .map_err(|e| CliError::Demo(format!("{e:#}")))
}

/// Formats a duration as a Go duration in milliseconds (`1500ms`), as the services' flags take.
fn go(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// The temporary folder of one demo: kubeconfig, ledger, logs.
struct Workdir(PathBuf);

impl Workdir {
    fn create() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("dovetail-demo-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs"))
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }
}

struct Running {
    actuator: supervise::Shared,
    planners: Vec<supervise::Shared>,
    planner_metrics: Vec<Option<String>>,
    watcher: supervise::Shared,
}

impl Running {
    fn all(&self) -> Vec<supervise::Shared> {
        let mut all = vec![self.actuator.clone(), self.watcher.clone()];
        all.extend(self.planners.iter().cloned());
        all
    }

    async fn stop(&mut self) {
        self.watcher.lock().await.kill().await;
        for p in &self.planners {
            p.lock().await.kill().await;
        }
        self.actuator.lock().await.kill().await;
    }
}

async fn start_services(
    sim: &simulator::Simulation,
    kubeconfig: &Path,
    work: &Path,
    speed: f64,
) -> anyhow::Result<Running> {
    let logs = work.join("logs");
    let ready = Duration::from_secs(60);
    let kc = kubeconfig.display().to_string();
    let parent = [(services::PARENT_PID, std::process::id().to_string())];
    let scaled = |secs: f64| Duration::from_secs_f64(secs / speed);
    let mut actuator_args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "off",
        "--insecure-no-auth",
        "--instance",
        "actuator",
        "--drain-delay",
        "0s",
        "--poll-interval",
        "200ms",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    actuator_args.extend([
        "--ledger".into(),
        format!("sqlite://{}", work.join("ledger.db").display()),
        "--kubeconfig".into(),
        kc.clone(),
        "--lifecycle-interval".into(),
        go(scaled(1.0).max(Duration::from_millis(200))),
        "--registration-timeout".into(),
        "5m".into(),
        // Karpenter re-validates a disruption 15 s after deciding it; the demo's clock runs
        // faster than a cluster's (nodes boot in seconds), so its wait is shorter too.
        "--disruption-confirm-after".into(),
        go(scaled(4.0).max(Duration::from_secs(1))),
    ]);
    actuator_args.extend(cloud_args(sim));
    let mut actuator_env = cloud_env();
    actuator_env.extend(parent.iter().cloned());
    let actuator = Service::start(
        "dovetail-actuator",
        "actuator",
        &actuator_args,
        &actuator_env,
        &logs,
        true,
        ready,
    )
    .await?;
    let actuator_addr = actuator
        .grpc_addr
        .clone()
        .context("the actuator announced no address")?;
    let mut planners = Vec::new();
    let mut planner_metrics = Vec::new();
    for i in 0..2 {
        let name = format!("planner-{i}");
        let args: Vec<String> = vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--metrics-listen".into(),
            "127.0.0.1:0".into(),
            "--insecure-no-auth".into(),
            "--instance".into(),
            name.clone(),
            "--region".into(),
            REGION.into(),
            "--drain-delay".into(),
            "0s".into(),
            "--actuator-endpoint".into(),
            format!("http://{actuator_addr}"),
        ];
        let p = Service::start(
            "dovetail-planner",
            &name,
            &args,
            &parent,
            &logs,
            true,
            ready,
        )
        .await?;
        planner_metrics.push(p.metrics_addr.clone());
        planners.push(p);
    }
    let planner_list = planners
        .iter()
        .filter_map(|p| p.grpc_addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    // The watcher announces no address: its health port is chosen here (the planners have bound
    // theirs by now, so it cannot be one of them).
    let health = std::net::SocketAddr::from((
        [127, 0, 0, 1],
        services::free_port().context("a port for the watcher's health")?,
    ));
    let watcher_args: Vec<String> = vec![
        "--kubeconfig".into(),
        kc,
        "--planner".into(),
        planner_list,
        "--leader-elect".into(),
        "false".into(),
        "--instance".into(),
        "watcher".into(),
        "--region".into(),
        REGION.into(),
        "--metrics-listen".into(),
        "127.0.0.1:0".into(),
        "--health-listen".into(),
        health.to_string(),
        // Windows of at least 1 s, Karpenter's batch idle duration.
        "--batch-idle-duration".into(),
        go(scaled(1.0).max(Duration::from_secs(1))),
        "--batch-max-duration".into(),
        go(scaled(3.0).max(Duration::from_secs(1))),
        "--consolidation-interval".into(),
        go(scaled(2.0).max(Duration::from_secs(1))),
    ];
    let watcher = Service::start(
        "dovetail-watcher",
        "watcher",
        &watcher_args,
        &parent,
        &logs,
        false,
        ready,
    )
    .await?;
    let mut watcher = watcher;
    watcher
        .wait_serving(health, watcher::WATCHER_SERVICE, ready)
        .await?;
    let shared = |s: Service| Arc::new(tokio::sync::Mutex::new(s));
    Ok(Running {
        actuator: shared(actuator),
        planners: planners.into_iter().map(shared).collect(),
        planner_metrics,
        watcher: shared(watcher),
    })
}

/// The cluster name the demo's cloud is tagged for: the simulated account's subnets and
/// security groups carry `karpenter.sh/discovery=dovetail-demo`, which the EC2NodeClass of
/// `examples/demo/` (and of any `--scenario`) selects them by.
pub(crate) const CLUSTER_NAME: &str = "dovetail-demo";

/// The region of the simulated cloud and the built-in catalog.
const REGION: &str = "us-east-1";

/// The actuator's cloud flags: the production AWS adapter (`--cloud aws`, the real AWS SDK)
/// pointed at the simulator's EC2/SSM/SQS endpoint, with AWS's public SSM prefix for the AMI
/// aliases (the simulator serves `/aws/service/...`), and the simulator's interruption queue.
fn cloud_args(sim: &simulator::Simulation) -> Vec<String> {
    [
        "--cloud",
        "aws",
        "--aws-endpoint",
        &sim.aws_endpoint(),
        "--aws-region",
        REGION,
        "--cluster-name",
        CLUSTER_NAME,
        "--cluster-endpoint",
        sim.api_url(),
        "--kubernetes-version",
        "1.33",
        // The simulator puts every event of its cloud on this SQS queue as EventBridge
        // delivers them: spot interruption warnings are drained and replaced from it.
        "--interruption-queue",
        simulator::aws::DEFAULT_INTERRUPTION_QUEUE,
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect()
}

/// The actuator's AWS credentials: dummies (the simulator checks no signature), so that the
/// SDK's default chain never looks further (profiles, IMDS). Every `AWS_*` of the demo's own
/// environment is scrubbed first ([`services`]).
fn cloud_env() -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", "dovetail-demo".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "dovetail-demo".to_string()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
    ]
}

async fn demo(args: &DemoArgs, scenario: Scenario, now: i64) -> anyhow::Result<()> {
    let started = Instant::now();
    let speed = args.speed;
    let tty = std::io::stdout().is_terminal();
    let work = Workdir::create()?;
    let scaled = |secs: f64| Duration::from_secs_f64(secs / speed);

    let sim = simulator::Simulation::start(simulator::Config {
        cloud: simulator::cloud::CloudConfig {
            pending_for: scaled(1.0),
            shutting_down_for: scaled(1.0),
            // Two minutes on EC2; the demo's instances boot in seconds, so its notice is short
            // too (still longer than a drain and a replacement take here).
            interruption_notice: scaled(30.0),
            ..Default::default()
        },
        kubelet: simulator::controllers::kubelet::KubeletConfig {
            register_after: scaled(1.5),
            ready_after: scaled(0.5),
        },
        aws: simulator::aws::AwsConfig {
            cluster: CLUSTER_NAME.into(),
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .context("starting the simulated cluster")?;
    let kubeconfig = args
        .kubeconfig
        .clone()
        .unwrap_or_else(|| work.0.join("kubeconfig"));
    std::fs::write(&kubeconfig, sim.kubeconfig())
        .with_context(|| format!("--kubeconfig {}: writing", kubeconfig.display()))?;
    println!("dovetail demo: {} (speed {speed}x)", scenario.origin);
    println!(
        "kubeconfig: {}   (kubectl --kubeconfig {} get nodes,pods -A)",
        kubeconfig.display(),
        kubeconfig.display()
    );
    println!("logs: {}", work.0.join("logs").display());

    let board: SharedBoard = Arc::default();
    {
        let mut b = view::lock(&board);
        b.scenario = scenario.origin.clone();
        b.kubeconfig = kubeconfig.display().to_string();
    }
    let (stop, stopped) = watch::channel(false);
    let web = match &args.serve {
        Some(addr) => {
            let (local, task) = web::bind(addr, board.clone(), stopped.clone()).await?;
            println!("web page: http://{local}/");
            Some(task)
        }
        None => None,
    };
    let _ = std::io::stdout().flush();

    let mut running = start_services(&sim, &kubeconfig, &work.0, speed).await?;
    {
        let actuator = running.actuator.lock().await;
        let watcher = running.watcher.lock().await;
        let mut planners = Vec::new();
        for p in &running.planners {
            let p = p.lock().await;
            planners.push(format!(
                "{} {} (pid {})",
                p.name,
                p.grpc_addr.as_deref().unwrap_or("?"),
                p.pid
            ));
        }
        println!(
            "services: actuator {} (pid {}), {}, watcher (pid {})",
            actuator.grpc_addr.as_deref().unwrap_or("?"),
            actuator.pid,
            planners.join(", "),
            watcher.pid
        );
    }
    // Each service is restarted when it ends, as a Deployment's pod would be.
    let crashes = Arc::new(supervise::Crashes::default());
    let supervisors: Vec<_> = running
        .all()
        .into_iter()
        .map(|s| {
            tokio::spawn(supervise::supervise(
                s,
                board.clone(),
                started,
                crashes.clone(),
                stopped.clone(),
            ))
        })
        .collect();

    let client = sim
        .kube_client()
        .context("a client for the simulated API")?;
    let catalog =
        Arc::new(planner::catalog::aws::builtin(REGION).map_err(|e| anyhow::anyhow!("{e}"))?);
    let scenario = Arc::new(scenario);
    let observer = tokio::spawn(cluster::observe(
        client.clone(),
        board.clone(),
        scenario.clone(),
        catalog,
        started,
        now,
        Duration::from_millis(500),
        stopped.clone(),
    ));
    let terminal = tokio::spawn(terminal(board.clone(), tty, stopped.clone()));

    let mut stage = story::Stage {
        client,
        board: board.clone(),
        scenario: &scenario,
        sim: &sim,
        planners: &running.planners,
        planner_metrics: running.planner_metrics.clone(),
        speed,
        started,
    };
    let played = tokio::select! {
        r = story::play(&mut stage) => Some(r),
        _ = shutdown_signal() => None,
    };
    // One last look before the summary.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let played_out = played.is_some();
    let crashed = crashes.all();
    let result = match played {
        None => {
            println!("stopped (signal) before the end of the story");
            Ok(())
        }
        Some(Err(e)) => Err(e),
        Some(Ok(reports)) => {
            let (frame, actions) = {
                let b = view::lock(&board);
                (b.frame.clone(), b.unprinted.len() + b.actions.len())
            };
            let summary = story::summary(
                &reports,
                &frame,
                actions,
                &scenario.origin,
                speed,
                started.elapsed().as_secs_f64(),
            );
            {
                let mut b = view::lock(&board);
                b.summary = Some(summary.clone());
                b.finished = true;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            print_summary(&reports, &frame, started.elapsed().as_secs_f64());
            if let Some(path) = &args.summary_json {
                std::fs::write(
                    path,
                    serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n",
                )
                .with_context(|| format!("--summary-json {}: writing", path.display()))?;
            }
            let burst_ok = reports
                .first()
                .is_some_and(|r| r.outcome == story::Outcome::Done);
            if !crashed.is_empty() {
                Err(anyhow::anyhow!(
                    "a service crashed during the story:\n{}",
                    crashed.join("\n")
                ))
            } else if burst_ok {
                Ok(())
            } else {
                Err(anyhow::anyhow!(
                    "the burst was not fully scheduled; see the logs in {}",
                    work.0.join("logs").display()
                ))
            }
        }
    };
    if played_out && result.is_ok() && args.keep_running {
        println!("keeping the cluster and the services up; Ctrl-C to stop");
        shutdown_signal().await;
    }
    let _ = stop.send(true);
    for s in supervisors {
        let _ = s.await;
    }
    let _ = observer.await;
    let _ = terminal.await;
    if let Some(w) = web {
        let _ = w.await;
    }
    running.stop().await;
    sim.shutdown().await;
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&work.0);
    }
    result
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Prints the board: on a terminal, actions scroll above a status block redrawn in place; to
/// a pipe or file, plain lines (each action, and a status line when the phase changes and every
/// few seconds).
async fn terminal(board: SharedBoard, tty: bool, mut stop: watch::Receiver<bool>) {
    let mut block_lines = 0usize;
    let mut last_phase = 0usize;
    let mut last_status = Instant::now();
    loop {
        let stopping = *stop.borrow();
        let mut out = String::new();
        {
            let mut b = view::lock(&board);
            let actions = std::mem::take(&mut b.unprinted);
            if tty && block_lines > 0 {
                out.push_str(&format!("\x1b[{block_lines}A\x1b[J"));
            }
            for a in &actions {
                out.push_str(&format!("{:>6.1}s  {}\n", a.t, a.text));
            }
            if tty {
                if !stopping && !b.finished {
                    let block = view::render_block(&b);
                    block_lines = block.lines().count();
                    out.push_str(&block);
                } else {
                    block_lines = 0;
                }
            } else if b.phase.index != last_phase || last_status.elapsed() >= Duration::from_secs(5)
            {
                last_phase = b.phase.index;
                last_status = Instant::now();
                let f = &b.frame;
                out.push_str(&format!(
                    "{:>6.1}s  == phase {}/{} {} {} {:.0}%: {} pending, {} bound, {} nodes, cost ${:.3}/h, lower bound {}\n",
                    f.t,
                    b.phase.index,
                    b.phase.count,
                    b.phase.name,
                    view::bar(b.phase.progress, 20),
                    b.phase.progress * 100.0,
                    f.pods_pending,
                    f.pods_bound,
                    f.nodes.len(),
                    f.cost_per_hour,
                    f.lower_bound_per_hour
                        .map_or_else(|| "…".into(), |v| format!("${v:.3}/h"))
                ));
            }
        }
        if !out.is_empty() {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(out.as_bytes());
            let _ = stdout.flush();
        }
        if stopping {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(if tty { 250 } else { 500 })) => {}
            _ = stop.changed() => {}
        }
    }
}

fn print_summary(reports: &[story::PhaseReport], frame: &view::Frame, seconds: f64) {
    let mut s = String::new();
    s.push_str(&format!("\n== summary ({seconds:.1}s)\n"));
    for r in reports {
        let mark = match r.outcome {
            story::Outcome::Done => "done",
            story::Outcome::NotReached => "NOT REACHED",
            story::Outcome::Skipped => "skipped",
        };
        s.push_str(&format!(
            "  {:<13} {:<11} {:>5.1}s  {}\n",
            r.name, mark, r.seconds, r.detail
        ));
    }
    let [types, zones, caps] = frame.counts();
    let fmt = |m: &std::collections::BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    s.push_str(&format!(
        "  pods: {} bound, {} pending of {}\n  nodes: {} ({})\n  zones: {}\n  capacity: {}\n  cost: ${:.3}/h, lower bound {}\n",
        frame.pods_bound,
        frame.pods_pending,
        frame.pods_total,
        frame.nodes.len(),
        fmt(&types),
        fmt(&zones),
        fmt(&caps),
        frame.cost_per_hour,
        frame
            .lower_bound_per_hour
            .map_or_else(|| "not computed".into(), |v| format!("${v:.3}/h")),
    ));
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(s.as_bytes());
    let _ = stdout.flush();
}
