//! EC2's Query API over the simulated cloud: the calls `cloud-aws` and Karpenter make, with
//! EC2's request parameters, XML response shapes and error codes.
//!
//! - CreateFleet (`Type=instant` only, one instance): the overrides become offerings of one
//!   `cloud::LaunchRequest` (the simulated EC2 picks the cheapest spot offering with capacity,
//!   on-demand in the given order, and is idempotent on `ClientToken`); offerings the
//!   simulation marks out of capacity come back in `errorSet` as
//!   `InsufficientInstanceCapacity`, unsold ones as `Unsupported`, as EC2 reports them.
//! - DescribeInstances, TerminateInstances, CreateTags: the simulated instances (terminated ones
//!   stay visible, as on EC2 for about an hour).
//! - CreateLaunchTemplate, DescribeLaunchTemplates: the [`super::Network`]'s templates;
//!   DescribeSubnets, DescribeSecurityGroups, DescribeImages, DescribeAvailabilityZones: the
//!   [`super::Network`] too (`super::ec2_network`).
//! - DescribeInstanceTypes, DescribeInstanceTypeOfferings, DescribeSpotPriceHistory: the
//!   simulator's catalog ([`super::catalog`]).
//!
//! Every call but CreateFleet first passes the cloud's throttling and outage switches
//! (`SimCloud::throttle_next`, `fail_next`; CreateFleet passes them inside the launch):
//! `RequestLimitExceeded` and `Unavailable` (HTTP 503), which the SDK retries by itself before
//! the caller sees them. Unknown actions are `InvalidAction`, unknown filters
//! `InvalidParameterValue`, each naming what was wrong.

use axum::response::Response;
use cloud::{
    CapacityType, CloudProvider, Instance, InstanceState, LaunchRequest, OfferingKey,
    TAG_NODECLASS, Tags,
};

use super::network::{Filter, Launch, LaunchTemplate, filters, matches};
use super::query::{Params, page};
use super::xml::{Xml, escape};
use super::{ACCOUNT_ID, Aws, AwsError};
use crate::clock::rfc3339;

type Result<T, E = AwsError> = std::result::Result<T, E>;

/// Serves one EC2 Query request.
pub(crate) async fn handle(aws: &Aws, body: &[u8], request_id: &str) -> Response {
    let p = Params::parse(body);
    let result = match p.get("Action") {
        None => Err(AwsError::client(
            "MissingAction",
            "The request must contain the parameter Action",
        )),
        Some(action) => {
            let action = action.to_string();
            dispatch(aws, &action, &p, request_id).await
        }
    };
    match result {
        Ok(xml) => Response::builder()
            .status(200)
            .header("content-type", "text/xml;charset=UTF-8")
            .header("x-amzn-requestid", request_id)
            .body(xml.into())
            .unwrap_or_default(),
        Err(e) => error_response(request_id, &e),
    }
}

/// EC2's error document.
pub(crate) fn error_response(request_id: &str, e: &AwsError) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
        escape(&e.code),
        escape(&e.message),
        escape(request_id)
    );
    Response::builder()
        .status(e.status)
        .header("content-type", "text/xml;charset=UTF-8")
        .header("x-amzn-requestid", request_id)
        .body(body.into())
        .unwrap_or_default()
}

async fn dispatch(aws: &Aws, action: &str, p: &Params, rid: &str) -> Result<String> {
    if p.get("DryRun") == Some("true") {
        return Err(AwsError {
            status: 412,
            code: "DryRunOperation".into(),
            message: "Request would have succeeded, but DryRun flag is set.".into(),
        });
    }
    if action != "CreateFleet" {
        aws.cloud().admit().map_err(|e| AwsError::from_cloud(&e))?;
    }
    match action {
        "CreateFleet" => create_fleet(aws, p, rid).await,
        "DescribeInstances" => describe_instances(aws, p, rid),
        "TerminateInstances" => terminate_instances(aws, p, rid),
        "CreateTags" => create_tags(aws, p, rid),
        "CreateLaunchTemplate" => create_launch_template(aws, p, rid),
        "DescribeLaunchTemplates" => describe_launch_templates(aws, p, rid),
        "DescribeSubnets" => super::ec2_network::describe_subnets(aws, p, rid),
        "DescribeSecurityGroups" => super::ec2_network::describe_security_groups(aws, p, rid),
        "DescribeImages" => super::ec2_network::describe_images(aws, p, rid),
        "DescribeAvailabilityZones" => super::ec2_network::describe_availability_zones(aws, p, rid),
        "DescribeInstanceTypes" => super::catalog::describe_instance_types(aws, p, rid),
        "DescribeInstanceTypeOfferings" => {
            super::catalog::describe_instance_type_offerings(aws, p, rid)
        }
        "DescribeSpotPriceHistory" => super::catalog::describe_spot_price_history(aws, p, rid),
        other => Err(AwsError::client(
            "InvalidAction",
            format!("The action {other} is not valid for this web service."),
        )),
    }
}

// === CreateFleet ===

/// One override of a fleet, resolved.
struct Candidate {
    offering: OfferingKey,
    subnet_id: String,
    template: LaunchTemplate,
    version: String,
    image_id: String,
}

async fn create_fleet(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let fleet_type = p.get("Type").unwrap_or("maintain");
    if fleet_type != "instant" {
        return Err(AwsError::invalid_value(format!(
            "Type {fleet_type}: the simulator supports instant fleets only"
        )));
    }
    let target = p.scope("TargetCapacitySpecification");
    let total = target.int("TotalTargetCapacity")?.ok_or_else(|| {
        AwsError::client(
            "MissingParameter",
            "The request must contain the parameter TargetCapacitySpecification.TotalTargetCapacity",
        )
    })?;
    if total != 1 {
        return Err(AwsError::invalid_value(format!(
            "TargetCapacitySpecification.TotalTargetCapacity {total}: the simulator launches one instance per fleet"
        )));
    }
    let capacity_type = match target.require("DefaultTargetCapacityType")? {
        "spot" => CapacityType::Spot,
        "on-demand" => CapacityType::OnDemand,
        other => {
            return Err(AwsError::invalid_value(format!(
                "TargetCapacitySpecification.DefaultTargetCapacityType {other}: expected spot or on-demand"
            )));
        }
    };
    let configs = p.list("LaunchTemplateConfigs");
    if configs.is_empty() {
        return Err(AwsError::client(
            "MissingParameter",
            "The request must contain the parameter LaunchTemplateConfigs",
        ));
    }
    let (candidates, mut errors, fleet_id) = {
        let mut net = aws.network();
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut errors: Vec<(Candidate, &'static str, String)> = Vec::new();
        for config in &configs {
            let spec = config.scope("LaunchTemplateSpecification");
            let (id, name) = (spec.get("LaunchTemplateId"), spec.get("LaunchTemplateName"));
            let template = net.template(id, name).cloned().ok_or_else(|| match id {
                Some(id) => AwsError::client(
                    "InvalidLaunchTemplateId.NotFound",
                    format!(
                        "The specified launch template, with template ID {id}, does not exist."
                    ),
                ),
                None => AwsError::client(
                    "InvalidLaunchTemplateName.NotFoundException",
                    format!(
                        "The specified launch template, with template name {}, does not exist.",
                        name.unwrap_or_default()
                    ),
                ),
            })?;
            let version = spec.get("Version").unwrap_or("$Default").to_string();
            if !matches!(version.as_str(), "$Latest" | "$Default" | "1") {
                return Err(AwsError::client(
                    "InvalidLaunchTemplateId.VersionNotFound",
                    format!(
                        "Could not find launch template version {version} of {}",
                        template.id
                    ),
                ));
            }
            let mut overrides = config.list("Overrides");
            if overrides.is_empty() {
                overrides.push(Params::default());
            }
            for o in overrides {
                let instance_type = o
                    .get("InstanceType")
                    .map(str::to_string)
                    .or_else(|| template.instance_type.clone())
                    .ok_or_else(|| {
                        AwsError::client(
                            "MissingParameter",
                            format!(
                                "{}: no instance type in the override or launch template {}",
                                o.name("InstanceType"),
                                template.id
                            ),
                        )
                    })?;
                let subnet = match (o.get("SubnetId"), o.get("AvailabilityZone")) {
                    (Some(id), _) => net.subnet(id).cloned().ok_or_else(|| {
                        AwsError::client(
                            "InvalidSubnetID.NotFound",
                            format!("The subnet ID '{id}' does not exist"),
                        )
                    })?,
                    (None, Some(zone)) => net
                        .subnets
                        .iter()
                        .find(|s| s.zone == zone)
                        .cloned()
                        .ok_or_else(|| {
                            AwsError::invalid_value(format!(
                                "{}: no subnet in availability zone {zone}",
                                o.name("AvailabilityZone")
                            ))
                        })?,
                    (None, None) => {
                        return Err(AwsError::client(
                            "MissingParameter",
                            format!(
                                "{}: an override needs a subnet or an availability zone",
                                o.name("SubnetId")
                            ),
                        ));
                    }
                };
                if let Some(zone) = o.get("AvailabilityZone")
                    && zone != subnet.zone
                {
                    return Err(AwsError::invalid_value(format!(
                        "{}: subnet {} is in {}, not {zone}",
                        o.name("AvailabilityZone"),
                        subnet.id,
                        subnet.zone
                    )));
                }
                let image_id = o
                    .get("ImageId")
                    .map(str::to_string)
                    .or_else(|| template.image_id.clone())
                    .ok_or_else(|| {
                        AwsError::client(
                            "MissingParameter",
                            format!("launch template {} has no ImageId", template.id),
                        )
                    })?;
                if !net.images.iter().any(|i| i.id == image_id) {
                    return Err(AwsError::client(
                        "InvalidAMIID.NotFound",
                        format!("The image id '[{image_id}]' does not exist"),
                    ));
                }
                let candidate = Candidate {
                    offering: OfferingKey {
                        instance_type: instance_type.clone(),
                        zone: subnet.zone.clone(),
                        capacity_type,
                    },
                    subnet_id: subnet.id.clone(),
                    template: template.clone(),
                    version: version.clone(),
                    image_id,
                };
                if candidates.iter().any(|c| c.offering == candidate.offering) {
                    continue;
                }
                match aws.cloud().instance_type(&instance_type) {
                    None => errors.push((
                        candidate,
                        "InvalidParameterValue",
                        format!("Invalid value '{instance_type}' for InstanceType."),
                    )),
                    Some(t)
                        if !t.offerings.iter().any(|x| {
                            x.zone == subnet.zone && x.capacity_type == capacity_type.as_str()
                        }) =>
                    {
                        let zone = subnet.zone.clone();
                        errors.push((
                            candidate,
                            "Unsupported",
                            format!(
                                "Your requested instance type ({instance_type}) is not supported in your requested Availability Zone ({zone}) as {capacity_type}."
                            ),
                        ));
                    }
                    Some(_) => candidates.push(candidate),
                }
            }
        }
        let fleet_id = net.new_id("fleet");
        (candidates, errors, fleet_id)
    };
    let token = p
        .get("ClientToken")
        .map(str::to_string)
        .unwrap_or_else(|| format!("fleet-{rid}"));
    let mut launched: Option<(Instance, usize)> = None;
    if !candidates.is_empty() {
        let mut tags = Tags::new();
        for c in &candidates {
            for (k, v) in &c.template.instance_tags {
                tags.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        tags.extend(p.tag_specifications("instance"));
        let request = LaunchRequest {
            client_token: token.clone(),
            offerings: candidates.iter().map(|c| c.offering.clone()).collect(),
            node_class: tags.get(TAG_NODECLASS).cloned(),
            tags,
            image_id: None,
            node: None,
        };
        match aws.cloud().create(&request).await {
            Ok(instance) => {
                let i = candidates
                    .iter()
                    .position(|c| {
                        c.offering.instance_type == instance.instance_type
                            && c.offering.zone == instance.zone
                    })
                    .unwrap_or(0);
                let c = &candidates[i];
                {
                    let mut net = aws.network();
                    net.launches
                        .entry(instance.id.clone())
                        .or_insert_with(|| Launch {
                            subnet_id: c.subnet_id.clone(),
                            security_groups: c.template.security_groups.clone(),
                            instance_profile: c.template.instance_profile.clone(),
                            launch_template_id: Some(c.template.id.clone()),
                            user_data: c.template.user_data.clone(),
                            client_token: token.clone(),
                        });
                }
                if instance.image_id.is_none() {
                    let image = c.image_id.clone();
                    aws.cloud()
                        .update_instance(&instance.id, |i| i.image_id = Some(image));
                }
                launched = Some((instance, i));
            }
            Err(cloud::Error::InsufficientCapacity { .. }) => {}
            Err(e) => return Err(AwsError::from_cloud(&e)),
        }
    }
    // Offerings out of capacity are reported whether or not another one launched.
    let launched_at = launched.as_ref().map(|(_, i)| *i);
    let mut chosen = None;
    for (i, c) in candidates.into_iter().enumerate() {
        if Some(i) == launched_at {
            chosen = Some(c);
        } else if !aws.cloud().has_capacity(&c.offering) {
            let message = format!(
                "We currently do not have sufficient {} capacity in the Availability Zone you requested ({}). Our system will be working on provisioning additional capacity.",
                c.offering.instance_type, c.offering.zone
            );
            errors.push((c, "InsufficientInstanceCapacity", message));
        }
    }
    let instances: Vec<(Instance, Candidate)> =
        launched.map(|(i, _)| i).into_iter().zip(chosen).collect();
    let lifecycle = capacity_type.as_str();
    Ok(Xml::response("CreateFleet", rid, |x| {
        x.leaf("fleetId", &fleet_id);
        x.list("errorSet", &errors, |x, (c, code, message)| {
            overrides_xml(x, c);
            x.leaf("lifecycle", lifecycle);
            x.leaf("errorCode", code);
            x.leaf("errorMessage", message);
        });
        x.list("fleetInstanceSet", &instances, |x, (i, c)| {
            overrides_xml(x, c);
            x.leaf("lifecycle", lifecycle);
            x.list("instanceIds", [&i.id], |x, id| x.text(id));
            x.leaf("instanceType", &i.instance_type);
            x.leaf("platform", "Linux/UNIX");
        });
    }))
}

fn overrides_xml(x: &mut Xml, c: &Candidate) {
    x.elem("launchTemplateAndOverrides", |x| {
        x.elem("launchTemplateSpecification", |x| {
            x.leaf("launchTemplateId", &c.template.id);
            x.leaf("version", &c.version);
        });
        x.elem("overrides", |x| {
            x.leaf("instanceType", &c.offering.instance_type);
            x.leaf("subnetId", &c.subnet_id);
            x.leaf("availabilityZone", &c.offering.zone);
            x.leaf("imageId", &c.image_id);
        });
    });
}

// === Instances ===

/// EC2's state code and name.
pub fn state(s: InstanceState) -> (u16, &'static str) {
    match s {
        InstanceState::Pending => (0, "pending"),
        InstanceState::Running => (16, "running"),
        InstanceState::ShuttingDown => (32, "shutting-down"),
        InstanceState::Terminated => (48, "terminated"),
    }
}

fn is_instance_id(id: &str) -> bool {
    id.strip_prefix("i-")
        .is_some_and(|h| (8..=17).contains(&h.len()) && h.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The instances named by `InstanceId.N`, all of them known.
fn named_instances(aws: &Aws, ids: &[String]) -> Result<Vec<Instance>> {
    if let Some(bad) = ids.iter().find(|id| !is_instance_id(id)) {
        return Err(AwsError::client(
            "InvalidInstanceID.Malformed",
            format!("Invalid id: \"{bad}\""),
        ));
    }
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for id in ids {
        match aws.cloud().instance(id) {
            Some(i) => found.push(i),
            None => missing.push(id.as_str()),
        }
    }
    match missing.as_slice() {
        [] => Ok(found),
        [one] => Err(AwsError::client(
            "InvalidInstanceID.NotFound",
            format!("The instance ID '{one}' does not exist"),
        )),
        many => Err(AwsError::client(
            "InvalidInstanceID.NotFound",
            format!("The instance IDs '{}' do not exist", many.join(", ")),
        )),
    }
}

const INSTANCE_FILTERS: &[&str] = &[
    "instance-id",
    "instance-state-name",
    "instance-state-code",
    "instance-type",
    "availability-zone",
    "subnet-id",
    "vpc-id",
    "image-id",
    "instance-lifecycle",
    "private-dns-name",
    "private-ip-address",
    "client-token",
    "architecture",
];

fn architecture(aws: &Aws, instance_type: &str) -> String {
    let arch = aws
        .cloud()
        .instance_type(instance_type)
        .and_then(|t| t.labels.get(crate::labels::ARCH).cloned())
        .unwrap_or_else(|| "amd64".into());
    if arch == "amd64" {
        "x86_64".into()
    } else {
        arch
    }
}

fn instance_field(
    aws: &Aws,
    i: &Instance,
    launch: Option<&Launch>,
    vpc: &str,
    name: &str,
) -> Vec<String> {
    let v = |s: &str| vec![s.to_string()];
    match name {
        "instance-id" => v(&i.id),
        "instance-state-name" => v(state(i.state).1),
        "instance-state-code" => v(&state(i.state).0.to_string()),
        "instance-type" => v(&i.instance_type),
        "availability-zone" => v(&i.zone),
        "subnet-id" => launch.map(|l| v(&l.subnet_id)).unwrap_or_default(),
        "vpc-id" => v(vpc),
        "image-id" => i.image_id.iter().cloned().collect(),
        "instance-lifecycle" if i.capacity_type == CapacityType::Spot => v("spot"),
        "private-dns-name" => v(&i.private_dns_name),
        "private-ip-address" => v(&i.private_ip),
        "client-token" => launch.map(|l| v(&l.client_token)).unwrap_or_default(),
        "architecture" => vec![architecture(aws, &i.instance_type)],
        _ => Vec::new(),
    }
}

fn describe_instances(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let ids = p.strings("InstanceId");
    let fs: Vec<Filter> = filters(p, INSTANCE_FILTERS, true)?;
    let instances = if ids.is_empty() {
        aws.cloud().instances()
    } else {
        named_instances(aws, &ids)?
    };
    let net = aws.network().clone();
    let selected: Vec<Instance> = instances
        .into_iter()
        .filter(|i| {
            let launch = net.launches.get(&i.id);
            matches(&fs, &i.tags, |name| {
                instance_field(aws, i, launch, &net.vpc_id, name)
            })
        })
        .collect();
    let (selected, next) = page(selected, p)?;
    Ok(Xml::response("DescribeInstances", rid, |x| {
        x.list("reservationSet", &selected, |x, i| {
            x.leaf("reservationId", format!("r-{}", &i.id[2..]));
            x.leaf("ownerId", ACCOUNT_ID);
            x.elem("groupSet", |_| {});
            x.list("instancesSet", [i], |x, i| {
                instance_xml(aws, x, i, net.launches.get(&i.id), &net)
            });
        });
        x.opt("nextToken", next.as_deref());
    }))
}

fn instance_xml(
    aws: &Aws,
    x: &mut Xml,
    i: &Instance,
    launch: Option<&Launch>,
    net: &super::Network,
) {
    let (code, name) = state(i.state);
    x.leaf("instanceId", &i.id);
    x.opt("imageId", i.image_id.as_deref());
    x.elem("instanceState", |x| {
        x.leaf("code", code);
        x.leaf("name", name);
    });
    let running = !matches!(i.state, InstanceState::Terminated);
    x.leaf(
        "privateDnsName",
        if running {
            i.private_dns_name.as_str()
        } else {
            ""
        },
    );
    x.leaf("dnsName", "");
    x.leaf("reason", "");
    x.leaf("amiLaunchIndex", 0);
    x.leaf("instanceType", &i.instance_type);
    x.leaf("launchTime", rfc3339(i.launch_time));
    x.elem("placement", |x| {
        x.leaf("availabilityZone", &i.zone);
        x.leaf("groupName", "");
        x.leaf("tenancy", "default");
    });
    x.elem("monitoring", |x| x.leaf("state", "disabled"));
    if running {
        if let Some(l) = launch {
            x.leaf("subnetId", &l.subnet_id);
        }
        x.leaf("vpcId", &net.vpc_id);
        x.leaf("privateIpAddress", &i.private_ip);
    }
    x.leaf("sourceDestCheck", true);
    let groups: Vec<(String, String)> = launch
        .map(|l| {
            l.security_groups
                .iter()
                .map(|g| {
                    let name = net
                        .security_group(g)
                        .map(|s| s.name.clone())
                        .unwrap_or_default();
                    (g.clone(), name)
                })
                .collect()
        })
        .unwrap_or_default();
    x.list("groupSet", &groups, |x, (id, name)| {
        x.leaf("groupId", id);
        x.leaf("groupName", name);
    });
    if i.state == InstanceState::Terminated {
        x.elem("stateReason", |x| {
            x.leaf("code", "Client.UserInitiatedShutdown");
            x.leaf(
                "message",
                "Client.UserInitiatedShutdown: User initiated shutdown",
            );
        });
    }
    x.leaf("architecture", architecture(aws, &i.instance_type));
    x.leaf("rootDeviceType", "ebs");
    x.leaf("rootDeviceName", "/dev/xvda");
    if i.capacity_type == CapacityType::Spot {
        x.leaf("instanceLifecycle", "spot");
        x.leaf("spotInstanceRequestId", format!("sir-{}", &i.id[2..]));
    }
    if let Some(l) = launch {
        x.leaf("clientToken", &l.client_token);
        if let Some(p) = &l.instance_profile {
            let arn = if p.starts_with("arn:") {
                p.clone()
            } else {
                // IAM's ARN carries the profile's path (`/dovetail/<region>/<cluster>/`).
                let path = aws
                    .iam()
                    .all()
                    .get(p)
                    .map_or("/".to_string(), |f| f.path.clone());
                format!("arn:aws:iam::{ACCOUNT_ID}:instance-profile{path}{p}")
            };
            x.elem("iamInstanceProfile", |x| {
                x.leaf("arn", arn);
                x.leaf("id", "AIPA0D0E7A11SIMULATED");
            });
        }
    }
    x.tags("tagSet", &i.tags);
    x.leaf("virtualizationType", "hvm");
    x.leaf("hypervisor", "xen");
    x.leaf("ebsOptimized", true);
    x.leaf("enaSupport", true);
    x.leaf("platformDetails", "Linux/UNIX");
}

fn terminate_instances(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let ids = p.strings("InstanceId");
    if ids.is_empty() {
        return Err(AwsError::client(
            "MissingParameter",
            "The request must contain the parameter InstanceId",
        ));
    }
    let instances = named_instances(aws, &ids)?;
    let mut changes = Vec::new();
    for i in instances {
        let previous = i.state;
        if matches!(previous, InstanceState::Pending | InstanceState::Running) {
            aws.cloud()
                .terminate(&i.provider_id)
                .map_err(|e| AwsError::from_cloud(&e))?;
        }
        let current = aws
            .cloud()
            .instance(&i.id)
            .map(|i| i.state)
            .unwrap_or(previous);
        changes.push((i.id, current, previous));
    }
    Ok(Xml::response("TerminateInstances", rid, |x| {
        x.list("instancesSet", &changes, |x, (id, current, previous)| {
            x.leaf("instanceId", id);
            for (tag, s) in [("currentState", *current), ("previousState", *previous)] {
                let (code, name) = state(s);
                x.elem(tag, |x| {
                    x.leaf("code", code);
                    x.leaf("name", name);
                });
            }
        });
    }))
}

fn create_tags(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let ids = p.strings("ResourceId");
    if ids.is_empty() {
        return Err(AwsError::client(
            "MissingParameter",
            "The request must contain the parameter ResourceId",
        ));
    }
    let tags = p.tags("Tag");
    if tags.is_empty() {
        return Err(AwsError::client(
            "MissingParameter",
            "The request must contain the parameter Tag",
        ));
    }
    let instance_ids: Vec<String> = ids
        .iter()
        .filter(|i| i.starts_with("i-"))
        .cloned()
        .collect();
    named_instances(aws, &instance_ids)?;
    let mut net = aws.network();
    if let Some(bad) = ids
        .iter()
        .filter(|i| !i.starts_with("i-"))
        .find(|id| net.tags_mut(id).is_none())
    {
        return Err(AwsError::client(
            "InvalidID",
            format!("The ID '{bad}' is not valid"),
        ));
    }
    for id in &ids {
        if id.starts_with("i-") {
            aws.cloud()
                .update_instance(id, |i| i.tags.extend(tags.clone()));
        } else if let Some(t) = net.tags_mut(id) {
            t.extend(tags.clone());
        }
    }
    Ok(Xml::response("CreateTags", rid, |x| x.leaf("return", true)))
}

// === Launch templates ===

fn create_launch_template(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let name = p.require("LaunchTemplateName")?.to_string();
    let valid = (3..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "().-/_".contains(c));
    if !valid {
        return Err(AwsError::client(
            "InvalidLaunchTemplateName.MalformedException",
            format!("LaunchTemplateName {name:?}: 3 to 128 of a-z, A-Z, 0-9, ( ) . - / _"),
        ));
    }
    let data = p.scope("LaunchTemplateData");
    let mut security_groups = data.strings("SecurityGroupId");
    let interfaces = data.list("NetworkInterface");
    if security_groups.is_empty()
        && let Some(ni) = interfaces.first()
    {
        security_groups = ni.strings("SecurityGroupId");
    }
    let mut net = aws.network();
    if let Some(bad) = security_groups
        .iter()
        .find(|g| net.security_group(g).is_none())
    {
        return Err(AwsError::client(
            "InvalidGroup.NotFound",
            format!("The security group '{bad}' does not exist"),
        ));
    }
    if net.templates.values().any(|t| t.name == name) {
        return Err(AwsError::client(
            "InvalidLaunchTemplateName.AlreadyExistsException",
            format!("Launch template name already in use: {name}"),
        ));
    }
    let id = net.new_id("lt");
    let template = LaunchTemplate {
        id: id.clone(),
        name,
        created: aws.clock().now(),
        image_id: data.get("ImageId").map(str::to_string),
        instance_type: data.get("InstanceType").map(str::to_string),
        user_data: data.get("UserData").map(str::to_string),
        security_groups,
        instance_profile: data
            .get("IamInstanceProfile.Name")
            .or_else(|| data.get("IamInstanceProfile.Arn"))
            .map(str::to_string),
        instance_tags: data.tag_specifications("instance"),
        tags: p.tag_specifications("launch-template"),
    };
    net.templates.insert(id, template.clone());
    Ok(Xml::response("CreateLaunchTemplate", rid, |x| {
        x.elem("launchTemplate", |x| template_xml(x, &template));
    }))
}

fn template_xml(x: &mut Xml, t: &LaunchTemplate) {
    x.leaf("launchTemplateId", &t.id);
    x.leaf("launchTemplateName", &t.name);
    x.leaf("createTime", rfc3339(t.created));
    x.leaf("createdBy", format!("arn:aws:iam::{ACCOUNT_ID}:root"));
    x.leaf("defaultVersionNumber", 1);
    x.leaf("latestVersionNumber", 1);
    x.tags("tagSet", &t.tags);
}

fn describe_launch_templates(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let names = p.strings("LaunchTemplateName");
    let ids = p.strings("LaunchTemplateId");
    let fs = filters(p, &["launch-template-name", "launch-template-id"], true)?;
    let net = aws.network();
    if let Some(missing) = names
        .iter()
        .find(|n| !net.templates.values().any(|t| &t.name == *n))
    {
        return Err(AwsError::client(
            "InvalidLaunchTemplateName.NotFoundException",
            format!(
                "At least one of the launch templates specified in the request does not exist: {missing}"
            ),
        ));
    }
    if let Some(missing) = ids.iter().find(|id| !net.templates.contains_key(*id)) {
        return Err(AwsError::client(
            "InvalidLaunchTemplateId.NotFound",
            format!("The specified launch template, with template ID {missing}, does not exist."),
        ));
    }
    let selected: Vec<LaunchTemplate> = net
        .templates
        .values()
        .filter(|t| names.is_empty() || names.contains(&t.name))
        .filter(|t| ids.is_empty() || ids.contains(&t.id))
        .filter(|t| {
            matches(&fs, &t.tags, |f| match f {
                "launch-template-name" => vec![t.name.clone()],
                "launch-template-id" => vec![t.id.clone()],
                _ => vec![],
            })
        })
        .cloned()
        .collect();
    drop(net);
    let (selected, next) = page(selected, p)?;
    Ok(Xml::response("DescribeLaunchTemplates", rid, |x| {
        x.list("launchTemplates", &selected, template_xml);
        x.opt("nextToken", next.as_deref());
    }))
}
