//! The one place where errors become gRPC statuses.
//!
//! Bad input is `INVALID_ARGUMENT` with a `google.rpc.BadRequest` field violation naming the
//! field, a session out of step is `FAILED_PRECONDITION` (the client resends a snapshot), a session
//! over its memory budget is `RESOURCE_EXHAUSTED`, a draining server is `UNAVAILABLE` (the client
//! moves to another replica), and only bugs are `INTERNAL`.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::Error;

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::Convert(c) | Error::SessionUpdate { source: c, .. } => {
                bad_request(c.field(), c.reason(), message)
            }
            Error::UnknownCatalog { field, reason, .. } => bad_request(&field, &reason, message),
            Error::NoSnapshot { .. } | Error::SequenceGap { .. } => {
                Status::failed_precondition(message)
            }
            Error::EmptyUpdate { .. } => bad_request("update", "is required", message),
            Error::SequenceExhausted { .. } => {
                bad_request("sequence", "must be below 18446744073709551615", message)
            }
            Error::SessionIdle { .. } => Status::deadline_exceeded(message),
            Error::SessionTooLarge { .. } | Error::SessionsFull { .. } => {
                Status::resource_exhausted(message)
            }
            Error::ShuttingDown => Status::unavailable(message),
            Error::Cancelled => Status::cancelled(message),
            Error::PlannerFailed(_) => Status::internal(message),
        }
    }
}

fn bad_request(field: &str, reason: &str, message: String) -> Status {
    Status::with_error_details(
        Code::InvalidArgument,
        message,
        ErrorDetails::with_bad_request_violation(field, reason),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::convert;

    #[test]
    fn invalid_field_is_invalid_argument_with_violation() {
        let e = Error::Convert(convert::Error::InvalidField {
            field: "snapshot.pods[17].requests.cpu".into(),
            reason: "invalid quantity \"lots\": expected a number".into(),
        });
        let s = Status::from(e);
        assert_eq!(s.code(), Code::InvalidArgument);
        assert!(s.message().starts_with("snapshot.pods[17].requests.cpu: "));
        let details = s.get_error_details();
        let br = details.bad_request().expect("bad request details");
        assert_eq!(
            br.field_violations[0].field,
            "snapshot.pods[17].requests.cpu"
        );
    }

    #[test]
    fn session_errors_map_to_precise_codes() {
        let gap = Status::from(Error::SequenceGap {
            expected: 4,
            got: 6,
        });
        assert_eq!(gap.code(), Code::FailedPrecondition);
        let big = Status::from(Error::SessionTooLarge {
            objects: 11,
            limit: 10,
        });
        assert_eq!(big.code(), Code::ResourceExhausted);
        let draining = Status::from(Error::ShuttingDown);
        assert_eq!(draining.code(), Code::Unavailable);
        assert!(draining.message().contains("resend a snapshot"));
        let bug = Status::from(Error::PlannerFailed("boom".into()));
        assert_eq!(bug.code(), Code::Internal);
    }
}
