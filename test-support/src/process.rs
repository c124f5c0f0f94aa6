//! Processes and ports for tests that run programs beside them.

use std::io;

/// A loopback port that was free when asked (the listener that found it is closed again).
///
/// # Errors
/// When no port can be bound.
pub fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
