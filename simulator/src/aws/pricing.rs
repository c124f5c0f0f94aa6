//! The AWS Price List Query API's `GetProducts` (`X-Amz-Target: AWSPriceListService.GetProducts`,
//! JSON 1.1) over the simulated catalog: one product per instance type the simulated EC2 sells
//! on demand, in the documented price list shape (`product.attributes`, `terms.OnDemand` with a
//! price dimension's `pricePerUnit.USD`), so the production adapter reads the simulated cloud's
//! on-demand prices as it reads AWS's.
//!
//! Filters are `TERM_MATCH` on the product's attributes (field names without regard to case,
//! as the API matches them); `serviceCode` and `productFamily` are matched like attributes.
//! Products are Linux, shared tenancy, `Compute Instance` (a `*.metal` type: dedicated,
//! `Compute Instance (bare metal)`), in the simulated region; the price is the type's lowest
//! on-demand offering price. Pages hold `MaxResults` (at most 100) products; `NextToken` is
//! the next product's index.

use serde_json::{Value, json};

use super::{Aws, AwsError};
use crate::labels;

type Result<T, E = AwsError> = std::result::Result<T, E>;

/// The products of the simulated catalog, each as (attributes, price list document).
fn products(aws: &Aws) -> Vec<(Vec<(String, String)>, String)> {
    let region = aws.region().to_string();
    let mut out = Vec::new();
    for t in &aws.cloud().catalog().instance_types {
        let Some(price) = t
            .offerings
            .iter()
            // An unpriced offering (a preview type) is in no price list.
            .filter(|o| o.capacity_type == labels::CAPACITY_ON_DEMAND && !o.unpriced)
            .map(|o| o.price)
            .min_by(f64::total_cmp)
        else {
            continue;
        };
        let metal = t.name.ends_with(".metal") || t.name.contains(".metal-");
        let (tenancy, family) = if metal {
            ("Dedicated", "Compute Instance (bare metal)")
        } else {
            ("Shared", "Compute Instance")
        };
        let sku = format!("SIM{:08X}", fnv(&t.name));
        let attributes = [
            ("servicecode", "AmazonEC2"),
            ("productFamily", family),
            ("instanceType", t.name.as_str()),
            ("regionCode", region.as_str()),
            ("operatingSystem", "Linux"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
            ("marketoption", "OnDemand"),
            ("tenancy", tenancy),
        ];
        let doc = json!({
            "product": {
                "productFamily": family,
                "attributes": attributes
                    .iter()
                    .filter(|(k, _)| *k != "productFamily")
                    .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
                    .collect::<serde_json::Map<_, _>>(),
                "sku": sku,
            },
            "serviceCode": "AmazonEC2",
            "terms": {"OnDemand": {format!("{sku}.JRTCKXETXF"): {
                "priceDimensions": {format!("{sku}.JRTCKXETXF.6YS6EN2CT7"): {
                    "unit": "Hrs",
                    "pricePerUnit": {"USD": format!("{price:.10}")},
                    "description": format!("${price} per On Demand Linux {} Instance Hour", t.name),
                }},
                "sku": sku,
                "offerTermCode": "JRTCKXETXF",
            }}},
            "version": "simulated",
        });
        let attributes = attributes
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_string()))
            .collect();
        out.push((attributes, doc.to_string()));
    }
    out
}

fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// `GetProducts`: the filtered products, one page.
pub(crate) fn get_products(aws: &Aws, body: &[u8]) -> Result<Value> {
    let req: Value = serde_json::from_slice(body).map_err(|e| {
        AwsError::client("SerializationException", format!("GetProducts body: {e}"))
    })?;
    let service = req.get("ServiceCode").and_then(Value::as_str).unwrap_or("");
    let mut terms = Vec::new();
    for f in req
        .get("Filters")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let kind = f.get("Type").and_then(Value::as_str).unwrap_or("");
        let field = f.get("Field").and_then(Value::as_str).unwrap_or("");
        let value = f.get("Value").and_then(Value::as_str).unwrap_or("");
        if kind != "TERM_MATCH" {
            return Err(AwsError::client(
                "InvalidParameterException",
                format!(
                    "Filters: type {kind:?} of field {field:?}: the simulator matches TERM_MATCH only"
                ),
            ));
        }
        terms.push((field.to_ascii_lowercase(), value.to_string()));
    }
    let max = req
        .get("MaxResults")
        .and_then(Value::as_u64)
        .unwrap_or(100)
        .clamp(1, 100) as usize;
    let start = match req.get("NextToken").and_then(Value::as_str) {
        None => 0,
        Some(t) => t.parse::<usize>().map_err(|_| {
            AwsError::client("InvalidNextTokenException", format!("NextToken {t:?}"))
        })?,
    };
    let matching: Vec<String> = if service == "AmazonEC2" {
        products(aws)
            .into_iter()
            .filter(|(attributes, _)| {
                terms.iter().all(|(field, value)| {
                    attributes
                        .iter()
                        .any(|(k, v)| k == field && v.eq_ignore_ascii_case(value))
                })
            })
            .map(|(_, doc)| doc)
            .collect()
    } else {
        Vec::new()
    };
    let page: Vec<&String> = matching.iter().skip(start).take(max).collect();
    let mut out = json!({"FormatVersion": "aws_v1", "PriceList": page});
    if start + max < matching.len() {
        out["NextToken"] = Value::from((start + max).to_string());
    }
    Ok(out)
}
