//! SSM's JSON 1.1 API (`X-Amz-Target: AmazonSSM.GetParameter`): parameters put by callers, and
//! AWS's public EKS AMI parameters, which resolve to the simulated images of the
//! [`super::Network`] for any Kubernetes version and AMI release:
//! - `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/standard/<release>/image_id`
//! - `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2[-arm64|-gpu]/<release>/image_id`
//! - `/aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/<version>/image_id`
//!
//! where `<release>` is `recommended` or a versioned name, as Karpenter's `amiSelectorTerms`
//! aliases (`al2023@latest`, `al2@v20240807`, `bottlerocket@v1.20.3`) read them.

use std::collections::BTreeMap;

use axum::response::Response;
use cloud::Timestamp;
use serde_json::{Value, json};

use super::network::ImageFamily;
use super::{ACCOUNT_ID, Aws, AwsError, json_error, json_response, lock};

const CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// Parameters set with PutParameter (or `Aws::put_parameter`).
#[derive(Clone, Debug, Default)]
pub struct Parameters {
    values: BTreeMap<String, (String, i64, Timestamp)>,
}

// === impl Parameters ===

impl Parameters {
    /// Sets `name` (a new version each time).
    pub fn put(&mut self, name: &str, value: &str, now: Timestamp) -> i64 {
        let version = self.values.get(name).map_or(1, |(_, v, _)| v + 1);
        self.values
            .insert(name.to_string(), (value.to_string(), version, now));
        version
    }
}

/// The family and architecture of a public EKS AMI parameter name.
pub fn public_ami_parameter(name: &str) -> Option<(ImageFamily, &'static str)> {
    let rest = name.strip_prefix("/aws/service/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let arch = |a: &str| match a {
        "x86_64" => Some("x86_64"),
        "arm64" => Some("arm64"),
        _ => None,
    };
    match parts.as_slice() {
        [
            "eks",
            "optimized-ami",
            _,
            "amazon-linux-2023",
            a,
            _,
            _,
            "image_id",
        ] => Some((ImageFamily::Al2023, arch(a)?)),
        ["eks", "optimized-ami", _, dir, _, "image_id"] => match *dir {
            "amazon-linux-2" | "amazon-linux-2-gpu" => Some((ImageFamily::Al2, "x86_64")),
            "amazon-linux-2-arm64" => Some((ImageFamily::Al2, "arm64")),
            _ => None,
        },
        ["bottlerocket", k8s, a, _, "image_id"] if k8s.starts_with("aws-k8s-") => {
            Some((ImageFamily::Bottlerocket, arch(a)?))
        }
        _ => None,
    }
}

pub(crate) fn handle(aws: &Aws, op: &str, body: &[u8], rid: &str) -> Response {
    let result = serde_json::from_slice::<Value>(body)
        .map_err(|e| {
            AwsError::client("SerializationException", format!("request body is not JSON: {e}"))
        })
        .and_then(|input| match op {
            "GetParameter" => {
                let name = input["Name"].as_str().ok_or_else(|| {
                    AwsError::client("ValidationException", "GetParameter: Name is required")
                })?;
                let p = parameter(aws, name).ok_or_else(|| {
                    AwsError::client("ParameterNotFound", format!("Parameter {name} not found."))
                })?;
                Ok(json!({ "Parameter": p }))
            }
            "GetParameters" => {
                let names: Vec<&str> = input["Names"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let mut found = Vec::new();
                let mut invalid = Vec::new();
                for n in names {
                    match parameter(aws, n) {
                        Some(p) => found.push(p),
                        None => invalid.push(n),
                    }
                }
                Ok(json!({ "Parameters": found, "InvalidParameters": invalid }))
            }
            "PutParameter" => {
                let (Some(name), Some(value)) = (input["Name"].as_str(), input["Value"].as_str())
                else {
                    return Err(AwsError::client(
                        "ValidationException",
                        "PutParameter: Name and Value are required",
                    ));
                };
                if name.starts_with("/aws/") {
                    return Err(AwsError::client(
                        "AccessDeniedException",
                        format!("PutParameter {name}: the /aws/ namespace is reserved for AWS's public parameters"),
                    ));
                }
                let mut params = lock(&aws.inner.parameters);
                let exists = params.values.contains_key(name);
                if exists && input["Overwrite"].as_bool() != Some(true) {
                    return Err(AwsError::client(
                        "ParameterAlreadyExists",
                        format!("The parameter {name} already exists."),
                    ));
                }
                let version = params.put(name, value, aws.clock().now());
                Ok(json!({ "Version": version, "Tier": "Standard" }))
            }
            other => Err(AwsError::client(
                "UnknownOperationException",
                format!("AmazonSSM.{other}: the simulator serves GetParameter, GetParameters and PutParameter"),
            )),
        });
    match result {
        Ok(v) => json_response(rid, CONTENT_TYPE, &v),
        Err(e) => json_error(rid, &e),
    }
}

fn parameter(aws: &Aws, name: &str) -> Option<Value> {
    let (value, version, modified) = match lock(&aws.inner.parameters).values.get(name) {
        Some(p) => p.clone(),
        None => {
            let (family, arch) = public_ami_parameter(name)?;
            let image = aws.network().image(family, arch)?.id.clone();
            (image, 1, aws.clock().now())
        }
    };
    Some(json!({
        "Name": name,
        "Type": "String",
        "Value": value,
        "Version": version,
        "LastModifiedDate": modified,
        "ARN": format!("arn:aws:ssm:{}:{ACCOUNT_ID}:parameter{name}", aws.region()),
        "DataType": if value.starts_with("ami-") { "aws:ec2:image" } else { "text" },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_parameters_by_family_and_architecture() {
        let p = public_ami_parameter;
        assert_eq!(
            p(
                "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"
            ),
            Some((ImageFamily::Al2023, "arm64"))
        );
        assert_eq!(
            p(
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240807/image_id"
            ),
            Some((ImageFamily::Al2, "arm64"))
        );
        assert_eq!(
            p("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id"),
            Some((ImageFamily::Bottlerocket, "x86_64"))
        );
        assert_eq!(
            p("/aws/service/eks/optimized-ami/1.33/windows/image_id"),
            None
        );
        assert_eq!(
            p("/other/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id"),
            None
        );
    }
}
