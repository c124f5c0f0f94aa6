//! IAM's Query API, the instance-profile calls `cloud-aws` makes for an EC2NodeClass `role`
//! (as Karpenter does): GetInstanceProfile, CreateInstanceProfile, AddRoleToInstanceProfile,
//! RemoveRoleFromInstanceProfile, DeleteInstanceProfile, ListInstanceProfiles (with
//! `PathPrefix`). Requests are EC2-style form bodies with `Version=2010-05-08`; answers are in
//! IAM's namespace with `<…Result>` members and IAM's error document (`NoSuchEntity` 404,
//! `EntityAlreadyExists` 409, `LimitExceeded` 409 for a second role, `DeleteConflict` 409 for a
//! profile that still has its role).
//!
//! Every role exists in the simulated account except those [`Profiles::forbid_role`] names, so
//! a class's unknown role can be shown.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use axum::response::Response;

use super::query::Params;
use super::xml::{Xml, escape};
use super::{ACCOUNT_ID, Aws, AwsError, lock};
use crate::clock::rfc3339;

/// The API version of IAM requests.
pub(crate) const VERSION: &str = "2010-05-08";
const NAMESPACE: &str = "https://iam.amazonaws.com/doc/2010-05-08/";

/// One instance profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// The IAM path (`/` when not given).
    pub path: String,
    /// Attached roles (at most one).
    pub roles: Vec<String>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Creation time, seconds.
    pub created: i64,
}

/// The simulated account's instance profiles.
#[derive(Debug, Default)]
pub struct Profiles {
    profiles: BTreeMap<String, Profile>,
    missing_roles: BTreeSet<String>,
}

impl Profiles {
    /// The profiles now, by name.
    pub fn all(&self) -> BTreeMap<String, Profile> {
        self.profiles.clone()
    }

    /// Makes `role` unknown to IAM (AddRoleToInstanceProfile answers NoSuchEntity).
    pub fn forbid_role(&mut self, role: &str) {
        self.missing_roles.insert(role.to_string());
    }
}

type Result<T, E = AwsError> = std::result::Result<T, E>;

fn not_found(what: String) -> AwsError {
    AwsError {
        status: 404,
        code: "NoSuchEntity".into(),
        message: what,
    }
}

fn conflict(code: &str, message: String) -> AwsError {
    AwsError {
        status: 409,
        code: code.into(),
        message,
    }
}

/// Serves one IAM request.
pub(crate) fn handle(aws: &Aws, p: &Params, request_id: &str) -> Response {
    let action = p.get("Action").unwrap_or_default().to_string();
    let now = aws.cloud().clock().now();
    let mut iam = lock(&aws.inner.iam);
    let result = dispatch(&mut iam, &action, p, now);
    drop(iam);
    match result {
        Ok(body) => {
            let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
            let _ = write!(
                out,
                "<{action}Response xmlns=\"{NAMESPACE}\"><{action}Result>{body}</{action}Result>\
                 <ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata></{action}Response>",
                escape(request_id)
            );
            Response::builder()
                .status(200)
                .header("content-type", "text/xml")
                .header("x-amzn-requestid", request_id)
                .body(out.into())
                .unwrap_or_default()
        }
        Err(e) => {
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"{NAMESPACE}\"><Error><Type>Sender</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
                escape(&e.code),
                escape(&e.message),
                escape(request_id)
            );
            Response::builder()
                .status(e.status)
                .header("content-type", "text/xml")
                .header("x-amzn-requestid", request_id)
                .body(body.into())
                .unwrap_or_default()
        }
    }
}

fn dispatch(iam: &mut Profiles, action: &str, p: &Params, now: i64) -> Result<String> {
    let mut x = Xml::default();
    match action {
        "GetInstanceProfile" => {
            let name = p.require("InstanceProfileName")?;
            let profile = iam
                .profiles
                .get(name)
                .ok_or_else(|| not_found(format!("Instance Profile {name} cannot be found.")))?;
            x.elem("InstanceProfile", |x| write_profile(x, name, profile));
        }
        "CreateInstanceProfile" => {
            let name = p.require("InstanceProfileName")?.to_string();
            if iam.profiles.contains_key(&name) {
                return Err(conflict(
                    "EntityAlreadyExists",
                    format!("Instance Profile {name} already exists."),
                ));
            }
            let profile = Profile {
                path: p.get("Path").unwrap_or("/").to_string(),
                roles: Vec::new(),
                tags: p.tags("Tags.member"),
                created: now,
            };
            x.elem("InstanceProfile", |x| write_profile(x, &name, &profile));
            iam.profiles.insert(name, profile);
        }
        "AddRoleToInstanceProfile" => {
            let name = p.require("InstanceProfileName")?;
            let role = p.require("RoleName")?;
            if iam.missing_roles.contains(role) {
                return Err(not_found(format!(
                    "The role with name {role} cannot be found."
                )));
            }
            let profile = iam
                .profiles
                .get_mut(name)
                .ok_or_else(|| not_found(format!("Instance Profile {name} cannot be found.")))?;
            if !profile.roles.is_empty() {
                return Err(conflict(
                    "LimitExceeded",
                    "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1".into(),
                ));
            }
            profile.roles.push(role.to_string());
        }
        "RemoveRoleFromInstanceProfile" => {
            let name = p.require("InstanceProfileName")?;
            let role = p.require("RoleName")?;
            let profile = iam
                .profiles
                .get_mut(name)
                .ok_or_else(|| not_found(format!("Instance Profile {name} cannot be found.")))?;
            let before = profile.roles.len();
            profile.roles.retain(|r| r != role);
            if profile.roles.len() == before {
                return Err(not_found(format!(
                    "The role with name {role} is not attached to {name}."
                )));
            }
        }
        "DeleteInstanceProfile" => {
            let name = p.require("InstanceProfileName")?;
            let profile = iam
                .profiles
                .get(name)
                .ok_or_else(|| not_found(format!("Instance Profile {name} cannot be found.")))?;
            if !profile.roles.is_empty() {
                return Err(conflict(
                    "DeleteConflict",
                    "Cannot delete entity, must remove roles from instance profile first.".into(),
                ));
            }
            iam.profiles.remove(name);
        }
        "ListInstanceProfiles" => {
            let prefix = p.get("PathPrefix").unwrap_or("/");
            x.elem("InstanceProfiles", |x| {
                for (name, profile) in &iam.profiles {
                    if profile.path.starts_with(prefix) {
                        x.elem("member", |x| write_profile(x, name, profile));
                    }
                }
            });
            x.leaf("IsTruncated", "false");
        }
        other => {
            return Err(AwsError::client(
                "InvalidAction",
                format!("The action {other} is not valid for this web service."),
            ));
        }
    }
    Ok(x.into_string())
}

fn write_profile(x: &mut Xml, name: &str, p: &Profile) {
    let created = rfc3339(p.created);
    x.leaf(
        "InstanceProfileId",
        format!("AIPA{:016X}", name.len() as u64 * 7919 + p.created as u64),
    );
    x.elem("Roles", |x| {
        for role in &p.roles {
            x.elem("member", |x| {
                x.leaf("Path", "/");
                x.leaf("RoleName", role);
                x.leaf("RoleId", format!("AROA{}", role.len()));
                x.leaf("Arn", format!("arn:aws:iam::{ACCOUNT_ID}:role/{role}"));
                x.leaf("CreateDate", &created);
            });
        }
    });
    x.leaf("InstanceProfileName", name);
    x.leaf("Path", &p.path);
    x.leaf(
        "Arn",
        format!("arn:aws:iam::{ACCOUNT_ID}:instance-profile{}{name}", p.path),
    );
    x.leaf("CreateDate", &created);
    x.elem("Tags", |x| {
        for (k, v) in &p.tags {
            x.elem("member", |x| {
                x.leaf("Key", k);
                x.leaf("Value", v);
            });
        }
    });
}
