//! Times loading the built-in AWS catalog (what every `dovetail plan` without
//! `--instance-types` pays) and the other catalog sources. Prints figures; asserts nothing.
//!
//! Run: `cargo bench -p planner --bench catalog_load`

// A bench measures wall time; the clock ban is for the planner code, not for this.
#![allow(clippy::disallowed_methods)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use planner::catalog::{aws, settings, synthetic, zonal_shift};
use planner::model::{PlanOptions, VmMemoryOverhead};

fn time<T>(runs: u32, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let mut best = Duration::MAX;
    let mut total = Duration::ZERO;
    for _ in 0..runs {
        let start = Instant::now();
        black_box(f());
        let d = start.elapsed();
        best = best.min(d);
        total += d;
    }
    (best, total / runs)
}

fn main() {
    let first = Instant::now();
    let catalog = aws::builtin("us-east-1").expect("built-in catalog");
    let first = first.elapsed();
    println!(
        "aws::builtin(us-east-1): {} types, first call {:.2} ms",
        catalog.instance_types.len(),
        first.as_secs_f64() * 1e3
    );
    let (best, mean) = time(50, || aws::builtin("us-east-1").expect("built-in catalog"));
    println!(
        "aws::builtin(us-east-1): best {:.2} ms, mean {:.2} ms over 50 runs",
        best.as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3
    );
    let (best, mean) = time(50, || synthetic::karpenter_benchmark(400));
    println!(
        "synthetic::karpenter_benchmark(400): best {:.2} ms, mean {:.2} ms",
        best.as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3
    );
    // What a plan pays for Karpenter's reservedENIs / vmMemoryOverheadPercent and for a zonal
    // shift: one pass over the catalog (a copy), nothing with the defaults.
    let options = PlanOptions {
        reserved_enis: 1,
        vm_memory_overhead_percent: VmMemoryOverhead(0.1),
        ..PlanOptions::default()
    };
    for (name, o) in [
        ("defaults", PlanOptions::default()),
        ("reservedENIs=1, vm 0.1", options),
    ] {
        let (best, mean) = time(50, || {
            settings::for_options(&catalog, &o).instance_types.len()
        });
        println!(
            "settings::for_options({name}): best {:.3} ms, mean {:.3} ms",
            best.as_secs_f64() * 1e3,
            mean.as_secs_f64() * 1e3
        );
    }
    let shifted = vec!["us-east-1a".to_string()];
    let (best, mean) = time(50, || {
        zonal_shift::apply(std::borrow::Cow::Borrowed(&catalog), &shifted)
            .instance_types
            .len()
    });
    println!(
        "zonal_shift::apply(us-east-1a): best {:.3} ms, mean {:.3} ms",
        best.as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3
    );
}
