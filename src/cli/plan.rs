//! `dovetail plan`: read manifests, plan, print the plan as JSON or as a table.

use std::io::{IsTerminal, Write};

use clap::builder::TypedValueParser as _;
use clap::{Args, ValueEnum};
use planner::model::{MinValuesPolicy, Named, PlanOptions, PreferencePolicy};
use planner_manifests as manifests;

use super::CliError;
use super::backend::{CatalogChoice, Local, PlanBackend, PlanRequest, Planned};
use super::remote::Remote;
use super::table;

/// Arguments of `dovetail plan`.
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// Manifests: YAML (multi-document) or JSON files, folders (searched recursively for
    /// *.yaml, *.yml, *.json), or `-` for standard input. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true, num_args = 1..)]
    files: Vec<String>,
    /// Instance-type catalog file (YAML or JSON) that replaces the built-in AWS catalog.
    #[arg(long, value_name = "FILE")]
    instance_types: Option<String>,
    /// Region of the built-in AWS catalog.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// The clock for time-based rules (consolidateAfter, expireAfter, budget schedules), as
    /// RFC 3339, e.g. 2024-05-01T12:00:00Z. Default: the current time.
    #[arg(long, value_name = "RFC3339")]
    now: Option<String>,
    /// Whether preferred affinities and ScheduleAnyway spreads are honoured.
    #[arg(long, ignore_case = true, default_value = "Respect", value_parser = named::<PreferencePolicy>())]
    preference_policy: PreferencePolicy,
    /// What happens when a NodePool's minValues cannot be met.
    #[arg(long, ignore_case = true, default_value = "Strict", value_parser = named::<MinValuesPolicy>())]
    min_values_policy: MinValuesPolicy,
    /// Allow replacing a spot node with a cheaper spot node (as the feature gate
    /// SpotToSpotConsolidation=true).
    #[arg(long)]
    spot_to_spot_consolidation: bool,
    /// Karpenter's feature gates, `Name=true|false` separated by commas, over Karpenter v1.14's
    /// defaults (NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,
    /// NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false). Plans read
    /// SpotToSpotConsolidation, StaticCapacity (NodePools with spec.replicas) and
    /// CapacityBuffer (CapacityBuffers reserve capacity).
    #[arg(long, value_name = "GATES", default_value = "", value_parser = feature_gates)]
    feature_gates: common::feature_gates::FeatureGates,
    /// ENIs of each type's default network card left out of its max pods (Karpenter's
    /// reservedENIs, for VPC CNI custom networking).
    #[arg(long, value_name = "N", default_value_t = 0)]
    reserved_enis: u32,
    /// Fraction of an instance type's memory taken off for the hypervisor (Karpenter's
    /// vmMemoryOverheadPercent), at least 0 and below 1.
    #[arg(long, value_name = "FRACTION", default_value = "0.075", value_parser = vm_memory_overhead)]
    vm_memory_overhead_percent: f64,
    /// Karpenter's ignoreDRARequests (--ignore-dra-requests, IGNORE_DRA_REQUESTS): true (the
    /// default) plans nothing for pods with Dynamic Resource Allocation requests (ResourceClaims);
    /// false allocates their claims' devices from the input's ResourceSlices as Karpenter v1.14.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    ignore_dra_requests: bool,
    /// Zones under an ARC zonal shift (Karpenter's ENABLE_ZONAL_SHIFT): no new capacity there
    /// and no voluntary disruption of its nodes.
    #[arg(long, value_name = "ZONE[,ZONE...]", value_delimiter = ',')]
    shifted_zones: Vec<String>,
    /// Compute only the launch plan (no consolidation, drift or expiry).
    #[arg(long)]
    no_disruption: bool,
    /// Plan on a dovetail-planner service instead of in-process: HOST:PORT, several separated
    /// by commas (or a name that resolves to several addresses); a failed call is retried on
    /// another replica. The output is the same.
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT...]", value_delimiter = ',')]
    server: Vec<String>,
    /// Bearer token for --server.
    #[arg(
        long,
        env = "DOVETAIL_TOKEN",
        hide_env_values = true,
        requires = "server"
    )]
    token: Option<String>,
    /// Most pods the input may expand to (workload replicas included); checked before any is
    /// created.
    #[arg(long, value_name = "N", default_value_t = manifests::DEFAULT_MAX_PODS)]
    max_pods: usize,
    /// Most bytes read from all inputs together.
    #[arg(long, value_name = "BYTES", default_value_t = manifests::DEFAULT_MAX_INPUT_BYTES)]
    max_input_bytes: u64,
    /// Output format. Default: `table` when standard output is a terminal, `json` otherwise.
    #[arg(short = 'o', long, value_enum, ignore_case = true)]
    output: Option<OutputFormat>,
    /// Refuse (exit 2, no plan) when an object had to be left out of the plan, instead of
    /// planning the rest and warning about it on standard error.
    #[arg(long)]
    strict: bool,
}

/// A flag whose values are a model enum's names (the table on the enum, [`Named`]); matching
/// ignores case as the flags always have.
fn named<T: Named + Send + Sync>() -> impl clap::builder::TypedValueParser<Value = T> {
    clap::builder::PossibleValuesParser::new(T::names()).map(|s| {
        T::VARIANTS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&s))
            .map(|(_, v)| *v)
            .unwrap_or(T::VARIANTS[0].1)
    })
}

/// `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    /// The contract's JSON (`designs/planner-io.md`), pretty-printed.
    Json,
    /// A table for people.
    Table,
}

/// Runs `dovetail plan`.
pub(super) fn run(args: &PlanArgs, clock_now: i64) -> Result<(), CliError> {
    let now = match &args.now {
        Some(text) => manifests::time::parse_rfc3339(text)
            .map_err(|e| CliError::Input(format!("--now: {e}")))?,
        None => clock_now,
    };
    let catalog = match &args.instance_types {
        Some(path) => CatalogChoice::File {
            path: path.clone(),
            text: std::fs::read_to_string(path)
                .map_err(|e| CliError::Input(format!("--instance-types {path}: {e}")))?,
        },
        None => CatalogChoice::Builtin {
            region: args.region.clone(),
        },
    };
    let limits = manifests::Limits {
        max_pods: args.max_pods,
        max_input_bytes: args.max_input_bytes,
    };
    let loaded = manifests::load_paths_with(&args.files, &limits)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    if loaded.snapshot == planner::model::ClusterSnapshot::default() {
        eprintln!(
            "note: the input ({}) holds no objects the planner uses; the plan is empty",
            args.files.join(", ")
        );
    }
    let mut snapshot = loaded.snapshot;
    snapshot.shifted_zones = args
        .shifted_zones
        .iter()
        .map(|z| z.trim().to_string())
        .filter(|z| !z.is_empty())
        .collect();
    let request = PlanRequest {
        snapshot,
        catalog,
        options: PlanOptions {
            now,
            preference_policy: args.preference_policy,
            min_values_policy: args.min_values_policy,
            spot_to_spot_consolidation: args.spot_to_spot_consolidation
                || args.feature_gates.spot_to_spot_consolidation,
            no_disruption: args.no_disruption,
            static_capacity: args.feature_gates.static_capacity,
            node_overlay: args.feature_gates.node_overlay,
            capacity_buffer: args.feature_gates.capacity_buffer,
            reserved_enis: args.reserved_enis,
            vm_memory_overhead_percent: planner::model::VmMemoryOverhead(
                args.vm_memory_overhead_percent,
            ),
            ignore_dra_requests: args.ignore_dra_requests,
        },
    };
    let planned = if args.server.is_empty() {
        Local.plan(&request)?
    } else {
        Remote {
            endpoints: args.server.clone(),
            token: args.token.clone(),
        }
        .plan(&request)?
    };
    for e in &planned.plan.excluded {
        eprintln!("warning: {}", excluded_line(e));
    }
    if args.strict && !planned.plan.excluded.is_empty() {
        return Err(CliError::Input(format!(
            "--strict: {} object(s) could not be planned: {}",
            planned.plan.excluded.len(),
            planned
                .plan
                .excluded
                .iter()
                .map(excluded_line)
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    let format = args.output.unwrap_or(if std::io::stdout().is_terminal() {
        OutputFormat::Table
    } else {
        OutputFormat::Json
    });
    write_output(&planned, format)
}

/// `NodePool gpu left out of the plan (Invalid, disruption.budgets[0].schedule): ...`.
fn excluded_line(e: &planner::plan::ExcludedObject) -> String {
    let what = if e.namespace.is_empty() {
        e.name.clone()
    } else {
        format!("{}/{}", e.namespace, e.name)
    };
    let field = if e.field.is_empty() {
        String::new()
    } else {
        format!(", {}", e.field)
    };
    format!(
        "{} {what} left out of the plan ({}{field}): {}",
        e.kind, e.reason, e.message
    )
}

fn write_output(planned: &Planned, format: OutputFormat) -> Result<(), CliError> {
    let text = match format {
        OutputFormat::Json => {
            // Catalog notes that the plan does not already carry go to stderr, so that
            // standard output stays exactly the plan.
            for n in &planned.catalog_notes {
                if !planned.plan.notes.contains(n) {
                    eprintln!("note: {n}");
                }
            }
            let mut json = serde_json::to_string_pretty(&planned.plan)
                .map_err(|e| CliError::Output(std::io::Error::other(e)))?;
            json.push('\n');
            json
        }
        OutputFormat::Table => table::render(&planned.plan, &planned.catalog_notes),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// `--feature-gates`, parsed over Karpenter's defaults.
fn vm_memory_overhead(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && (0.0..1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "{text:?} is not a fraction at least 0 and below 1, e.g. 0.075 (7.5%)"
        )),
    }
}

fn feature_gates(text: &str) -> Result<common::feature_gates::FeatureGates, String> {
    common::feature_gates::FeatureGates::parse(text)
}
