//! Bearer-token authentication of the Actuator service: a tonic interceptor on `Actuator` only
//! (health stays open for probes). mTLS is the other option and lives in the server's TLS
//! config. The same check as the planner's `auth.rs`, copied rather than shared: the actuator
//! must not depend on the planner (a tiny shared auth module in `common` would remove the copy).

use tonic::service::Interceptor;
use tonic::{Request, Status};

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
        let mut ok = Request::new(());
        ok.metadata_mut()
            .insert("authorization", "Bearer s3cret".parse().expect("header"));
        assert!(check.call(ok).is_ok());
        let mut bad = Request::new(());
        bad.metadata_mut()
            .insert("authorization", "Bearer guess".parse().expect("header"));
        assert_eq!(
            check.call(bad).expect_err("wrong").code(),
            tonic::Code::Unauthenticated
        );
        let e = check.call(Request::new(())).expect_err("none");
        assert!(e.message().contains("authorization"));
        assert!(RequireBearer::new(None).call(Request::new(())).is_ok());
    }
}
