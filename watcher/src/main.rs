//! `dovetail-watcher`: mirrors the cluster and streams it to the planners. The program is
//! [`watcher::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    watcher::cli::main()
}
