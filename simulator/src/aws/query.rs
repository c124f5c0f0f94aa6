//! The parameters of an EC2 Query request (`Action=CreateFleet&Filter.1.Name=tag:x&...`): the
//! form body as a flat map, read through prefixes the way the SDK writes them (lists are flat
//! and numbered from 1: `InstanceId.1`, `LaunchTemplateConfigs.1.Overrides.2.InstanceType`).

use std::collections::BTreeMap;

use super::AwsError;

/// A form body, or one structure inside it (the keys below a prefix).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Params {
    /// The prefix this view is under, for error messages (`LaunchTemplateConfigs.1.`).
    path: String,
    values: BTreeMap<String, String>,
}

// === impl Params ===

impl Params {
    /// Parses an `application/x-www-form-urlencoded` body.
    pub(crate) fn parse(body: &[u8]) -> Self {
        Self {
            path: String::new(),
            values: form_urlencoded::parse(body).into_owned().collect(),
        }
    }

    /// The value of `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// `MissingParameter` naming the full key.
    pub(crate) fn require(&self, key: &str) -> Result<&str, AwsError> {
        self.get(key).ok_or_else(|| {
            AwsError::client(
                "MissingParameter",
                format!("The request must contain the parameter {}{key}", self.path),
            )
        })
    }

    /// The full name of `key` in this view, for messages.
    pub(crate) fn name(&self, key: &str) -> String {
        format!("{}{key}", self.path)
    }

    /// An integer parameter.
    ///
    /// # Errors
    /// `InvalidParameterValue` naming the key when the value is not an integer.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, AwsError> {
        self.get(key)
            .map(|v| {
                v.parse().map_err(|_| {
                    AwsError::invalid_value(format!(
                        "Value ({v}) for parameter {} is invalid. Expected an integer.",
                        self.name(key)
                    ))
                })
            })
            .transpose()
    }

    /// The structure under `prefix.` (e.g. `LaunchTemplateData`).
    pub(crate) fn scope(&self, prefix: &str) -> Params {
        let p = format!("{prefix}.");
        Params {
            path: format!("{}{p}", self.path),
            values: self
                .values
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(&p).map(|k| (k.to_string(), v.clone())))
                .collect(),
        }
    }

    /// The structures of a flat list `prefix.1.…`, `prefix.2.…`, in index order.
    pub(crate) fn list(&self, prefix: &str) -> Vec<Params> {
        self.indices(prefix)
            .into_iter()
            .map(|i| self.scope(&format!("{prefix}.{i}")))
            .collect()
    }

    /// The scalar values of a flat list `prefix.1`, `prefix.2`, in index order.
    pub(crate) fn strings(&self, prefix: &str) -> Vec<String> {
        self.indices(prefix)
            .into_iter()
            .filter_map(|i| self.get(&format!("{prefix}.{i}")).map(str::to_string))
            .collect()
    }

    /// The `Tag.N.Key` / `Tag.N.Value` pairs under `prefix` (usually `Tag`).
    pub(crate) fn tags(&self, prefix: &str) -> BTreeMap<String, String> {
        self.list(prefix)
            .into_iter()
            .filter_map(|t| {
                Some((
                    t.get("Key")?.to_string(),
                    t.get("Value").unwrap_or_default().to_string(),
                ))
            })
            .collect()
    }

    /// The tags of the `TagSpecification.N` entries whose `ResourceType` is `resource_type`.
    pub(crate) fn tag_specifications(&self, resource_type: &str) -> BTreeMap<String, String> {
        self.list("TagSpecification")
            .into_iter()
            .filter(|s| s.get("ResourceType") == Some(resource_type))
            .flat_map(|s| s.tags("Tag"))
            .collect()
    }

    fn indices(&self, prefix: &str) -> Vec<u32> {
        let p = format!("{prefix}.");
        let mut out: Vec<u32> = self
            .values
            .keys()
            .filter_map(|k| {
                let rest = k.strip_prefix(&p)?;
                rest.split('.').next()?.parse().ok()
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// `MaxResults` / `NextToken` paging over `items` (the token is an offset).
pub(crate) fn page<T>(items: Vec<T>, p: &Params) -> Result<(Vec<T>, Option<String>), AwsError> {
    let start = match p.get("NextToken") {
        None | Some("") => 0,
        Some(t) => t
            .strip_prefix("sim-")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                AwsError::client(
                    "InvalidNextToken",
                    format!("The token '{t}' is invalid for NextToken"),
                )
            })?,
    };
    let max = match p.int("MaxResults")? {
        None => usize::MAX,
        Some(n) if n >= 1 => n as usize,
        Some(n) => {
            return Err(AwsError::invalid_value(format!(
                "Value ({n}) for parameter MaxResults is invalid. Expected a positive number."
            )));
        }
    };
    let total = items.len();
    let out: Vec<T> = items.into_iter().skip(start).take(max).collect();
    let end = start.saturating_add(out.len());
    let next = (end < total).then(|| format!("sim-{end}"));
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_scopes_follow_the_sdk_layout() {
        let p = Params::parse(
            b"Action=CreateFleet&LaunchTemplateConfigs.2.Overrides.1.InstanceType=c5.large&LaunchTemplateConfigs.1.Overrides.10.InstanceType=m5.xlarge&LaunchTemplateConfigs.1.Overrides.2.InstanceType=m5.large&InstanceId.2=i-2&InstanceId.1=i-1&Tag.1.Key=a%2Fb&Tag.1.Value=x+y",
        );
        assert_eq!(p.get("Action"), Some("CreateFleet"));
        assert_eq!(p.strings("InstanceId"), ["i-1", "i-2"]);
        let configs = p.list("LaunchTemplateConfigs");
        assert_eq!(configs.len(), 2);
        let types: Vec<_> = configs[0]
            .list("Overrides")
            .iter()
            .map(|o| o.get("InstanceType").unwrap().to_string())
            .collect();
        assert_eq!(
            types,
            ["m5.large", "m5.xlarge"],
            "numeric order, not text order"
        );
        assert_eq!(
            p.tags("Tag"),
            BTreeMap::from([("a/b".to_string(), "x y".to_string())])
        );
        let e = configs[1]
            .require("LaunchTemplateSpecification.Version")
            .unwrap_err();
        assert!(
            e.message
                .contains("LaunchTemplateConfigs.2.LaunchTemplateSpecification.Version"),
            "{}",
            e.message
        );
    }
}
