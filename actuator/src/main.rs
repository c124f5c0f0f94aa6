//! `dovetail-actuator`: the actuator as a gRPC service. The program is [`actuator::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    actuator::cli::main()
}
