#!/usr/bin/env python3
"""Copies the AWS facts in ../shared/data/aws/ into planner/engine/data/aws/ for the built-in catalog.

instance-types.json is copied unchanged; on-demand-prices-us-east-1.json goes unchanged to
common/data/aws/ (the services share it through `common::ec2::prices`; one copy only). The zones file
(1.2 MB, 30 regions) is split into one small file per region, planner/engine/data/aws/zones/<region>.json,
so that the planner parses only the region it is asked for. Each maps an instance type to the
letters of the zones that offer it: {"region": "us-east-1", "types": {"m5.large": "abcdf"}} means
us-east-1a, us-east-1b, us-east-1c, us-east-1d and us-east-1f.

Usage: python3 scripts/aws-data.py [SHARED_AWS_DIR]   (default ../shared/data/aws)
"""
import json
import os
import shutil
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "data", "aws")
dst = os.path.join(root, "planner", "engine", "data", "aws")
os.makedirs(os.path.join(dst, "zones"), exist_ok=True)

shutil.copyfile(os.path.join(src, "instance-types.json"), os.path.join(dst, "instance-types.json"))
common = os.path.join(root, "common", "data", "aws")
os.makedirs(common, exist_ok=True)
name = "on-demand-prices-us-east-1.json"
shutil.copyfile(os.path.join(src, name), os.path.join(common, name))
with open(os.path.join(src, "README.md")) as f:
    readme = f.read()
readme += """
## In this copy
`instance-types.json` is unchanged; `on-demand-prices-us-east-1.json` is in `common/data/aws/`
(unchanged; `common::ec2::prices` parses it for the planner and the actuator). `zones-by-region.json`
is split by `scripts/aws-data.py` into `zones/<region>.json`, one file per region mapping each
instance type to the letters of its zones (`"m5.large": "abcdf"` is us-east-1a, -b, -c, -d and -f),
so that the planner parses only the region it plans for. `planner/engine/src/catalog/aws.rs` embeds them.
"""
with open(os.path.join(dst, "README.md"), "w") as f:
    f.write(readme)

with open(os.path.join(src, "zones-by-region.json")) as f:
    zones = json.load(f)
for region, types in sorted(zones["regions"].items()):
    out = {"source": zones["source"], "region": region, "types": {}}
    for name, zs in sorted(types.items()):
        letters = []
        for z in sorted(zs):
            if not (z.startswith(region) and len(z) == len(region) + 1):
                sys.exit(f"zone {z} of {name} is not {region} plus one letter")
            letters.append(z[len(region):])
        out["types"][name] = "".join(letters)
    with open(os.path.join(dst, "zones", f"{region}.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
print("wrote", dst)
