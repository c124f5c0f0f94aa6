//! Provider IDs: `aws:///<zone>/<instance-id>`, as `spec.providerID` on Nodes and
//! `status.providerID` on NodeClaims.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A provider ID that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid provider ID {input:?}: expected aws:///<zone>/<instance-id>")]
pub struct ParseProviderIdError {
    /// The text given.
    pub input: String,
}

/// An AWS provider ID.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProviderId {
    zone: String,
    instance_id: String,
}

// === impl ProviderId ===

impl ProviderId {
    /// A provider ID from its parts.
    pub fn new(zone: impl Into<String>, instance_id: impl Into<String>) -> Self {
        Self {
            zone: zone.into(),
            instance_id: instance_id.into(),
        }
    }

    /// The availability zone.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The instance ID.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "aws:///{}/{}", self.zone, self.instance_id)
    }
}

impl FromStr for ProviderId {
    type Err = ParseProviderIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseProviderIdError {
            input: s.to_string(),
        };
        let rest = s.strip_prefix("aws:///").ok_or_else(err)?;
        let (zone, id) = rest.split_once('/').ok_or_else(err)?;
        if zone.is_empty() || id.is_empty() || id.contains('/') || !id.starts_with("i-") {
            return Err(err());
        }
        Ok(Self::new(zone, id))
    }
}

impl TryFrom<String> for ProviderId {
    type Error = ParseProviderIdError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ProviderId> for String {
    fn from(p: ProviderId) -> String {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let p: ProviderId = "aws:///us-east-1a/i-0abc".parse().unwrap();
        assert_eq!(p.zone(), "us-east-1a");
        assert_eq!(p.instance_id(), "i-0abc");
        assert_eq!(p.to_string(), "aws:///us-east-1a/i-0abc");
    }

    #[test]
    fn rejects_malformed_and_names_the_input() {
        for bad in [
            "",
            "aws://us-east-1a/i-1",
            "aws:///us-east-1a",
            "aws:///us-east-1a/x-1",
            "gce:///a/i-1",
        ] {
            let e = bad.parse::<ProviderId>().unwrap_err();
            assert_eq!(e.input, bad);
            assert!(e.to_string().contains(bad));
        }
    }
}
