#!/usr/bin/env python3
"""Generates the built-in on-demand price tables from the prices Karpenter's AWS provider publishes.

Input: a copy of pkg/providers/pricing/zz_generated.pricing_aws.go of github.com/aws/karpenter-provider-aws
(a Go map literal `InitialOnDemandPricesAWS`: region -> instance type -> USD per hour, on-demand
Linux). Output: one file per region the input has, common/data/aws/on-demand-prices-<region>.json:

    {"source": "...", "region": "us-east-1", "onDemand": {"m5.large": 0.096, ...}}

Only the data is written, none of Karpenter's code. Karpenter publishes one region today
(us-east-1; its hack/code/prices_gen/main.go lists the regions it generates); for any other region
Karpenter starts from us-east-1's table (pkg/providers/pricing/pricing.go, `Reset`) until the
Pricing API answers, and `common::ec2::prices` does the same. A region the input names but whose
file `common/src/ec2/prices.rs` does not list fails the `every_generated_table_is_embedded` test.

Usage: python3 scripts/aws-prices.py PATH/TO/zz_generated.pricing_aws.go
"""
import json
import os
import re
import sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
path = sys.argv[1]
with open(path) as f:
    text = f.read()

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out_dir = os.path.join(root, "common", "data", "aws")

generated = re.search(r"// generated at (\S+)", text)
if not generated:
    sys.exit(f"{path}: no '// generated at <time>' line; is this zz_generated.pricing_aws.go?")
if "InitialOnDemandPricesAWS" not in text:
    sys.exit(f"{path}: no InitialOnDemandPricesAWS map; is this zz_generated.pricing_aws.go?")

region_re = re.compile(r'^\t"([a-z]{2}(?:-[a-z]+)+-\d+)": \{$')
price_re = re.compile(r'"([a-z0-9-]+\.[a-z0-9-]+)": ([0-9]+(?:\.[0-9]+)?)')
tables = {}
region = None
for number, line in enumerate(text.splitlines(), 1):
    m = region_re.match(line)
    if m:
        region = m.group(1)
        if region in tables:
            sys.exit(f"{path}:{number}: region {region} appears twice")
        tables[region] = {}
        continue
    if line == "\t},":
        region = None
        continue
    if region is None:
        continue
    stripped = line.strip()
    if not stripped or stripped.startswith("//"):
        continue
    pairs = price_re.findall(stripped)
    # Every entry on a price line must be understood: a line with text the pattern skips would
    # lose prices silently.
    rebuilt = ", ".join(f'"{t}": {p}' for t, p in pairs)
    if not pairs or rebuilt.rstrip(",") != stripped.rstrip(","):
        sys.exit(f"{path}:{number}: cannot read price line {stripped!r}")
    for name, price in pairs:
        value = float(price)
        if value <= 0:
            sys.exit(f"{path}:{number}: {name} in {region} has price {price}")
        tables[region][name] = value

if not tables:
    sys.exit(f"{path}: no region blocks found")
for region, prices in sorted(tables.items()):
    out = {
        "source": (
            "AWS on-demand Linux prices, USD per hour, as published in aws/karpenter-provider-aws "
            f"(pkg/providers/pricing/zz_generated.pricing_aws.go), generated {generated.group(1)} "
            f"for {region}"
        ),
        "region": region,
        "onDemand": dict(sorted(prices.items())),
    }
    dst = os.path.join(out_dir, f"on-demand-prices-{region}.json")
    with open(dst, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {dst}: {len(prices)} instance types")
