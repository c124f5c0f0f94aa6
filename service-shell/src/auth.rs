//! Authentication of the services' gRPC APIs, both sides: the server's flags and variables
//! ([`AuthFlags`], the same for every server), the choice they make ([`Auth`]: a bearer token,
//! mTLS, or explicitly nothing), the server's check ([`RequireBearer`], an interceptor on the
//! `dovetail.v1` service only, so that health stays open for probes) and the client's
//! interceptor ([`AddBearer`]).

use clap::Args;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::config::{Error, Result, Settings};
use crate::tls::ServerTls;

/// `DOVETAIL_AUTH_TOKEN`: bearer token clients must send.
pub const ENV_AUTH_TOKEN: &str = "DOVETAIL_AUTH_TOKEN";
/// `DOVETAIL_AUTH_TOKEN_FILE`: file holding the bearer token.
pub const ENV_AUTH_TOKEN_FILE: &str = "DOVETAIL_AUTH_TOKEN_FILE";
/// `DOVETAIL_TLS_CERT`: server certificate chain (PEM).
pub const ENV_TLS_CERT: &str = "DOVETAIL_TLS_CERT";
/// `DOVETAIL_TLS_KEY`: server private key (PEM).
pub const ENV_TLS_KEY: &str = "DOVETAIL_TLS_KEY";
/// `DOVETAIL_TLS_CLIENT_CA`: CA that client certificates must chain to (enables mTLS).
pub const ENV_TLS_CLIENT_CA: &str = "DOVETAIL_TLS_CLIENT_CA";
/// `DOVETAIL_INSECURE_NO_AUTH`: `true` to serve without authentication (local use only).
pub const ENV_INSECURE_NO_AUTH: &str = "DOVETAIL_INSECURE_NO_AUTH";

/// A server's authentication flags; each one overrides its environment variable.
#[derive(Debug, Default, Clone, Args)]
pub struct AuthFlags {
    /// Bearer token clients must send [env DOVETAIL_AUTH_TOKEN]
    #[arg(long)]
    pub auth_token: Option<String>,
    /// File holding the bearer token [env DOVETAIL_AUTH_TOKEN_FILE]
    #[arg(long)]
    pub auth_token_file: Option<String>,
    /// Server certificate chain, PEM [env DOVETAIL_TLS_CERT]
    #[arg(long)]
    pub tls_cert: Option<String>,
    /// Server private key, PEM [env DOVETAIL_TLS_KEY]
    #[arg(long)]
    pub tls_key: Option<String>,
    /// CA for client certificates, PEM; enables mTLS [env DOVETAIL_TLS_CLIENT_CA]
    #[arg(long)]
    pub tls_client_ca: Option<String>,
    /// Serve without any authentication (local use only) [env DOVETAIL_INSECURE_NO_AUTH=true]
    #[arg(long)]
    pub insecure_no_auth: bool,
}

/// How clients are authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// A bearer token (possibly on top of mTLS).
    Bearer(String),
    /// Client certificates only.
    MutualTls,
    /// Nothing: `--insecure-no-auth`.
    Disabled,
}

// === impl Auth ===

impl Auth {
    /// Reads the authentication and TLS settings: a token (or token file), TLS, and
    /// `--insecure-no-auth`, which must be chosen explicitly when neither a token nor mTLS is.
    ///
    /// # Errors
    /// A file cannot be read, a token is not printable ASCII, settings contradict each other, or
    /// nothing is chosen.
    pub fn load(flags: AuthFlags, s: &Settings<'_>) -> Result<(Auth, Option<ServerTls>)> {
        let token = match (
            s.get(flags.auth_token, "auth-token", ENV_AUTH_TOKEN),
            s.get(
                flags.auth_token_file,
                "auth-token-file",
                ENV_AUTH_TOKEN_FILE,
            ),
        ) {
            (Some(_), Some(_)) => {
                return Err(Error::Conflict(
                    "set either an auth token or an auth token file, not both".into(),
                ));
            }
            (Some(t), None) => Some(t.value),
            (None, Some(f)) => Some(String::from_utf8_lossy(&f.read()?).trim().to_string()),
            (None, None) => None,
        };
        if let Some(t) = &token
            && (t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(Error::Conflict(
                "the auth token must be non-empty printable ASCII without spaces".into(),
            ));
        }
        let tls = ServerTls::load(
            s.get(flags.tls_cert, "tls-cert", ENV_TLS_CERT),
            s.get(flags.tls_key, "tls-key", ENV_TLS_KEY),
            s.get(flags.tls_client_ca, "tls-client-ca", ENV_TLS_CLIENT_CA),
        )?;
        let insecure = s.switch(flags.insecure_no_auth, ENV_INSECURE_NO_AUTH)?;
        let mtls = tls.as_ref().is_some_and(ServerTls::is_mutual);
        let auth = match (token, mtls, insecure) {
            (Some(_), _, true) | (None, true, true) => {
                return Err(Error::Conflict(
                    "--insecure-no-auth contradicts the configured authentication".into(),
                ));
            }
            (Some(t), _, false) => Auth::Bearer(t),
            (None, true, false) => Auth::MutualTls,
            (None, false, true) => Auth::Disabled,
            (None, false, false) => {
                return Err(Error::Conflict(format!(
                    "no authentication configured: set {ENV_AUTH_TOKEN} (or --auth-token), \
                     {ENV_TLS_CLIENT_CA} with a certificate and key for mTLS, or pass \
                     --insecure-no-auth for local use"
                )));
            }
        };
        Ok((auth, tls))
    }

    /// `bearer`, `mtls` or `disabled`, for the start-up log.
    pub fn kind(&self) -> &'static str {
        match self {
            Auth::Bearer(_) => "bearer",
            Auth::MutualTls => "mtls",
            Auth::Disabled => "disabled",
        }
    }

    /// The server's check: the token when there is one, else every request passes (mTLS is
    /// checked by TLS itself).
    pub fn require(&self) -> RequireBearer {
        RequireBearer::new(match self {
            Auth::Bearer(t) => Some(t.clone()),
            Auth::MutualTls | Auth::Disabled => None,
        })
    }
}

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
    value: Option<MetadataValue<Ascii>>,
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
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn the_check_accepts_only_the_right_token() {
        let mut check = Auth::Bearer("s3cret".into()).require();
        let mut add = AddBearer::new(Some("s3cret")).expect("token");
        let ok = add.call(Request::new(())).expect("added");
        assert!(check.call(ok).is_ok());

        let mut wrong = AddBearer::new(Some("guess")).expect("token");
        let bad = wrong.call(Request::new(())).expect("added");
        let e = check.call(bad).expect_err("wrong token");
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert_eq!(e.message(), "invalid bearer token");
        let mut longer = AddBearer::new(Some("s3cret-and-more")).expect("token");
        let bad = longer.call(Request::new(())).expect("added");
        assert!(check.call(bad).is_err());
        let e = check.call(Request::new(())).expect_err("no token");
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("authorization"));
        assert!(Auth::MutualTls.require().call(Request::new(())).is_ok());
        assert!(Auth::Disabled.require().call(Request::new(())).is_ok());
    }

    #[test]
    fn the_client_refuses_unprintable_tokens() {
        assert!(AddBearer::new(Some("a\nb")).is_err());
        let mut none = AddBearer::new(None).expect("no token");
        let r = none.call(Request::new(())).expect("passes");
        assert!(r.metadata().get("authorization").is_none());
    }

    #[test]
    fn authentication_must_be_chosen_explicitly() {
        let empty = HashMap::new();
        let e = Auth::load(AuthFlags::default(), &Settings::new(&empty)).expect_err("none");
        assert!(e.to_string().contains("--insecure-no-auth"), "{e}");
        let token = HashMap::from([(ENV_AUTH_TOKEN.to_string(), "t0k3n".to_string())]);
        let (auth, tls) = Auth::load(AuthFlags::default(), &Settings::new(&token)).expect("ok");
        assert_eq!(auth, Auth::Bearer("t0k3n".into()));
        assert_eq!(tls, None);
        let flags = AuthFlags {
            insecure_no_auth: true,
            ..AuthFlags::default()
        };
        let e = Auth::load(flags, &Settings::new(&token)).expect_err("contradiction");
        assert!(e.to_string().contains("contradicts"), "{e}");
        let flags = AuthFlags {
            auth_token: Some("two words".into()),
            ..AuthFlags::default()
        };
        let e = Auth::load(flags, &Settings::new(&empty)).expect_err("spaces");
        assert!(e.to_string().contains("printable ASCII"), "{e}");
        let flags = AuthFlags {
            insecure_no_auth: true,
            tls_cert: Some("/nonexistent/cert.pem".into()),
            ..AuthFlags::default()
        };
        let e = Auth::load(flags, &Settings::new(&empty)).expect_err("missing file");
        assert!(e.to_string().contains("/nonexistent/cert.pem"), "{e}");
    }
}
