//! `metrics.jsonl`: one JSON object per logged step. Appended as training goes; on resume,
//! lines past the checkpoint (and a torn last line from a kill) are dropped first.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::atomic::write_atomic;

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsRecord {
    /// Optimizer steps completed.
    pub step: usize,
    /// Training loss of the last step.
    pub loss: f64,
    /// Learning rate of the last step.
    pub lr: f64,
    /// Training throughput since the previous record (input tokens per second), the
    /// previous record's evaluation excluded.
    pub tokens_per_s: f64,
    /// Wall-clock seconds of training so far.
    pub elapsed_s: f64,
    /// Mean loss on the evaluation set (evaluation steps only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub eval_loss: Option<f64>,
    /// Fraction of scored evaluation tokens predicted right.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub eval_token_acc: Option<f64>,
    /// Fraction of evaluation sequences entirely right.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub eval_seq_acc: Option<f64>,
}

/// Appends records to a run's `metrics.jsonl`.
#[derive(Debug)]
pub struct MetricsLog {
    path: PathBuf,
    file: File,
}

impl MetricsLog {
    /// Opens the log at `path`, keeping only complete records with `step <= keep_up_to`.
    pub fn open(path: &Path, keep_up_to: usize) -> io::Result<Self> {
        let path = path.to_path_buf();
        // Keep the lines as written: re-serializing parsed floats could change their digits.
        let written = fs::read_to_string(&path).unwrap_or_default();
        let kept: String = written
            .lines()
            .filter(|line| {
                serde_json::from_str::<MetricsRecord>(line).is_ok_and(|r| r.step <= keep_up_to)
            })
            .map(|line| format!("{line}\n"))
            .collect();
        // A run resumed where its log ends (one that trains nothing, say) is left untouched.
        if kept != written || !path.exists() {
            write_atomic(&path, kept.as_bytes())?;
        }
        let file = OpenOptions::new().append(true).open(&path)?;
        Ok(Self { path, file })
    }

    /// Appends one record.
    pub fn append(&mut self, record: &MetricsRecord) -> io::Result<()> {
        let line = serde_json::to_string(record).expect("serializes") + "\n";
        self.file.write_all(line.as_bytes())
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Every complete record of a `metrics.jsonl` (a torn or foreign line is skipped).
pub fn read(path: &Path) -> Vec<MetricsRecord> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}
