//! The one place AWS errors become [`cloud::Error`]s: SDK errors by code and HTTP status, and
//! CreateFleet's per-override errors (which come back in a successful response).
//!
//! The mapping, as Karpenter's `pkg/errors` does it:
//! - capacity codes (`InsufficientInstanceCapacity`, `UnfulfillableCapacity`,
//!   `MaxSpotInstanceCountExceeded`, `VcpuLimitExceeded`, ...) → `InsufficientCapacity` with the
//!   offerings that failed;
//! - `RequestLimitExceeded` / `Throttling` → `Throttled`;
//! - `*.NotFound` of an instance → `NotFound`;
//! - `InvalidParameter*`, `Invalid*`, `MissingParameter`, other 4xx → `InvalidRequest`;
//! - 5xx, timeouts, connection failures → `Unavailable`.

use std::time::Duration;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use cloud::{Error, OfferingKey};

/// How long a throttled caller waits before retrying when AWS gives no hint.
pub const THROTTLE_BACKOFF: Duration = Duration::from_secs(1);

/// Error codes that mean "no capacity for this offering": try another one.
const CAPACITY_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacityOnHost",
    "UnfulfillableCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "InsufficientFreeAddressesInSubnet",
    "ReservationCapacityExceeded",
    "SpotMaxPriceTooLow",
];

/// Error codes of throttling.
const THROTTLE_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "TooManyRequestsException",
];

/// True for a code that means the offering has no capacity.
pub fn is_capacity_code(code: &str) -> bool {
    CAPACITY_CODES.contains(&code)
}

/// Maps an AWS error code, HTTP status and message to a [`cloud::Error`]. `what` names the call
/// and its input (`DescribeInstances i-0abc`), so messages say what failed; `offerings` are the
/// offerings a launch tried (for capacity errors).
pub fn classify(
    what: &str,
    code: Option<&str>,
    status: Option<u16>,
    message: Option<&str>,
    offerings: &[OfferingKey],
) -> Error {
    let code_str = code.unwrap_or("");
    let detail = format!(
        "{what}: {}{}",
        if code_str.is_empty() {
            "error"
        } else {
            code_str
        },
        message.map(|m| format!(": {m}")).unwrap_or_default()
    );
    if is_capacity_code(code_str) {
        return Error::InsufficientCapacity {
            offerings: offerings.to_vec(),
        };
    }
    if THROTTLE_CODES.contains(&code_str) || status == Some(429) {
        return Error::Throttled {
            retry_after: THROTTLE_BACKOFF,
        };
    }
    if code_str.ends_with(".NotFound") && code_str.starts_with("InvalidInstanceID") {
        return Error::NotFound {
            provider_id: what.to_string(),
        };
    }
    if matches!(status, Some(s) if s >= 500)
        || matches!(
            code_str,
            "InternalError" | "InternalFailure" | "ServiceUnavailable" | "Unavailable"
        )
    {
        return Error::Unavailable { message: detail };
    }
    if code_str.starts_with("Invalid")
        || code_str.starts_with("MissingParameter")
        || code_str.starts_with("Unsupported")
        || matches!(status, Some(s) if (400..500).contains(&s))
    {
        return Error::InvalidRequest { reason: detail };
    }
    Error::Unavailable { message: detail }
}

/// Maps an SDK error of any EC2 or SSM operation. Construction failures are bugs in the request
/// (`InvalidRequest`); timeouts, dispatch and response failures are retryable (`Unavailable`).
pub fn from_sdk<E, R>(what: &str, err: &SdkError<E, R>, offerings: &[OfferingKey]) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + HttpStatus + 'static,
{
    match err {
        SdkError::ServiceError(service) => classify(
            what,
            service.err().code(),
            Some(service.raw().status_code()),
            service.err().message(),
            offerings,
        ),
        SdkError::ConstructionFailure(_) => Error::InvalidRequest {
            reason: format!("{what}: {}", display_chain(err)),
        },
        _ => Error::Unavailable {
            message: format!("{what}: {}", display_chain(err)),
        },
    }
}

/// The HTTP status of a raw response (implemented for the SDK's response type).
pub trait HttpStatus {
    /// The status code.
    fn status_code(&self) -> u16;
}

impl HttpStatus for aws_sdk_ec2::config::http::HttpResponse {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}

/// An error with its sources, `a: b: c`.
pub fn display_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        s.push_str(": ");
        s.push_str(&e.to_string());
        source = e.source();
    }
    s
}

/// One per-override error of an instant CreateFleet.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetError {
    /// The error code, e.g. `InsufficientInstanceCapacity`.
    pub code: String,
    /// The message.
    pub message: String,
    /// The offering the error is about, when EC2 names one.
    pub offering: Option<OfferingKey>,
}

/// Maps the errors of an instant CreateFleet that launched nothing. Capacity errors win: the
/// offerings they name (or, if none is named, all `tried`) become `InsufficientCapacity`, so the
/// caller marks them unavailable and relaunches elsewhere. Otherwise the first error decides.
pub fn from_fleet_errors(what: &str, errors: &[FleetError], tried: &[OfferingKey]) -> Error {
    let capacity: Vec<&FleetError> = errors
        .iter()
        .filter(|e| is_capacity_code(&e.code))
        .collect();
    if !capacity.is_empty() {
        let mut offerings: Vec<OfferingKey> =
            capacity.iter().filter_map(|e| e.offering.clone()).collect();
        if offerings.is_empty() {
            offerings = tried.to_vec();
        }
        offerings.sort();
        offerings.dedup();
        return Error::InsufficientCapacity { offerings };
    }
    match errors.first() {
        Some(e) => classify(what, Some(&e.code), None, Some(&e.message), tried),
        None => Error::Unavailable {
            message: format!("{what}: no instance and no error in the response"),
        },
    }
}

#[cfg(test)]
mod tests {
    use cloud::CapacityType;

    use super::*;

    fn offering(t: &str, z: &str) -> OfferingKey {
        OfferingKey {
            instance_type: t.into(),
            zone: z.into(),
            capacity_type: CapacityType::Spot,
        }
    }

    #[test]
    fn codes_map_to_the_cloud_errors() {
        let tried = [offering("m5.large", "us-east-1a")];
        let c = |code: &str, status| classify("CreateFleet", Some(code), status, None, &tried);
        assert_eq!(
            c("InsufficientInstanceCapacity", Some(400)),
            Error::InsufficientCapacity {
                offerings: tried.to_vec()
            }
        );
        assert!(matches!(
            c("RequestLimitExceeded", Some(503)),
            Error::Throttled { .. }
        ));
        assert!(matches!(
            c("InvalidParameterValue", Some(400)),
            Error::InvalidRequest { .. }
        ));
        assert!(matches!(
            c("InvalidParameterCombination", Some(400)),
            Error::InvalidRequest { .. }
        ));
        assert!(matches!(
            c("InternalError", Some(500)),
            Error::Unavailable { .. }
        ));
        assert!(matches!(
            c("SomethingNew", Some(503)),
            Error::Unavailable { .. }
        ));
        assert!(matches!(
            c("InvalidInstanceID.NotFound", Some(400)),
            Error::NotFound { .. }
        ));
    }

    #[test]
    fn messages_name_the_call_and_the_code() {
        let e = classify(
            "RunInstances subnet-1",
            Some("InvalidSubnetID.Malformed"),
            Some(400),
            Some("bad id"),
            &[],
        );
        assert_eq!(
            e.to_string(),
            "invalid request: RunInstances subnet-1: InvalidSubnetID.Malformed: bad id"
        );
    }

    #[test]
    fn fleet_capacity_errors_list_the_offerings_named() {
        let tried = [
            offering("m5.large", "us-east-1a"),
            offering("m5.large", "us-east-1b"),
        ];
        let errors = [
            FleetError {
                code: "InsufficientInstanceCapacity".into(),
                message: "none".into(),
                offering: Some(tried[1].clone()),
            },
            FleetError {
                code: "InvalidFleetConfiguration".into(),
                message: "x".into(),
                offering: Some(tried[0].clone()),
            },
        ];
        assert_eq!(
            from_fleet_errors("CreateFleet", &errors, &tried),
            Error::InsufficientCapacity {
                offerings: vec![tried[1].clone()]
            }
        );
        let unnamed = [FleetError {
            code: "UnfulfillableCapacity".into(),
            message: "none".into(),
            offering: None,
        }];
        assert_eq!(
            from_fleet_errors("CreateFleet", &unnamed, &tried),
            Error::InsufficientCapacity {
                offerings: tried.to_vec()
            }
        );
        let invalid = [FleetError {
            code: "InvalidLaunchTemplateId.NotFound".into(),
            message: "gone".into(),
            offering: None,
        }];
        assert!(matches!(
            from_fleet_errors("CreateFleet", &invalid, &tried),
            Error::InvalidRequest { .. }
        ));
        assert!(matches!(
            from_fleet_errors("CreateFleet", &[], &tried),
            Error::Unavailable { .. }
        ));
    }
}
