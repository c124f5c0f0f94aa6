//! Shared helpers for the integration tests: dovetail binaries as real processes.
//!
//! Binaries of other packages are not built by `cargo test -p integration-tests`, so
//! [`binary`] builds the one it needs with `cargo build -p <package> --bin <name>` into the same
//! target directory and profile as the running test (found from the test executable's path), or
//! takes `DOVETAIL_<NAME>_BIN` when set (e.g. `DOVETAIL_PLANNER_BIN=/usr/local/bin/dovetail-planner`
//! for a prebuilt binary).

pub mod planner_process;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

/// The path of binary `bin` of package `package`, built if needed.
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
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", package, "--bin", bin])
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
        .with_context(|| format!("running cargo build for {bin}"))?;
    if !status.success() {
        bail!("cargo build -p {package} --bin {bin} failed with {status}");
    }
    let path = profile_dir.join(bin);
    if !path.exists() {
        bail!("{} was not built", path.display());
    }
    Ok(path)
}
