//! ARC zonal shift's REST-JSON API (`arc-zonal-shift`) for the simulated EKS cluster, as the
//! AWS SDK calls it: `GetManagedResource` (`GET /managedresources/{resourceIdentifier}`, what
//! Karpenter's provider reads with the cluster's ARN), `StartZonalShift` (`POST /zonalshifts`,
//! a JSON body `{resourceIdentifier, awayFrom, expiresIn, comment}`) and `CancelZonalShift`
//! (`DELETE /zonalshifts/{zonalShiftId}`): what a user runs (`aws arc-zonal-shift
//! start-zonal-shift …`) to shift the cluster away from a zone, and what tests run.
//!
//! The one managed resource is the simulated cluster, `arn:aws:eks:<region>:<account>:cluster/
//! <name>` ([`cluster_arn`]); its zones are the network's subnets' zone IDs (`use1-az1`). As
//! ARC: a resource has at most one active zonal shift (a second is a `ConflictException`,
//! `ZonalShiftAlreadyExists`); `expiresIn` is a whole number of minutes, hours or days (`30m`,
//! `2h`, `1d`), at most three days; a shift past its expiry is `EXPIRED` and no longer listed;
//! a cancelled one is `CANCELED`. Timestamps are epoch seconds, errors carry
//! `x-amzn-errortype` and a JSON `message` (restJson1). Zonal autoshift and practice runs are
//! not simulated: `autoshifts` is empty and `zonalAutoshiftStatus` `DISABLED`.

use axum::response::Response;
use serde_json::{Value, json};

use super::{ACCOUNT_ID, Aws, AwsError};

type Result<T, E = AwsError> = std::result::Result<T, E>;

/// The longest `expiresIn` ARC accepts (three days).
const MAX_EXPIRES_IN: i64 = 3 * 24 * 3600;

/// A zonal shift started on the simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shift {
    /// ARC's `zonalShiftId`.
    pub id: String,
    /// The resource (the cluster's ARN).
    pub resource: String,
    /// The zone ID shifted away from.
    pub away_from: String,
    /// Start (epoch seconds).
    pub start: i64,
    /// Expiry (epoch seconds).
    pub expiry: i64,
    /// The comment it was started with.
    pub comment: String,
    /// Cancelled.
    pub cancelled: bool,
}

impl Shift {
    fn status(&self, now: i64) -> &'static str {
        if self.cancelled {
            "CANCELED"
        } else if self.expiry <= now {
            "EXPIRED"
        } else {
            "ACTIVE"
        }
    }

    fn summary(&self, now: i64) -> Value {
        json!({
            "zonalShiftId": self.id,
            "resourceIdentifier": self.resource,
            "awayFrom": self.away_from,
            "expiryTime": self.expiry,
            "startTime": self.start,
            "status": self.status(now),
            "comment": self.comment,
        })
    }
}

/// The zonal shifts started so far.
#[derive(Clone, Debug, Default)]
pub struct Shifts {
    all: Vec<Shift>,
}

impl Shifts {
    /// Every shift started, in order.
    pub fn all(&self) -> &[Shift] {
        &self.all
    }
}

/// The simulated EKS cluster's ARN: ARC's identifier of the managed resource.
pub fn cluster_arn(aws: &Aws) -> String {
    format!(
        "arn:aws:eks:{}:{ACCOUNT_ID}:cluster/{}",
        aws.region(),
        aws.config().cluster
    )
}

/// The operation a request is, if it is one of ARC's.
pub(crate) fn operation(method: &http::Method, path: &str) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("GET", p) if p.starts_with("/managedresources/") => Some("GetManagedResource"),
        ("POST", "/zonalshifts") => Some("StartZonalShift"),
        ("DELETE", p) if p.starts_with("/zonalshifts/") => Some("CancelZonalShift"),
        _ => None,
    }
}

/// Serves one ARC operation (named by [`operation`]).
pub(crate) fn handle(aws: &Aws, op: &str, path: &str, body: &[u8], rid: &str) -> Response {
    let out = match op {
        "GetManagedResource" => get_managed_resource(aws, &label(path, "/managedresources/")),
        "StartZonalShift" => start_zonal_shift(aws, body),
        "CancelZonalShift" => cancel_zonal_shift(aws, &label(path, "/zonalshifts/")),
        other => Err(AwsError::client(
            "ValidationException",
            format!("unknown operation {other}"),
        )),
    };
    match out {
        Ok(v) => super::json_response(rid, "application/json", &v),
        Err(e) => error(rid, &e),
    }
}

/// A restJson1 error: the code in `x-amzn-errortype`, `{"message", "reason"}` in the body.
pub(crate) fn error(rid: &str, e: &AwsError) -> Response {
    Response::builder()
        .status(e.status)
        .header("content-type", "application/json")
        .header("x-amzn-requestid", rid)
        .header("x-amzn-errortype", e.code.as_str())
        .body(json!({"message": e.message}).to_string().into())
        .unwrap_or_default()
}

fn not_found(what: &str) -> AwsError {
    AwsError {
        status: 404,
        code: "ResourceNotFoundException".into(),
        message: format!("{what} was not found"),
    }
}

fn validation(message: impl Into<String>) -> AwsError {
    AwsError::client("ValidationException", message)
}

fn conflict(message: impl Into<String>) -> AwsError {
    AwsError {
        status: 409,
        code: "ConflictException".into(),
        message: message.into(),
    }
}

/// The path's label after `prefix`, percent-decoded (the SDK encodes an ARN's `:` and `/`).
fn label(path: &str, prefix: &str) -> String {
    let raw = path.strip_prefix(prefix).unwrap_or_default().as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if raw[i] == b'%'
            && i + 2 < raw.len()
            && let (Some(h), Some(l)) = (hex(raw[i + 1]), hex(raw[i + 2]))
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn check_resource(aws: &Aws, resource: &str) -> Result<()> {
    if resource == cluster_arn(aws) {
        Ok(())
    } else {
        Err(not_found(&format!("managed resource {resource}")))
    }
}

fn get_managed_resource(aws: &Aws, resource: &str) -> Result<Value> {
    check_resource(aws, resource)?;
    let now = aws.clock().now();
    let shifts = super::lock(&aws.inner.arc);
    let active: Vec<&Shift> = shifts
        .all
        .iter()
        .filter(|s| s.resource == resource && s.status(now) == "ACTIVE")
        .collect();
    let zones: Vec<String> = aws
        .network()
        .subnets
        .iter()
        .map(|s| s.zone_id.clone())
        .collect();
    let weights: serde_json::Map<String, Value> = zones
        .iter()
        .map(|z| {
            let away = active.iter().any(|s| &s.away_from == z);
            (z.clone(), json!(if away { 0.0 } else { 1.0 }))
        })
        .collect();
    Ok(json!({
        "arn": resource,
        "name": aws.config().cluster,
        "appliedWeights": weights,
        "zonalShifts": active.iter().map(|s| json!({
            "appliedStatus": "APPLIED",
            "zonalShiftId": s.id,
            "resourceIdentifier": s.resource,
            "awayFrom": s.away_from,
            "expiryTime": s.expiry,
            "startTime": s.start,
            "comment": s.comment,
            "shiftType": "ZONAL_SHIFT",
        })).collect::<Vec<_>>(),
        "autoshifts": [],
        "zonalAutoshiftStatus": "DISABLED",
    }))
}

/// `30m`, `2h`, `1d` → seconds.
fn expires_in(v: &str) -> Result<i64> {
    let bad = || {
        validation(format!(
            "expiresIn {v:?}: expected a whole number of minutes, hours or days (30m, 2h, 1d), at most 3 days"
        ))
    };
    let (n, unit) = v.split_at(v.len().saturating_sub(1));
    let n: i64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(bad()),
    };
    if n < 1 || secs > MAX_EXPIRES_IN {
        return Err(bad());
    }
    Ok(secs)
}

fn start_zonal_shift(aws: &Aws, body: &[u8]) -> Result<Value> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| validation(format!("the body is not JSON: {e}")))?;
    let field = |k: &str| -> Result<String> {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| validation(format!("{k} is required")))
    };
    let resource = field("resourceIdentifier")?;
    let away_from = field("awayFrom")?;
    let expires = expires_in(&field("expiresIn")?)?;
    let comment = field("comment")?;
    if comment.chars().count() > 128 {
        return Err(validation("comment: at most 128 characters"));
    }
    check_resource(aws, &resource)?;
    if !aws.network().subnets.iter().any(|s| s.zone_id == away_from) {
        return Err(validation(format!(
            "awayFrom {away_from}: the resource is in no such Availability Zone (InvalidAz)"
        )));
    }
    let now = aws.clock().now();
    let mut shifts = super::lock(&aws.inner.arc);
    if shifts
        .all
        .iter()
        .any(|s| s.resource == resource && s.status(now) == "ACTIVE")
    {
        return Err(conflict(format!(
            "{resource} already has an active zonal shift (ZonalShiftAlreadyExists)"
        )));
    }
    let shift = Shift {
        id: format!("00000000-0000-4000-8000-{:012x}", shifts.all.len() + 1),
        resource,
        away_from,
        start: now,
        expiry: now + expires,
        comment,
        cancelled: false,
    };
    let out = shift.summary(now);
    tracing::info!(zone_id = %shift.away_from, id = %shift.id, "Simulated ARC: zonal shift started");
    shifts.all.push(shift);
    Ok(out)
}

fn cancel_zonal_shift(aws: &Aws, id: &str) -> Result<Value> {
    let now = aws.clock().now();
    let mut shifts = super::lock(&aws.inner.arc);
    let Some(shift) = shifts.all.iter_mut().find(|s| s.id == id) else {
        return Err(not_found(&format!("zonal shift {id}")));
    };
    if shift.status(now) != "ACTIVE" {
        return Err(conflict(format!(
            "zonal shift {id} is {} (ZonalShiftStatusNotActive)",
            shift.status(now)
        )));
    }
    shift.cancelled = true;
    tracing::info!(zone_id = %shift.away_from, %id, "Simulated ARC: zonal shift cancelled");
    Ok(shift.summary(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_percent_decoded_and_durations_read() {
        assert_eq!(
            label(
                "/managedresources/arn%3Aaws%3Aeks%3Aus-east-1%3A1%3Acluster%2Fdemo",
                "/managedresources/"
            ),
            "arn:aws:eks:us-east-1:1:cluster/demo"
        );
        assert_eq!(expires_in("30m"), Ok(1800));
        assert_eq!(expires_in("3d"), Ok(MAX_EXPIRES_IN));
        assert!(expires_in("4d").is_err());
        assert!(expires_in("0m").is_err());
        assert!(expires_in("90s").is_err());
        assert!(expires_in("").is_err());
    }
}
