#!/usr/bin/env python3
"""Copies the AWS facts in ../shared/data/aws/ into planner/engine/data/aws/ for the built-in catalog.

instance-types.json is copied unchanged; on-demand-prices-us-east-1.json goes unchanged to
common/data/aws/ (the services share it through `common::ec2::prices`; one copy only). The zones file
(1.2 MB, 30 regions) is split into one small file per region, planner/engine/data/aws/zones/<region>.json,
so that the planner parses only the region it is asked for. Each maps an instance type to the
letters of the zones that offer it: {"region": "us-east-1", "types": {"m5.large": "abcdf"}} means
us-east-1a, us-east-1b, us-east-1c, us-east-1d and us-east-1f.

Two facts the shared file trims are added to each type from the instance-type data of the moto
package that file was made from (`moto/ec2/resources/instance_types.json.gz`, found in the test
virtualenv `scripts/moto.sh` installs, or given as MOTO_INSTANCE_TYPES): `sustainedClockSpeedMhz`
(ProcessorInfo.SustainedClockSpeedInGhz x 1000, rounded) and `ebsBandwidthMbps`
(EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps, only where EbsOptimizedSupport is `default`), as
Karpenter's `pkg/providers/instancetype/types.go` (aws/karpenter-provider-aws) reads them for the
`karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz` and `karpenter.k8s.aws/instance-ebs-bandwidth`
labels.

Usage: python3 scripts/aws-data.py [SHARED_AWS_DIR]   (default ../shared/data/aws)
"""
import glob
import gzip
import json
import os
import shutil
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "data", "aws")
dst = os.path.join(root, "planner", "engine", "data", "aws")
os.makedirs(os.path.join(dst, "zones"), exist_ok=True)

moto = os.environ.get("MOTO_INSTANCE_TYPES") or next(iter(sorted(glob.glob(os.path.expanduser(
    "~/.cache/dovetail/venv-moto/lib/python*/site-packages/moto/ec2/resources/instance_types.json.gz"
)))), None)
if not moto or not os.path.exists(moto):
    sys.exit("moto's instance_types.json.gz not found: run scripts/moto.sh or set MOTO_INSTANCE_TYPES")
with gzip.open(moto) as f:
    raw = json.load(f)
with open(os.path.join(src, "instance-types.json")) as f:
    types = json.load(f)
for t in types["instanceTypes"]:
    r = raw.get(t["name"], {})
    ghz = r.get("ProcessorInfo", {}).get("SustainedClockSpeedInGhz")
    if ghz:
        t["sustainedClockSpeedMhz"] = int(round(ghz * 1000))
    ebs = r.get("EbsInfo", {})
    mbps = ebs.get("EbsOptimizedInfo", {}).get("MaximumBandwidthInMbps")
    if mbps and ebs.get("EbsOptimizedSupport") == "default":
        t["ebsBandwidthMbps"] = mbps
with open(os.path.join(dst, "instance-types.json"), "w") as f:
    json.dump(types, f, indent=1, ensure_ascii=False)
    f.write("\n")
common = os.path.join(root, "common", "data", "aws")
os.makedirs(common, exist_ok=True)
name = "on-demand-prices-us-east-1.json"
shutil.copyfile(os.path.join(src, name), os.path.join(common, name))
with open(os.path.join(src, "README.md")) as f:
    readme = f.read()
readme += """
## In this copy
`instance-types.json` is the shared file with `sustainedClockSpeedMhz` and `ebsBandwidthMbps` added
from moto's instance-type data (see `scripts/aws-data.py`); `on-demand-prices-us-east-1.json` is in `common/data/aws/`
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
