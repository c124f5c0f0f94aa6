//! Shared helpers for the integration tests: dovetail binaries as real processes.
//!
//! Binaries of other packages are not built by `cargo test -p integration-tests`, so
//! [`binary`] builds them with `cargo test --workspace --no-run` (a no-op after `cargo nextest
//! run --workspace`) into the same target directory and profile as the running test (found from
//! the test executable's path), or
//! takes `DOVETAIL_<NAME>_BIN` when set (e.g. `DOVETAIL_PLANNER_BIN=/usr/local/bin/dovetail-planner`
//! for a prebuilt binary).
//!
//! [`system::System`] runs the whole system (watcher, planners, actuator as processes; Postgres;
//! moto_server; the simulated cluster) for the end-to-end tests in `tests/e2e.rs`; its Postgres
//! comes from `test_support::postgres`.

pub mod burst;
pub mod convergence;
pub mod planner_process;
pub mod process;
pub mod system;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Context, bail};

/// The path of binary `bin` of package `package` (in the test's own target directory and
/// profile), built if needed.
///
/// The build is `cargo test --workspace --no-run` (once per test process): the same command, and
/// so the same feature set, as `cargo nextest run --workspace`, which makes it a no-op in CI and
/// never compiles the dependencies a second time with other features (a `cargo build -p actuator`
/// would: its tokio has no `test-util`, so everything above tokio, the AWS SDK included, would be
/// built again).
///
/// # Errors
/// When the test executable's location is unexpected or the build fails.
pub fn binary(package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    let var = format!(
        "DOVETAIL_{}_BIN",
        bin.trim_start_matches("dovetail-")
            .to_uppercase()
            .replace('-', "_")
    );
    if let Some(p) = std::env::var_os(&var) {
        return Ok(PathBuf::from(p));
    }
    // <target>/<profile>/deps/<test-binary>
    let exe = std::env::current_exe().context("locating the test executable")?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("the test executable is not in <target>/<profile>/deps")?;
    let target_dir = profile_dir
        .parent()
        .context("the profile directory has no parent")?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .context("the profile directory has no name")?;
    static BUILT: Mutex<bool> = Mutex::new(false);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !*built {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["test", "--quiet", "--workspace", "--no-run"])
            .env("CARGO_TARGET_DIR", target_dir);
        match profile {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            other => {
                cmd.args(["--profile", other]);
            }
        }
        let status = cmd
            .status()
            .with_context(|| format!("running cargo test --no-run for {bin}"))?;
        if !status.success() {
            bail!("cargo test --workspace --no-run (for {package}'s {bin}) failed with {status}");
        }
        *built = true;
    }
    let path = profile_dir.join(bin);
    if !path.exists() {
        bail!("{} was not built", path.display());
    }
    Ok(path)
}
