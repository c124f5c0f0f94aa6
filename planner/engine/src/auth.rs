//! Bearer-token authentication for dovetail's gRPC services, both sides.
//!
//! The server side is a tonic interceptor ([`RequireBearer`]) on the services that need it
//! (health stays open for probes); the client side ([`AddBearer`]) adds the header. mTLS is the
//! other option and lives in the server's TLS config, not here.

use tonic::metadata::MetadataValue;
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

/// Adds `authorization: Bearer <token>` to every request when a token is set.
#[derive(Clone, Default)]
pub struct AddBearer {
    value: Option<MetadataValue<tonic::metadata::Ascii>>,
}

// === impl AddBearer ===

impl AddBearer {
    /// Adds `token`, if any.
    ///
    /// # Errors
    /// When the token is not a valid header value (non-ASCII or control characters).
    pub fn new(token: Option<&str>) -> Result<Self, InvalidToken> {
        let value = token
            .map(|t| format!("Bearer {t}").parse().map_err(|_| InvalidToken))
            .transpose()?;
        Ok(Self { value })
    }
}

impl Interceptor for AddBearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.value {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

/// A token that cannot be sent as a header value.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the bearer token must be printable ASCII")]
pub struct InvalidToken;

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
