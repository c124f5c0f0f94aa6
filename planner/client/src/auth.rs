//! The client side of bearer-token authentication: [`AddBearer`] adds
//! `authorization: Bearer <token>` to every call. The planner service checks it.

use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::{Request, Status};

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
