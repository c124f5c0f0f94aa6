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

/// The body of `GET /metrics` at `addr` (Prometheus text), over a plain TCP connection: the
/// tests need no HTTP client.
///
/// # Errors
/// When the endpoint cannot be reached or read.
pub async fn scrape(addr: impl tokio::net::ToSocketAddrs) -> io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n")
        .await?;
    let mut response = String::new();
    s.read_to_string(&mut response).await?;
    Ok(match response.split_once("\r\n\r\n") {
        Some((_, body)) => body.to_string(),
        None => response,
    })
}

/// The value of the sample `series` (its exact text, labels included) in Prometheus text.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
