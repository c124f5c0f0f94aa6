//! `deploy/crds/` holds exactly what the code generates. Regenerate with
//! `DOVETAIL_UPDATE_CRDS=1 cargo nextest run -p crds deploy_crds` (or `dovetail crds`).

use std::path::PathBuf;

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

#[test]
fn deploy_crds_match_the_code() -> anyhow::Result<()> {
    let dir = deploy_dir();
    let update = std::env::var_os("DOVETAIL_UPDATE_CRDS").is_some();
    let mut expected = Vec::new();
    for crd in crds::crds() {
        let name = crds::file_name(&crd);
        let text = format!("---\n{}", crds::crd_yaml(&crd)?);
        if update {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join(&name), &text)?;
        }
        expected.push((name, text));
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    on_disk.retain(|n| n.ends_with(".yaml"));
    on_disk.sort();
    let mut names: Vec<String> = expected.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(
        on_disk, names,
        "deploy/crds/ must hold exactly the generated CRDs; run with DOVETAIL_UPDATE_CRDS=1"
    );
    for (name, text) in expected {
        let have = std::fs::read_to_string(dir.join(&name))?;
        assert!(
            have == text,
            "deploy/crds/{name} differs from the code; regenerate with DOVETAIL_UPDATE_CRDS=1 cargo nextest run -p crds deploy_crds"
        );
    }
    Ok(())
}
