//! `dovetail-planner`: the planner as a gRPC service. The program is [`planner_service::cli`];
//! this file only chooses the allocator.

use std::process::ExitCode;

/// jemalloc instead of glibc malloc: after a heavy request glibc kept the freed memory (a
/// 30,000-pod plan left the process at 160 MiB for good, from 26 MiB idle); jemalloc with its
/// background thread purges freed pages within seconds, even when no further request comes.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    planner_service::cli::main()
}
