//! Every config shipped in `configs/` and `configs/experiments/` loads, resolves (task
//! built, model checked) and names a distinct run. Whether each one reaches its accuracy is `scripts/check/train_all.sh`'s job.

use std::path::{Path, PathBuf};

use run::RunConfig;
use tasks::TaskConfig;

fn shipped_configs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let mut configs: Vec<PathBuf> = [dir.clone(), dir.join("experiments")]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).unwrap().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    configs.sort();
    configs
}

#[test]
fn every_shipped_config_resolves() {
    // Relative dataset paths resolve against the current directory: the repository root.
    std::env::set_current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap();
    let configs = shipped_configs();
    let mut kinds: Vec<&str> = vec![];
    let mut names = vec![];
    for path in &configs {
        let config = RunConfig::load(path, &[]).unwrap_or_else(|e| panic!("{e}"));
        names.push(config.name.clone());
        kinds.push(config.task.kind_name());
        config.resolve(path).unwrap_or_else(|e| panic!("{e}"));
    }
    for kind in TaskConfig::KINDS {
        assert!(kinds.contains(&kind), "no config for the {kind} task");
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), configs.len(), "two configs share a run name");
}

#[test]
fn the_resolved_config_round_trips_through_toml() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny.toml");
    let config = RunConfig::load(&path, &["model.head_layout=narrow".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("config.toml");
    std::fs::write(&written, config.to_toml()).unwrap();
    assert_eq!(RunConfig::from_toml(&written).unwrap(), config);
}
