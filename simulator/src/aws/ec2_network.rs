//! The network and image calls of EC2 over the simulated account (`super::Network`):
//! DescribeSubnets, DescribeSecurityGroups, DescribeImages and DescribeAvailabilityZones.

use super::network::{filters, matches};
use super::query::{Params, page};
use super::xml::Xml;
use super::{ACCOUNT_ID, Aws, AwsError};
use cloud::Tags;

type Result<T, E = AwsError> = std::result::Result<T, E>;

pub(super) fn describe_subnets(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let ids = p.strings("SubnetId");
    let fs = filters(
        p,
        &[
            "subnet-id",
            "vpc-id",
            "availability-zone",
            "availability-zone-id",
            "cidr-block",
            "state",
            "default-for-az",
        ],
        true,
    )?;
    let net = aws.network().clone();
    if let Some(missing) = ids.iter().find(|id| net.subnet(id).is_none()) {
        return Err(AwsError::client(
            "InvalidSubnetID.NotFound",
            format!("The subnet ID '{missing}' does not exist"),
        ));
    }
    let selected: Vec<_> = net
        .subnets
        .iter()
        .filter(|s| ids.is_empty() || ids.contains(&s.id))
        .filter(|s| {
            matches(&fs, &s.tags, |f| match f {
                "subnet-id" => vec![s.id.clone()],
                "vpc-id" => vec![net.vpc_id.clone()],
                "availability-zone" => vec![s.zone.clone()],
                "availability-zone-id" => vec![s.zone_id.clone()],
                "cidr-block" => vec![s.cidr.clone()],
                "state" => vec!["available".into()],
                "default-for-az" => vec!["false".into()],
                _ => vec![],
            })
        })
        .cloned()
        .collect();
    let (selected, next) = page(selected, p)?;
    let region = aws.region().to_string();
    Ok(Xml::response("DescribeSubnets", rid, |x| {
        x.list("subnetSet", &selected, |x, s| {
            x.leaf("subnetId", &s.id);
            x.leaf(
                "subnetArn",
                format!("arn:aws:ec2:{region}:{ACCOUNT_ID}:subnet/{}", s.id),
            );
            x.leaf("state", "available");
            x.leaf("ownerId", ACCOUNT_ID);
            x.leaf("vpcId", &net.vpc_id);
            x.leaf("cidrBlock", &s.cidr);
            x.leaf("availableIpAddressCount", s.available_ips);
            x.leaf("availabilityZone", &s.zone);
            x.leaf("availabilityZoneId", &s.zone_id);
            x.leaf("defaultForAz", false);
            x.leaf("mapPublicIpOnLaunch", false);
            x.leaf("assignIpv6AddressOnCreation", false);
            x.tags("tagSet", &s.tags);
        });
        x.opt("nextToken", next.as_deref());
    }))
}

pub(super) fn describe_security_groups(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let ids = p.strings("GroupId");
    let names = p.strings("GroupName");
    let fs = filters(
        p,
        &[
            "group-id",
            "group-name",
            "vpc-id",
            "description",
            "owner-id",
        ],
        true,
    )?;
    let net = aws.network().clone();
    if let Some(missing) = ids.iter().find(|id| net.security_group(id).is_none()) {
        return Err(AwsError::client(
            "InvalidGroup.NotFound",
            format!("The security group '{missing}' does not exist"),
        ));
    }
    if let Some(missing) = names
        .iter()
        .find(|n| !net.security_groups.iter().any(|g| &g.name == *n))
    {
        return Err(AwsError::client(
            "InvalidGroup.NotFound",
            format!(
                "The security group '{missing}' does not exist in default VPC '{}'",
                net.vpc_id
            ),
        ));
    }
    let selected: Vec<_> = net
        .security_groups
        .iter()
        .filter(|g| ids.is_empty() || ids.contains(&g.id))
        .filter(|g| names.is_empty() || names.contains(&g.name))
        .filter(|g| {
            matches(&fs, &g.tags, |f| match f {
                "group-id" => vec![g.id.clone()],
                "group-name" => vec![g.name.clone()],
                "vpc-id" => vec![net.vpc_id.clone()],
                "description" => vec![g.description.clone()],
                "owner-id" => vec![ACCOUNT_ID.into()],
                _ => vec![],
            })
        })
        .cloned()
        .collect();
    let (selected, next) = page(selected, p)?;
    let region = aws.region().to_string();
    Ok(Xml::response("DescribeSecurityGroups", rid, |x| {
        x.list("securityGroupInfo", &selected, |x, g| {
            x.leaf("ownerId", ACCOUNT_ID);
            x.leaf("groupId", &g.id);
            x.leaf("groupName", &g.name);
            x.leaf("groupDescription", &g.description);
            x.leaf("vpcId", &net.vpc_id);
            x.leaf(
                "securityGroupArn",
                format!("arn:aws:ec2:{region}:{ACCOUNT_ID}:security-group/{}", g.id),
            );
            x.elem("ipPermissions", |_| {});
            x.elem("ipPermissionsEgress", |_| {});
            x.tags("tagSet", &g.tags);
        });
        x.opt("nextToken", next.as_deref());
    }))
}

pub(super) fn describe_images(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let ids = p.strings("ImageId");
    let owners = p.strings("Owner");
    let fs = filters(
        p,
        &[
            "image-id",
            "name",
            "architecture",
            "owner-id",
            "owner-alias",
            "state",
            "image-type",
            "is-public",
            "root-device-type",
            "virtualization-type",
            "platform-details",
        ],
        true,
    )?;
    let net = aws.network().clone();
    if let Some(missing) = ids
        .iter()
        .find(|id| !net.images.iter().any(|i| &i.id == *id))
    {
        return Err(AwsError::client(
            "InvalidAMIID.NotFound",
            format!("The image id '[{missing}]' does not exist"),
        ));
    }
    let selected: Vec<_> = net
        .images
        .iter()
        .filter(|i| ids.is_empty() || ids.contains(&i.id))
        .filter(|i| {
            owners.is_empty()
                || owners.iter().any(|o| {
                    o == &i.owner || o == "amazon" || (o == "self" && i.owner == ACCOUNT_ID)
                })
        })
        .filter(|i| {
            matches(&fs, &i.tags, |f| match f {
                "image-id" => vec![i.id.clone()],
                "name" => vec![i.name.clone()],
                "architecture" => vec![i.architecture.clone()],
                "owner-id" => vec![i.owner.clone()],
                "owner-alias" => vec!["amazon".into()],
                "state" => vec!["available".into()],
                "image-type" => vec!["machine".into()],
                "is-public" => vec!["true".into()],
                "root-device-type" => vec!["ebs".into()],
                "virtualization-type" => vec!["hvm".into()],
                "platform-details" => vec!["Linux/UNIX".into()],
                _ => vec![],
            })
        })
        .cloned()
        .collect();
    let (selected, next) = page(selected, p)?;
    Ok(Xml::response("DescribeImages", rid, |x| {
        x.list("imagesSet", &selected, |x, i| {
            x.leaf("imageId", &i.id);
            x.leaf("imageLocation", format!("amazon/{}", i.name));
            x.leaf("imageState", "available");
            x.leaf("imageOwnerId", &i.owner);
            x.leaf("creationDate", &i.creation_date);
            x.leaf("isPublic", true);
            x.leaf("architecture", &i.architecture);
            x.leaf("imageType", "machine");
            x.leaf("name", &i.name);
            x.leaf("description", format!("{} (simulated)", i.name));
            x.leaf("imageOwnerAlias", "amazon");
            x.leaf("rootDeviceType", "ebs");
            x.leaf("rootDeviceName", "/dev/xvda");
            x.leaf("virtualizationType", "hvm");
            x.leaf("hypervisor", "xen");
            x.leaf("enaSupport", true);
            x.leaf("platformDetails", "Linux/UNIX");
            x.tags("tagSet", &i.tags);
        });
        x.opt("nextToken", next.as_deref());
    }))
}

pub(super) fn describe_availability_zones(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let names = p.strings("ZoneName");
    let fs = filters(p, &["zone-name", "zone-id", "region-name", "state"], false)?;
    let net = aws.network().clone();
    let region = aws.region().to_string();
    let zones: Vec<_> = net
        .subnets
        .iter()
        .filter(|s| names.is_empty() || names.contains(&s.zone))
        .filter(|s| {
            matches(&fs, &Tags::new(), |f| match f {
                "zone-name" => vec![s.zone.clone()],
                "zone-id" => vec![s.zone_id.clone()],
                "region-name" => vec![region.clone()],
                "state" => vec!["available".into()],
                _ => vec![],
            })
        })
        .collect();
    Ok(Xml::response("DescribeAvailabilityZones", rid, |x| {
        x.list("availabilityZoneInfo", &zones, |x, s| {
            x.leaf("zoneName", &s.zone);
            x.leaf("zoneId", &s.zone_id);
            x.leaf("zoneState", "available");
            x.leaf("regionName", &region);
            x.leaf("zoneType", "availability-zone");
            x.leaf("optInStatus", "opt-in-not-required");
            x.leaf("groupName", &region);
            x.leaf("networkBorderGroup", &region);
        });
    }))
}
