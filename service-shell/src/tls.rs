//! TLS of the services: the server's certificate and, for mTLS, the CA client certificates
//! must chain to ([`ServerTls`]); the client's CA, certificate and server name ([`ClientTls`]).
//! The PEM files are read once at start-up, so a bad path is a configuration error.

#[cfg(feature = "server")]
use tonic::transport::ServerTlsConfig;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::config::{Error, Input, Result};

/// A server's TLS material.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTls {
    /// Certificate chain, PEM.
    pub cert: Vec<u8>,
    /// Private key, PEM.
    pub key: Vec<u8>,
    /// Client CA, PEM; set means mTLS.
    pub client_ca: Option<Vec<u8>>,
}

// === impl ServerTls ===

impl ServerTls {
    /// Reads the files `cert`, `key` and `client_ca` name; `None` when none is set.
    ///
    /// # Errors
    /// A file cannot be read, or only one of certificate and key is set (or a client CA without
    /// them).
    pub fn load(
        cert: Option<Input>,
        key: Option<Input>,
        client_ca: Option<Input>,
    ) -> Result<Option<Self>> {
        let cert = cert.map(|i| i.read()).transpose()?;
        let key = key.map(|i| i.read()).transpose()?;
        let client_ca = client_ca.map(|i| i.read()).transpose()?;
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(Self {
                cert,
                key,
                client_ca,
            })),
            (None, None) if client_ca.is_none() => Ok(None),
            _ => Err(Error::Conflict(
                "TLS needs both a certificate and a key (and a client CA only with them)".into(),
            )),
        }
    }

    /// Whether clients must present a certificate.
    pub fn is_mutual(&self) -> bool {
        self.client_ca.is_some()
    }

    /// The tonic server configuration.
    #[cfg(feature = "server")]
    pub fn config(&self) -> ServerTlsConfig {
        let mut t = ServerTlsConfig::new().identity(Identity::from_pem(&self.cert, &self.key));
        if let Some(ca) = &self.client_ca {
            t = t.client_ca_root(Certificate::from_pem(ca));
        }
        t
    }
}

/// A client's TLS settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// CA that the servers' certificates chain to, PEM.
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key for mTLS, PEM.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Name to verify the server certificate against (default: the endpoint's host).
    pub domain: Option<String>,
}

// === impl ClientTls ===

impl ClientTls {
    /// Reads the files `ca`, `cert` and `key` name; `None` when no setting is given (plaintext).
    ///
    /// # Errors
    /// A file cannot be read, or a certificate is given without its key or a key without its
    /// certificate.
    pub fn load(
        ca: Option<Input>,
        cert: Option<Input>,
        key: Option<Input>,
        domain: Option<Input>,
    ) -> Result<Option<Self>> {
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((c.read()?, k.read()?)),
            (None, None) => None,
            (Some(c), None) => {
                return Err(c.invalid("a client certificate needs its key"));
            }
            (None, Some(k)) => {
                return Err(k.invalid("a client key needs its certificate"));
            }
        };
        let ca = ca.map(|i| i.read()).transpose()?;
        let domain = domain.map(|i| i.value);
        if ca.is_none() && identity.is_none() && domain.is_none() {
            return Ok(None);
        }
        Ok(Some(Self {
            ca,
            identity,
            domain,
        }))
    }

    /// The tonic client configuration for a server at `host` (unless a domain is set).
    pub fn config(&self, host: &str) -> ClientTlsConfig {
        let mut t =
            ClientTlsConfig::new().domain_name(self.domain.clone().unwrap_or_else(|| host.into()));
        if let Some(ca) = &self.ca {
            t = t.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &self.identity {
            t = t.identity(Identity::from_pem(cert, key));
        }
        t
    }
}
