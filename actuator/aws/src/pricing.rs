//! On-demand prices from the AWS Price List Query API (`pricing:GetProducts`), as Karpenter's
//! AWS provider reads them (`pkg/providers/pricing/pricing.go` of aws/karpenter-provider-aws:
//! `NewAPI`, `UpdateOnDemandPricing`, `fetchOnDemandPricing`, `onDemandPage`):
//!
//! - the API answers in a few regions only: `ap-*` regions ask ap-south-1, `eu-*` eu-central-1,
//!   `cn-*` cn-northwest-1, every other us-east-1 ([`api_region`]); GovCloud has no Pricing API
//!   and keeps the built-in table;
//! - two queries, every page (100 products a page): shared-tenancy `Compute Instance` and
//!   dedicated `Compute Instance (bare metal)`, both Linux without pre-installed software,
//!   `capacitystatus=Used`, `marketoption=OnDemand`, in the region (`regionCode`);
//! - each price list item is a JSON document: `product.attributes.instanceType` and the
//!   `pricePerUnit` (USD; CNY in China) of its OnDemand term's price dimension; items without an
//!   instance type or a positive price are skipped;
//! - the answer overrides the built-in table type by type (Karpenter assigns the fetched map
//!   over the one it holds, so a type the API does not list keeps its earlier price), and is
//!   refreshed every [`REFRESH`] (Karpenter's pricing controller requeues every 12 hours).
//!
//! Karpenter refuses an answer with no bare-metal price at all; here an answer is refused only
//! when both queries give nothing (a region's metal list can be legitimately empty).

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_pricing::types::{Filter, FilterType};
use cloud::Result;

use crate::error::from_sdk;

/// How long fetched on-demand prices are used before they are asked for again.
pub const REFRESH: Duration = Duration::from_secs(12 * 60 * 60);

/// The region whose Pricing API endpoint serves `region`'s prices.
pub fn api_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// Whether `region` has a Pricing API at all (GovCloud has none).
pub fn has_api(region: &str) -> bool {
    !region.starts_with("us-gov-")
}

/// The currency `region`'s prices are quoted in.
pub fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

/// A Pricing client for `region` over `sdk` (its endpoint override and credentials), talking to
/// the region [`api_region`] names. Two attempts per call: a catalog read does not wait long on
/// prices it already holds (a failed ask is repeated minutes later, not at once).
pub fn client(sdk: &aws_config::SdkConfig, region: &str) -> aws_sdk_pricing::Client {
    let config = aws_sdk_pricing::config::Builder::from(sdk)
        .region(aws_sdk_pricing::config::Region::new(api_region(region)))
        .retry_config(aws_sdk_pricing::config::retry::RetryConfig::standard().with_max_attempts(2))
        .build();
    aws_sdk_pricing::Client::from_conf(config)
}

fn term(field: &str, value: &str) -> Filter {
    Filter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .expect("field, type and value are set")
}

/// The on-demand Linux price of every instance type the Pricing API lists for `region`.
///
/// # Errors
/// AWS errors of GetProducts mapped by [`crate::error`]; [`cloud::Error::Unavailable`] when
/// the API answers but lists no price at all.
pub async fn on_demand(
    pricing: &aws_sdk_pricing::Client,
    region: &str,
) -> Result<BTreeMap<String, f64>> {
    let mut prices = BTreeMap::new();
    for (tenancy, family) in [
        ("Shared", "Compute Instance"),
        ("Dedicated", "Compute Instance (bare metal)"),
    ] {
        let mut pages = pricing
            .get_products()
            .service_code("AmazonEC2")
            .filters(term("regionCode", region))
            .filters(term("serviceCode", "AmazonEC2"))
            .filters(term("preInstalledSw", "NA"))
            .filters(term("operatingSystem", "Linux"))
            .filters(term("capacitystatus", "Used"))
            .filters(term("marketoption", "OnDemand"))
            .filters(term("tenancy", tenancy))
            .filters(term("productFamily", family))
            .max_results(100)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| from_sdk("GetProducts", &e, &[]))?;
            for item in page.price_list() {
                if let Some((instance_type, price)) = parse_item(item, currency(region)) {
                    prices.insert(instance_type, price);
                }
            }
        }
    }
    if prices.is_empty() {
        return Err(cloud::Error::Unavailable {
            message: format!("the Pricing API lists no on-demand Linux price in {region}"),
        });
    }
    Ok(prices)
}

/// The instance type and on-demand price of one price list item (a JSON document), `None` when
/// it has no instance type or no positive price in `currency`.
pub fn parse_item(item: &str, currency: &str) -> Option<(String, f64)> {
    let doc: serde_json::Value = serde_json::from_str(item).ok()?;
    let instance_type = doc
        .pointer("/product/attributes/instanceType")?
        .as_str()
        .filter(|t| !t.is_empty())?;
    let terms = doc.pointer("/terms/OnDemand")?.as_object()?;
    let mut price = None;
    for term in terms.values() {
        let Some(dimensions) = term.get("priceDimensions").and_then(|d| d.as_object()) else {
            continue;
        };
        for dimension in dimensions.values() {
            let parsed = dimension
                .pointer(&format!("/pricePerUnit/{currency}"))
                .and_then(|p| p.as_str())
                .and_then(|p| p.parse::<f64>().ok())
                .filter(|p| p.is_finite() && *p > 0.0);
            if parsed.is_some() {
                price = parsed;
            }
        }
    }
    Some((instance_type.to_string(), price?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One item of a GetProducts answer, in the shape the Price List API documents (trimmed).
    const ITEM: &str = r#"{
      "product": {
        "productFamily": "Compute Instance",
        "attributes": {"instanceType": "m5.large", "regionCode": "eu-west-1",
                       "operatingSystem": "Linux", "tenancy": "Shared", "vcpu": "2"},
        "sku": "SKU1"
      },
      "serviceCode": "AmazonEC2",
      "terms": {"OnDemand": {"SKU1.JRTCKXETXF": {
        "priceDimensions": {"SKU1.JRTCKXETXF.6YS6EN2CT7": {
          "unit": "Hrs", "pricePerUnit": {"USD": "0.1070000000"},
          "description": "$0.107 per On Demand Linux m5.large Instance Hour"}},
        "sku": "SKU1", "effectiveDate": "2026-11-01T00:00:00Z"}}},
      "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"
    }"#;

    #[test]
    fn an_item_gives_its_type_and_hourly_price() {
        assert_eq!(
            parse_item(ITEM, "USD"),
            Some(("m5.large".to_string(), 0.107))
        );
        // China quotes CNY: the USD item has no price there.
        assert_eq!(parse_item(ITEM, "CNY"), None);
    }

    #[test]
    fn items_without_a_type_or_a_positive_price_are_skipped() {
        assert_eq!(parse_item(&ITEM.replace("m5.large", ""), "USD"), None);
        assert_eq!(
            parse_item(&ITEM.replace("0.1070000000", "0.0000000000"), "USD"),
            None
        );
        assert_eq!(
            parse_item(&ITEM.replace("0.1070000000", "n/a"), "USD"),
            None
        );
        assert_eq!(parse_item("not json", "USD"), None);
    }

    #[test]
    fn the_api_answers_from_three_regions() {
        assert_eq!(api_region("us-west-2"), "us-east-1");
        assert_eq!(api_region("ca-central-1"), "us-east-1");
        assert_eq!(api_region("eu-west-1"), "eu-central-1");
        assert_eq!(api_region("ap-northeast-1"), "ap-south-1");
        assert_eq!(api_region("cn-north-1"), "cn-northwest-1");
        assert!(!has_api("us-gov-west-1"));
        assert!(has_api("us-east-1"));
    }
}
