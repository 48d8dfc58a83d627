//! `headlab sweep submit --slurm`: the runs that are not done, as one Slurm job array. Each
//! array task runs `headlab sweep task FILE --out OUT --index I`, which trains (or resumes)
//! and inspects the plan's run I exactly as a local worker would. The batch script asks for
//! SIGTERM 60 s before the time limit (`--signal=B:TERM@60`) and `sweep task` passes it to
//! `train`, which checkpoints; preempted tasks are requeued (`--requeue`), and a task that ran
//! out of time is resumed by the next `submit`, which submits only the runs still left.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `submit` asks of Slurm.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--time` (Slurm's format: `MM`, `HH:MM:SS`, `D-HH`).
    pub time: Option<String>,
    /// At most this many array tasks at once (`--array=...%K`).
    pub max_parallel: usize,
    /// `--cpus-per-task`.
    pub cpus_per_task: usize,
    /// Further `#SBATCH` options, verbatim (`--account=x`, `--mem=4G`).
    pub extra: Vec<String>,
}

/// Everything the batch script names.
#[derive(Debug, Clone)]
pub struct BatchJob<'a> {
    /// Job name.
    pub name: &'a str,
    /// The `headlab` binary (absolute).
    pub headlab: &'a Path,
    /// The sweep file (absolute).
    pub sweep_file: &'a Path,
    /// The output directory (absolute).
    pub out: &'a Path,
    /// Where Slurm writes each task's output.
    pub slurm_dir: &'a Path,
    /// The plan indices to run.
    pub indices: &'a [usize],
}

/// `0-3,7,9-12`: sorted indices as Slurm's array ranges.
pub fn array_ranges(indices: &[usize]) -> String {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The batch script.
pub fn batch_script(job: &BatchJob, options: &SlurmOptions) -> String {
    let mut script = String::from("#!/bin/bash\n");
    let mut directive = |line: String| {
        let _ = writeln!(script, "#SBATCH {line}");
    };
    directive(format!("--job-name=headlab-{}", job.name));
    directive(format!(
        "--array={}%{}",
        array_ranges(job.indices),
        options.max_parallel.max(1)
    ));
    directive(format!("--cpus-per-task={}", options.cpus_per_task.max(1)));
    // #SBATCH lines are not shell: the path goes in unquoted (submit refuses whitespace).
    directive(format!(
        "--output={}",
        job.slurm_dir.join("%A_%a.txt").display()
    ));
    directive("--open-mode=append".to_string());
    // SIGTERM to this script (which `exec`s into sweep) a minute before the time limit, so
    // train checkpoints; requeue when preempted.
    directive("--signal=B:TERM@60".to_string());
    directive("--requeue".to_string());
    if let Some(partition) = &options.partition {
        directive(format!("--partition={partition}"));
    }
    if let Some(time) = &options.time {
        directive(format!("--time={time}"));
    }
    for extra in &options.extra {
        directive(extra.clone());
    }
    let _ = writeln!(
        script,
        "# Written by `headlab sweep submit`: one task per run of {}.",
        job.sweep_file.display()
    );
    let _ = writeln!(
        script,
        "exec {} sweep task {} --out {} --index \"$SLURM_ARRAY_TASK_ID\"",
        shell_word(&job.headlab.display().to_string()),
        shell_word(&job.sweep_file.display().to_string()),
        shell_word(&job.out.display().to_string()),
    );
    script
}

/// Single-quoted for bash.
pub fn shell_word(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Submits `script` with `sbatch --parsable` and returns the job id.
pub fn submit(script_path: &Path) -> Result<String, String> {
    let output = Command::new("sbatch")
        .arg("--parsable")
        .arg(script_path)
        .output()
        .map_err(|e| {
            format!(
                "cannot run sbatch ({e}); is Slurm installed here? (scripts/setup/slurm-local.sh \
                 starts a one-machine cluster for trying it)"
            )
        })?;
    if !output.status.success() {
        return Err(format!(
            "sbatch refused {}: {}",
            script_path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    // `--parsable` prints `jobid` or `jobid;cluster`.
    Ok(text
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Array tasks of `job_ids` that Slurm still lists, by state (PENDING, RUNNING, ...), or
/// None when `squeue` is not there.
pub fn queued_tasks(job_ids: &[String]) -> Option<Vec<(String, String)>> {
    if job_ids.is_empty() {
        return Some(Vec::new());
    }
    let output = Command::new("squeue")
        .args(["-h", "-r", "-o", "%i %T", "-j", &job_ids.join(",")])
        .output()
        .ok()?;
    if !output.status.success() {
        // squeue fails for job ids it no longer knows: nothing is queued.
        return Some(Vec::new());
    }
    Some(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| {
                let (id, state) = line.trim().split_once(' ')?;
                Some((id.to_string(), state.to_string()))
            })
            .collect(),
    )
}

/// `_sweep/slurm/jobs.txt`: one submitted job id per line.
pub fn jobs_file(slurm_dir: &Path) -> PathBuf {
    slurm_dir.join("jobs.txt")
}

/// The job ids recorded in `jobs.txt`.
pub fn recorded_jobs(slurm_dir: &Path) -> Vec<String> {
    std::fs::read_to_string(jobs_file(slurm_dir))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_runs_of_indices() {
        assert_eq!(array_ranges(&[0, 1, 2, 3, 7, 9, 10, 11, 12]), "0-3,7,9-12");
        assert_eq!(array_ranges(&[5]), "5");
        assert_eq!(array_ranges(&[3, 1, 2, 2]), "1-3");
    }

    #[test]
    fn the_script_runs_sweep_task_per_index() {
        let job = BatchJob {
            name: "demo",
            headlab: Path::new("/opt/headlab/headlab"),
            sweep_file: Path::new("/home/me/it's.toml"),
            out: Path::new("/scratch/runs/demo"),
            slurm_dir: Path::new("/scratch/runs/demo/_sweep/slurm"),
            indices: &[0, 1, 4],
        };
        let options = SlurmOptions {
            partition: Some("gpu".into()),
            time: Some("01:00:00".into()),
            max_parallel: 8,
            cpus_per_task: 2,
            extra: vec!["--mem=4G".into()],
        };
        let script = batch_script(&job, &options);
        for line in [
            "#SBATCH --array=0-1,4%8",
            "#SBATCH --cpus-per-task=2",
            "#SBATCH --signal=B:TERM@60",
            "#SBATCH --requeue",
            "#SBATCH --partition=gpu",
            "#SBATCH --time=01:00:00",
            "#SBATCH --mem=4G",
            "#SBATCH --output=/scratch/runs/demo/_sweep/slurm/%A_%a.txt",
            "exec '/opt/headlab/headlab' sweep task '/home/me/it'\\''s.toml' --out '/scratch/runs/demo' \
             --index \"$SLURM_ARRAY_TASK_ID\"",
        ] {
            assert!(
                script.lines().any(|l| l == line),
                "{line} missing in\n{script}"
            );
        }
    }
}
