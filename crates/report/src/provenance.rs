//! `provenance.json`: what a report measured. The run's files its numbers rest on (the weights,
//! the config, the tokenizer, the snapshots), each with the size and SHA-256 of the bytes read
//! ([`inspect::load::inputs`]), and every option that changes a number: the backend, the
//! probe's source, `--probe`, `--prune-tolerance`, patching, the relation sentences.
//!
//! A report is a report of its run only while the run's manifest names the same files
//! ([`Provenance::unmatched_inputs`]); a sweep counts it as done only when it was also measured
//! with the sweep's options ([`MeasuredWith::differences`]), and measures it again otherwise.

use std::collections::BTreeMap;

use inspect::inspection::MeasureOptions;
use inspect::load::loaded_run::LoadedRun;
pub use inspect::load::text::ProbeSource;
use run::BackendKind;
use run::manifest::FileRecord;
use serde::{Deserialize, Serialize};

/// What a report measured: the run's files and the options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The weights measured: `model.safetensors`, or a checkpoint's model file; a key of
    /// `inputs`.
    pub weights: String,
    /// Every file of the run the numbers rest on, by its path relative to the run: the size
    /// and SHA-256 of the bytes measured.
    pub inputs: BTreeMap<String, FileRecord>,
    /// How they were measured.
    pub measured_with: MeasuredWith,
}

/// Every option of a report that changes a number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredWith {
    /// Where the model ran (`flex`, `ndarray`, `wgpu`): the numbers agree across backends
    /// within float rounding, not to the last bit.
    pub backend: BackendKind,
    /// What the probe's sequences are.
    pub probe: ProbeSource,
    /// `--pairs`'s file, the minimal pairs patched beside the task's; absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<PairsFileRecord>,
    /// `--probe`, `--prune-tolerance`, `--no-patching`, `--relation-sentences`,
    /// `--relations-masked`, under [`MeasureOptions`]' field names.
    #[serde(flatten)]
    pub options: MeasureOptions,
}

impl Provenance {
    /// What a report of `loaded`, measured as `measured_with` says, measured.
    pub fn of(loaded: &LoadedRun, measured_with: MeasuredWith) -> Self {
        Self {
            weights: loaded.inputs.weights.clone(),
            inputs: loaded.inputs.files.clone(),
            measured_with,
        }
    }

    /// Why this report is not a report of a run whose manifest records `current` as its
    /// measured inputs ([`run::RunDir::measured_inputs`]): the first input that differs, is
    /// gone or is new; `None` when they are the same.
    pub fn unmatched_inputs(&self, current: &BTreeMap<String, FileRecord>) -> Option<String> {
        for (name, record) in &self.inputs {
            match current.get(name) {
                None => return Some(format!("it measured {name}, which the run no longer has")),
                Some(now) if now != record => {
                    return Some(format!(
                        "it measured another {name} than the run's (SHA-256 {} measured, {} \
                         now)",
                        short(&record.sha256),
                        short(&now.sha256)
                    ));
                }
                Some(_) => {}
            }
        }
        current
            .keys()
            .find(|name| !self.inputs.contains_key(*name))
            .map(|name| format!("it did not measure the run's {name}"))
    }
}

/// A pairs file as a report names it: the file as given and the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairsFileRecord {
    /// The file, as given.
    pub file: String,
    /// SHA-256 of its bytes.
    pub sha256: String,
}

impl MeasuredWith {
    /// The options of `headlab inspect RUN` with no flags, for a run headlab trained (an
    /// imported model's default probe is the shipped treebank instead).
    pub fn defaults() -> Self {
        Self {
            backend: BackendKind::default(),
            probe: ProbeSource::default(),
            pairs: None,
            options: MeasureOptions::default(),
        }
    }

    /// Each option that differs from `wanted`, as `name VALUE (wanted VALUE)`: empty when
    /// they are the same.
    pub fn differences(&self, wanted: &MeasuredWith) -> Vec<String> {
        let fields = |value: &MeasuredWith| match serde_json::to_value(value) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let (mine, theirs) = (fields(self), fields(wanted));
        let mut names: Vec<&String> = mine.keys().chain(theirs.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter(|name| mine.get(*name) != theirs.get(*name))
            .map(|name| {
                let show = |map: &serde_json::Map<String, serde_json::Value>| {
                    map.get(name)
                        .map_or_else(|| "none".to_string(), ToString::to_string)
                };
                format!("{name} {} (wanted {})", show(&mine), show(&theirs))
            })
            .collect()
    }
}

/// The first 12 hex digits of a SHA-256: enough to tell two files apart in a message. By
/// characters: the text comes from a file on disk, which may hold anything.
fn short(sha256: &str) -> String {
    sha256.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sha: &str) -> FileRecord {
        FileRecord {
            bytes: 4,
            sha256: sha.to_string(),
        }
    }

    fn provenance(inputs: &[(&str, &str)]) -> Provenance {
        Provenance {
            weights: "model.safetensors".into(),
            inputs: inputs
                .iter()
                .map(|(name, sha)| (name.to_string(), record(sha)))
                .collect(),
            measured_with: MeasuredWith::defaults(),
        }
    }

    #[test]
    fn a_report_matches_only_the_files_it_measured() {
        let report = provenance(&[("config.toml", "aa"), ("model.safetensors", "bb")]);
        let same = report.inputs.clone();
        assert_eq!(report.unmatched_inputs(&same), None);

        let mut changed = same.clone();
        changed.insert("model.safetensors".into(), record("cc"));
        let why = report.unmatched_inputs(&changed).unwrap();
        assert!(why.contains("another model.safetensors"), "{why}");

        let mut more = same.clone();
        more.insert("snapshots/step-20.safetensors".into(), record("dd"));
        let why = report.unmatched_inputs(&more).unwrap();
        assert!(
            why.contains("did not measure the run's snapshots/step-20"),
            "{why}"
        );

        // A provenance.json edited by hand may hold anything: named, never a panic.
        let mut edited = report.clone();
        edited
            .inputs
            .insert("model.safetensors".into(), record("ééééééééééééé"));
        let why = edited.unmatched_inputs(&same).unwrap();
        assert!(why.contains("éééééééééééé measured"), "{why}");

        let mut fewer = same;
        fewer.remove("config.toml");
        let why = report.unmatched_inputs(&fewer).unwrap();
        assert!(
            why.contains("config.toml, which the run no longer has"),
            "{why}"
        );
    }

    #[test]
    fn differences_name_each_option_with_both_values() {
        let defaults = MeasuredWith::defaults();
        assert!(defaults.differences(&MeasuredWith::defaults()).is_empty());
        let mut other = MeasuredWith::defaults();
        other.options.probe_size = 2;
        other.backend = BackendKind::Ndarray;
        assert_eq!(
            other.differences(&defaults),
            [
                "backend \"ndarray\" (wanted \"flex\")",
                "probe_size 2 (wanted 64)"
            ]
        );
    }

    #[test]
    fn provenance_reads_back_as_written() {
        let mut report = provenance(&[("model.safetensors", "bb")]);
        report.measured_with.probe = ProbeSource::Treebank {
            file: "/data/en_ewt-ud-test.conllu".into(),
            bytes: 10,
            sha256: "ee".into(),
        };
        let json = serde_json::to_string_pretty(&report).unwrap();
        assert!(json.contains("\"kind\": \"treebank\""), "{json}");
        assert!(json.contains("\"probe_size\": 64"), "{json}");
        let back: Provenance = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report);
    }
}
