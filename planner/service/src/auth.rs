//! Bearer-token authentication for dovetail's gRPC services, both sides.
//!
//! The server side is a tonic interceptor ([`RequireBearer`]) on the services that need it
//! (health stays open for probes); the client side ([`AddBearer`], from `planner-client`, which
//! the watcher shares) adds the header. mTLS is the
//! other option and lives in the server's TLS config, not here.

use tonic::service::Interceptor;
use tonic::{Request, Status};

pub use planner_client::auth::{AddBearer, InvalidToken};

/// Rejects requests without `authorization: Bearer <token>` with UNAUTHENTICATED.
#[derive(Clone)]
pub struct RequireBearer {
    expected: Option<Vec<u8>>,
}

// === impl RequireBearer ===

impl RequireBearer {
    /// Requires `token`; `None` lets every request through (auth disabled or done by mTLS).
    pub fn new(token: Option<String>) -> Self {
        Self {
            expected: token.map(|t| format!("Bearer {t}").into_bytes()),
        }
    }
}

impl Interceptor for RequireBearer {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.expected else {
            return Ok(request);
        };
        match request.metadata().get("authorization") {
            Some(got) if constant_time_eq(got.as_bytes(), expected) => Ok(request),
            Some(_) => Err(Status::unauthenticated("invalid bearer token")),
            None => Err(Status::unauthenticated(
                "missing \"authorization: Bearer <token>\" metadata",
            )),
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_right_token() {
        let mut check = RequireBearer::new(Some("s3cret".into()));
        let mut add = AddBearer::new(Some("s3cret")).expect("token");
        let ok = add.call(Request::new(())).expect("added");
        assert!(check.call(ok).is_ok());

        let mut wrong = AddBearer::new(Some("guess")).expect("token");
        let bad = wrong.call(Request::new(())).expect("added");
        let e = check.call(bad).expect_err("wrong token");
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        let e = check.call(Request::new(())).expect_err("no token");
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("authorization"));
    }

    #[test]
    fn rejects_unprintable_tokens() {
        assert!(AddBearer::new(Some("a\nb")).is_err());
    }
}
