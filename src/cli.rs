//! Commands of the `dovetail` binary and how their failures map to exit codes.
//!
//! Exit codes: 0 success; 2 bad input (a manifest, catalog file, flag value or path that cannot
//! be used, or input a `--server` rejects as invalid; clap's usage errors use 2 as well); 1 any
//! other failure (e.g. writing the output, a `--server` that cannot be reached, a demo whose
//! system does not start or whose burst is not scheduled).

mod backend;
mod crds;
#[cfg(feature = "demo")]
pub(crate) mod demo;
mod plan;
mod remote;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use thiserror::Error;

pub(crate) use plan::PlanArgs;

/// dovetail: a Karpenter-compatible node autoscaler.
#[derive(Debug, Parser)]
#[command(name = "dovetail", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show which nodes dovetail would launch for the pending pods of some manifests, and which
    /// nodes it would disrupt.
    Plan(PlanArgs),
    /// Print the custom resource definitions (NodePool, NodeClaim, EC2NodeClass) as YAML.
    Crds(crds::CrdsArgs),
    /// Run the whole system on this machine against a simulated cluster and cloud, and watch
    /// it handle a scripted story (a burst, a scale-in, a spot interruption, drift, a killed
    /// planner replica).
    #[cfg(feature = "demo")]
    Demo(demo::DemoArgs),
    /// Not in this build (built without the `demo` feature).
    #[cfg(not(feature = "demo"))]
    #[command(hide = true, disable_help_flag = true)]
    Demo {
        /// Ignored.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Why a command failed.
#[derive(Debug, Error)]
pub(crate) enum CliError {
    /// The manifests could not be read.
    #[error(transparent)]
    Manifests(#[from] planner_manifests::Error),
    /// A flag value or an input other than the manifests is unusable (catalog file, `--now`).
    #[error("{0}")]
    Input(String),
    /// The remote planner (`--server`) could not be reached or failed.
    #[error("remote planner: {0}")]
    Remote(String),
    /// The output could not be written.
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    /// `dovetail demo` could not start the system or play its story.
    #[cfg(feature = "demo")]
    #[error("demo: {0}")]
    Demo(String),
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::Manifests(_) | CliError::Input(_) => 2,
            CliError::Output(_) | CliError::Remote(_) => 1,
            #[cfg(feature = "demo")]
            CliError::Demo(_) => 1,
        }
    }
}

/// Runs the parsed command line; `now` is the current time in Unix seconds (the default of
/// `--now`).
pub(crate) fn run(cli: Cli, now: i64) -> ExitCode {
    let result = match cli.command {
        Command::Plan(args) => plan::run(&args, now),
        Command::Crds(args) => crds::run(&args),
        #[cfg(feature = "demo")]
        Command::Demo(args) => demo::run(&args, now),
        #[cfg(not(feature = "demo"))]
        Command::Demo { .. } => Err(CliError::Input(
            "this dovetail was built without the demo: build it with the `demo` feature \
             (the default: `cargo run -- demo`)"
                .to_owned(),
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`dovetail plan ... | head`) is not a failure.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
