//! `--serve ADDR`: a small web page with the terminal's view — nodes as boxes filled by their
//! pods, cost and lower bound over time, the phase and the actions. One self-contained HTML
//! file (inline CSS, JS and SVG; nothing fetched from elsewhere) polling `/api/state`, the
//! [`Board`](super::view::Board) as JSON.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::view::{self, SharedBoard};

/// The page.
const PAGE: &str = include_str!("web/index.html");

/// Binds `addr`; returns the bound address and the serving future.
///
/// # Errors
/// When the address cannot be bound (the message names it).
pub(crate) async fn bind(
    addr: &str,
    board: SharedBoard,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--serve {addr}: {e}"))?;
    let local = listener.local_addr()?;
    let app = Router::new()
        .route("/", get(page))
        .route("/api/state", get(state))
        .with_state(board);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|v| *v).await;
            })
            .await;
    });
    Ok((local, task))
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn state(State(board): State<SharedBoard>) -> impl IntoResponse {
    let body = {
        let b = view::lock(&board);
        serde_json::to_string(&*b).unwrap_or_else(|_| "{}".into())
    };
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
}
