//! A service program's start: flags parsed, configuration loaded and validated before anything
//! else (a bad one exits 64, EX_USAGE, with the message on stderr), then logging set up.

use std::fmt::Display;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::config::{Env, Source};

/// Exit status for invalid flags or configuration (sysexits' `EX_USAGE`).
pub const EXIT_CONFIG: u8 = 64;

/// Parses this process's flags into `F`, loads the configuration with `load` from them and the
/// process environment, and sets up logging (`RUST_LOG`, default `info`, to stderr).
///
/// # Errors
/// The exit code to return: 0 after `--help` or `--version`, 64 after bad flags or a
/// configuration `load` refused (printed as `{program}: invalid configuration: {error}`).
pub fn start<F: Parser, C, E: Display>(
    program: &str,
    load: impl FnOnce(F, &dyn Source) -> Result<C, E>,
) -> Result<C, ExitCode> {
    let flags = match F::try_parse() {
        Ok(f) => f,
        Err(e) => {
            let _ = e.print();
            return Err(if e.use_stderr() {
                ExitCode::from(EXIT_CONFIG)
            } else {
                ExitCode::SUCCESS
            });
        }
    };
    let config = load(flags, &Env).map_err(|e| {
        eprintln!("{program}: invalid configuration: {e}");
        ExitCode::from(EXIT_CONFIG)
    })?;
    init_tracing();
    Ok(config)
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}
