//! The signals that stop a service: SIGTERM (Kubernetes) and Ctrl-C.

/// Resolves at the first SIGTERM or Ctrl-C.
///
/// # Errors
/// The signal handlers cannot be installed.
pub async fn shutdown() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r?,
    }
    Ok(())
}
