//! A `dovetail-planner` process on 127.0.0.1 with ports chosen by the OS.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A running planner replica.
pub struct PlannerProcess {
    /// The process.
    pub child: Child,
    /// Its gRPC address.
    pub grpc: SocketAddr,
    /// Its metrics address.
    pub metrics: SocketAddr,
}

// === impl PlannerProcess ===

impl PlannerProcess {
    /// Starts `binary` with `args` (plus loopback listen flags) and waits for its
    /// `dovetail-planner listening grpc=… metrics=…` line, which it prints once SERVING.
    ///
    /// # Errors
    /// When it cannot start or exits before it is ready.
    pub async fn start(binary: &Path, args: &[&str]) -> anyhow::Result<Self> {
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("no listening line within 60 s")??
            .context("the planner exited before it was ready")?;
        let mut grpc = None;
        let mut metrics = None;
        for word in line.split_whitespace() {
            if let Some(a) = word.strip_prefix("grpc=") {
                grpc = Some(a.parse()?);
            } else if let Some(a) = word.strip_prefix("metrics=") {
                metrics = Some(a.parse()?);
            }
        }
        let (Some(grpc), Some(metrics)) = (grpc, metrics) else {
            bail!("unexpected first line {line:?}");
        };
        // Keep draining stdout so the process never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child,
            grpc,
            metrics,
        })
    }

    /// `IP:PORT` of its gRPC port.
    pub fn endpoint(&self) -> String {
        self.grpc.to_string()
    }

    /// The health status of `service` ("" for the server), or the error that prevented asking.
    ///
    /// # Errors
    /// When it cannot be reached.
    pub async fn health(&self, service: &str) -> Result<ServingStatus, tonic::Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.grpc))
            .map_err(|e| tonic::Status::internal(e.to_string()))?
            .connect_timeout(Duration::from_secs(2))
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut h = HealthClient::new(channel);
        let mut req = tonic::Request::new(HealthCheckRequest {
            service: service.to_string(),
        });
        req.set_timeout(Duration::from_secs(2));
        Ok(h.check(req).await?.into_inner().status())
    }

    /// The health Watch stream of `service`: the current status, then every change (no polling).
    pub async fn health_watch(
        &self,
        service: &str,
    ) -> Result<tonic::Streaming<tonic_health::pb::HealthCheckResponse>, tonic::Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.grpc))
            .map_err(|e| tonic::Status::internal(e.to_string()))?
            .connect_timeout(Duration::from_secs(2))
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut h = HealthClient::new(channel);
        let req = tonic::Request::new(HealthCheckRequest {
            service: service.to_string(),
        });
        Ok(h.watch(req).await?.into_inner())
    }

    /// Sends SIGTERM.
    ///
    /// # Errors
    /// When `kill` cannot be run.
    pub fn terminate(&self) -> anyhow::Result<()> {
        let pid = self.child.id().context("already exited")?;
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        if !status.success() {
            bail!("kill -TERM {pid} failed");
        }
        Ok(())
    }
}
