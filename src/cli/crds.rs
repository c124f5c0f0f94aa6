//! `dovetail crds`: print the custom resource definitions dovetail uses (Karpenter's NodePool,
//! NodeClaim and EC2NodeClass) as multi-document YAML, or write one file per CRD into a folder
//! (`dovetail crds --output-dir deploy/crds` regenerates the checked-in copies).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;

/// Arguments of `dovetail crds`.
#[derive(Debug, Args)]
pub(crate) struct CrdsArgs {
    /// Write one `<group>_<plural>.yaml` per CRD into this folder instead of printing them.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

/// Runs `dovetail crds`.
pub(crate) fn run(args: &CrdsArgs) -> Result<(), CliError> {
    let rendered = |e: crds::Error| CliError::Input(e.to_string());
    match &args.output_dir {
        None => {
            let text = crds::render_yaml().map_err(rendered)?;
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            for crd in crds::crds() {
                let text = format!("---\n{}", crds::crd_yaml(&crd).map_err(rendered)?);
                std::fs::write(dir.join(crds::file_name(&crd)), text)?;
            }
        }
    }
    Ok(())
}
