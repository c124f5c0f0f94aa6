//! The `dovetail` command line: wiring only. The commands live in [`cli`].

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // `dovetail demo` runs the services as processes of this executable, named by argv[0].
    #[cfg(feature = "demo")]
    if let Some(code) = cli::demo::service_main() {
        return code;
    }
    let args = cli::Cli::parse();
    cli::run(args, now())
}

/// The one place the command line reads the clock: the default of `--now`.
#[allow(clippy::disallowed_methods)] // The CLI's clock module: `now` is passed on as data.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
