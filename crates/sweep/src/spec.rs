//! The sweep file: base configs, a grid of overrides, seeds and what to run after training,
//! expanded into a plan of runs, each one `train` invocation with its own run directory.
//!
//! ```toml
//! name = "layouts"                      # default: the file's stem; runs go to runs/<name>/
//! configs = ["../experiments/layouts-sort.toml"]   # relative to this file
//! seeds = { from = 0, count = 16 }      # or a list: seeds = [0, 1, 2]
//! run_name = "{config}-{model.head_layout}-s{seed}"   # optional; this is the default
//! group_seeds = 16                      # seeds of a grid point trained as one batched model
//!                                       # (default: 16 on wgpu, 1 on the CPU backends)
//!
//! [grid]                                # every combination of these values
//! "model.head_layout" = ["split", "wide", "narrow"]
//!
//! [set]                                 # fixed overrides for every run
//! "train.snapshot_every" = 0
//!
//! [inspect]                             # after training (default: on, inspect's defaults)
//! enabled = true
//! probe = 64
//! prune_tolerance = 0.01
//! ```
//!
//! Runs are ordered seed-major (every grid point's seed 0, then every grid point's seed 1, ...)
//! so a sweep stopped half-way has the same number of seeds at every grid point. A run's index
//! in the plan is its Slurm array index: it stays the same as long as the file does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use inspect::interventions::pruning::parse_tolerance;
use inspect::load::probe::{Probe, parse_size};
use report::provenance::MeasuredWith;
use run::{BackendKind, ResolvedRun, RunConfig};
use serde::Deserialize;

/// Most runs one sweep may plan: a typo such as `count = 1e9` must not allocate a billion
/// plans or launch a billion jobs.
pub const MAX_RUNS: usize = 100_000;

/// The largest `group_seeds`: `train --seeds` trains at most this many together.
pub const MAX_GROUP_SEEDS: usize = run::config::MAX_GROUP_SEEDS;

/// The group size when `group_seeds` is left out and a grid point trains on wgpu. Measured
/// (docs/performance.md, "Many seeds as one model"): where every op pays a dispatch, as on wgpu, a group
/// amortises it (16 seeds 2.2x the seed-steps of separate runs on wgpu over lavapipe, 4 seeds
/// 2.0x); a small model's parameters and activations times 16 are a few hundred MB at most.
/// On the CPU backends a group is no faster than separate runs (0.7x to 1.1x), so there the
/// default is 1.
pub const AUTO_GROUP_SEEDS_WGPU: usize = 16;

/// The sweep file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    name: Option<String>,
    configs: Vec<PathBuf>,
    seeds: Seeds,
    run_name: Option<String>,
    group_seeds: Option<i64>,
    #[serde(default)]
    grid: toml::Table,
    #[serde(default)]
    set: toml::Table,
    #[serde(default)]
    inspect: InspectStep,
}

/// `seeds`: a list, or a range. Read by [`SeedsVisitor`], so that a bad value is named
/// with the accepted forms (serde's untagged enums say only that nothing matched).
#[derive(Debug, Clone)]
enum Seeds {
    List(Vec<u64>),
    Range(SeedRange),
}

/// `seeds = { from = 0, count = 16 }`.
#[derive(Debug, Clone)]
struct SeedRange {
    from: u64,
    count: u64,
}

/// The largest seed: `train` reads a seed as a TOML integer, at most 2^63 - 1.
const MAX_SEED: u64 = i64::MAX as u64;

/// What `seeds` accepts, for messages.
const SEED_FORMS: &str = "give a list of integers 0..=9223372036854775807 (`seeds = [0, 1, 2]`) \
                          or a range (`seeds = { from = 0, count = 16 }`)";

/// Messages about `seeds` start with this, so that `Sweep::parse` can name the key.
const SEEDS_ERROR: &str = "seeds: ";

impl<'de> Deserialize<'de> for Seeds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SeedsVisitor)
    }
}

/// Reads `seeds` as a list of seeds or a `{ from, count }` table.
struct SeedsVisitor;

impl<'de> serde::de::Visitor<'de> for SeedsVisitor {
    type Value = Seeds;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a list or a range of seeds; {SEED_FORMS}")
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Seeds, E> {
        Err(not_seeds(value))
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Seeds, E> {
        Err(not_seeds(value))
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Seeds, E> {
        Err(not_seeds(value))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Seeds, E> {
        Err(not_seeds(value))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Seeds, E> {
        Err(not_seeds(format!("{value:?}")))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Seeds, A::Error> {
        let mut seeds = Vec::new();
        while let Some(Seed(seed)) = seq.next_element()? {
            seeds.push(seed);
        }
        Ok(Seeds::List(seeds))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Seeds, A::Error> {
        use serde::de::Error;
        let (mut from, mut count) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "from" => from = Some(map.next_value::<Seed>()?.0),
                "count" => count = Some(map.next_value::<Seed>()?.0),
                other => {
                    return Err(A::Error::custom(format!(
                        "{SEEDS_ERROR}a range has `from` and `count`, not `{other}`; {SEED_FORMS}"
                    )));
                }
            }
        }
        let count = count.ok_or_else(|| {
            A::Error::custom(format!(
                "{SEEDS_ERROR}the range has no `count`; {SEED_FORMS}"
            ))
        })?;
        Ok(Seeds::Range(SeedRange {
            from: from.unwrap_or(0),
            count,
        }))
    }
}

/// `seeds = VALUE` with a single value where a list or a range belongs.
fn not_seeds<E: serde::de::Error>(shown: impl std::fmt::Display) -> E {
    E::custom(format!(
        "{SEEDS_ERROR}{shown} is neither a list nor a range; {SEED_FORMS}"
    ))
}

/// One seed (or a range's `count`): an integer 0..=[`MAX_SEED`].
struct Seed(u64);

impl<'de> Deserialize<'de> for Seed {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SeedVisitor)
    }
}

/// Reads one seed, naming anything else with the accepted forms.
struct SeedVisitor;

impl SeedVisitor {
    fn refuse<E: serde::de::Error>(shown: impl std::fmt::Display) -> E {
        E::custom(format!("{SEEDS_ERROR}{shown} is not a seed; {SEED_FORMS}"))
    }
}

impl<'de> serde::de::Visitor<'de> for SeedVisitor {
    type Value = Seed;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a seed, an integer 0..={MAX_SEED}")
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Seed, E> {
        u64::try_from(value)
            .map(Seed)
            .map_err(|_| Self::refuse(value))
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Seed, E> {
        if value <= MAX_SEED {
            Ok(Seed(value))
        } else {
            Err(Self::refuse(value))
        }
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Seed, E> {
        Err(Self::refuse(value))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Seed, E> {
        Err(Self::refuse(value))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Seed, E> {
        Err(Self::refuse(format!("{value:?}")))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<Seed, A::Error> {
        Err(Self::refuse("a list"))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Seed, A::Error> {
        Err(Self::refuse("a table"))
    }
}

/// `[inspect]`: whether and how each run is inspected after training.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InspectStep {
    /// Run `inspect` on every trained run (`sweep report` needs its `summary.json`).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `inspect --probe`.
    pub probe: Option<usize>,
    /// `inspect --prune-tolerance`.
    pub prune_tolerance: Option<f64>,
}

fn yes() -> bool {
    true
}

impl Default for InspectStep {
    fn default() -> Self {
        Self {
            enabled: true,
            probe: None,
            prune_tolerance: None,
        }
    }
}

impl InspectStep {
    /// What a report of the sweep is measured with: `headlab inspect RUN` with [`Self::args`],
    /// its probe the run's default (`probe`: a text model's is the shipped treebank,
    /// [`inspect::load::text::default_probe`]). A run's report counts as done only when its
    /// `provenance.json` says the same.
    pub fn measured_with(&self, probe: report::provenance::ProbeSource) -> MeasuredWith {
        let mut wanted = MeasuredWith::defaults();
        wanted.probe = probe;
        if let Some(probe) = self.probe {
            wanted.options.probe_size = probe;
        }
        if let Some(tolerance) = self.prune_tolerance {
            wanted.options.prune_tolerance = tolerance;
        }
        wanted
    }

    /// The `inspect` arguments after the run directory.
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(probe) = self.probe {
            args.extend(["--probe".to_string(), probe.to_string()]);
        }
        if let Some(tolerance) = self.prune_tolerance {
            args.extend(["--prune-tolerance".to_string(), tolerance.to_string()]);
        }
        args
    }
}

/// A sweep, expanded.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The sweep file.
    pub path: PathBuf,
    /// Its name: the default output directory is `runs/<name>`.
    pub name: String,
    /// Grid keys, in the file's order.
    pub grid_keys: Vec<String>,
    /// Every run, in plan order (seed-major).
    pub runs: Vec<PlannedRun>,
    /// What runs after training.
    pub inspect: InspectStep,
    /// How many seeds of one grid point train together as one batched model (`train
    /// --seeds`), at most.
    pub group_seeds: GroupSeeds,
}

/// `group_seeds`: a size from the file, or chosen per grid point from its backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSeeds {
    /// Left out: [`AUTO_GROUP_SEEDS_WGPU`] on wgpu, 1 (every run alone) on the CPU backends.
    Auto,
    /// Set in the file: at most this many; 1 trains every run alone.
    Fixed(usize),
}

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRun {
    /// Index in the plan (the Slurm array index).
    pub index: usize,
    /// Directory name under the sweep's output directory.
    pub name: String,
    /// The base config file.
    pub config: PathBuf,
    /// The base config's file stem (`{config}` in `run_name`).
    pub config_stem: String,
    /// The run's grid values, as they appear in names and tables (`split`, `4`).
    pub grid: BTreeMap<String, String>,
    /// The seed.
    pub seed: u64,
    /// `--set` arguments for `train`: the fixed ones, the grid's, then the seed.
    pub overrides: Vec<String>,
}

impl PlannedRun {
    /// The grid point: the config and the grid values, without the seed.
    pub fn point(&self) -> String {
        let mut parts = vec![self.config_stem.clone()];
        parts.extend(self.grid.iter().map(|(k, v)| format!("{k}={v}")));
        parts.join(" ")
    }

    /// The run's resolved config, as `train` would write it.
    pub fn resolved_config(&self) -> Result<RunConfig, SweepError> {
        Ok(self.resolved_run()?.config)
    }

    /// The run resolved: its config with every override, and its task.
    pub fn resolved_run(&self) -> Result<ResolvedRun, SweepError> {
        let config =
            RunConfig::load(&self.config, &self.overrides).map_err(|error| SweepError::Config {
                run: self.name.clone(),
                error: Box::new(error),
            })?;
        let source = PathBuf::from(format!("{} (run {})", self.config.display(), self.name));
        config
            .resolve(&source)
            .and_then(|run| run.check_trainable(&source).map(|()| run))
            .map_err(|error| SweepError::Config {
                run: self.name.clone(),
                error: Box::new(error),
            })
    }
}

/// A sweep file that cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// Unreadable.
    #[error("cannot read the sweep file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Not TOML of the expected shape.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's message (with the line), shortened.
        message: String,
    },
    /// A key with a value out of range.
    #[error("{path}: {key}: {message}")]
    Key {
        /// The file.
        path: PathBuf,
        /// The key, e.g. `grid."model.n_heads"`.
        key: String,
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// A run's config does not load or resolve with its overrides.
    #[error("run {run}: {error}")]
    Config {
        /// The run.
        run: String,
        /// Why.
        error: Box<run::config::ConfigError>,
    },
}

/// toml's message for an error in the sweep file `text`, as every TOML file's is explained
/// ([`run::config::explain_toml`]), and, for a train config given where a sweep file was
/// expected, what to run instead.
fn toml_message(text: &str, error: &toml::de::Error) -> String {
    let mut message = vec![run::config::explain_toml(&error.to_string())];
    let looks_like_a_config = ["[model]", "[train]", "[task]"]
        .iter()
        .any(|section| text.lines().any(|line| line.trim() == *section));
    if looks_like_a_config {
        message.push(
            "this looks like a train config (it has [model], [train] or [task]): give it to \
             headlab train, or name it in a sweep file's configs = [...]"
                .to_string(),
        );
    }
    message.join("\n")
}

impl Sweep {
    /// Reads and expands the sweep file at `path`, checking every run's config.
    pub fn load(path: &Path) -> Result<Sweep, SweepError> {
        let text = run::small_file::read_to_string(path, run::small_file::CONFIG_LIMIT).map_err(
            |error| SweepError::Read {
                path: path.to_path_buf(),
                error,
            },
        )?;
        let sweep = Self::parse(&text, path)?;
        for run in &sweep.runs {
            let resolved = run.resolved_run()?;
            // A probe too large for a run would fail its inspect after it trained.
            if let Some(probe) = sweep.inspect.probe
                && Probe::check_size(probe, &resolved, 1).is_err()
            {
                return Err(key_error(
                    path,
                    "inspect.probe",
                    format!(
                        "{probe} sequences are too many for run {}: at most {} keep its \
                         probe's activations within 1 GiB",
                        run.name,
                        Probe::max_size(&resolved, 1)
                    ),
                ));
            }
        }
        Ok(sweep)
    }

    /// Expands `text`, the content of `path`, without loading the configs.
    pub fn parse(text: &str, path: &Path) -> Result<Sweep, SweepError> {
        let file: SweepFile = toml::from_str(text).map_err(|e| {
            // A bad `seeds` has a message of ours: one line, naming the key.
            match e.message().strip_prefix(SEEDS_ERROR) {
                Some(message) => key_error(path, "seeds", message),
                None => SweepError::Parse {
                    path: path.to_path_buf(),
                    message: toml_message(text, &e),
                },
            }
        })?;
        let name = sweep_name(&file, path)?;
        let configs = base_configs(&file, path)?;
        let seeds = seed_list(&file.seeds, path)?;
        let fixed = fixed_overrides(&file, path)?;
        check_inspect(&file.inspect, path)?;
        let axes = grid_axes(&file, path)?;
        let grid_keys: Vec<String> = axes.iter().map(|(key, _)| key.clone()).collect();
        let total = run_count(configs.len(), &axes, seeds.len(), path)?;
        let pattern = match &file.run_name {
            Some(pattern) => pattern.clone(),
            None => default_pattern(&grid_keys),
        };
        check_pattern(&pattern, &grid_keys).map_err(|m| key_error(path, "run_name", m))?;
        let plan = Plan {
            configs: &configs,
            seeds: &seeds,
            fixed: &fixed,
            axes: &axes,
            pattern: &pattern,
        };
        let runs = plan.runs(total, path)?;
        let group_seeds = match file.group_seeds {
            None => GroupSeeds::Auto,
            Some(n) if (1..=MAX_GROUP_SEEDS as i64).contains(&n) => GroupSeeds::Fixed(n as usize),
            Some(n) => {
                return Err(key_error(
                    path,
                    "group_seeds",
                    format!(
                        "{n} is not a group size; give 1 (every run alone) to \
                         {MAX_GROUP_SEEDS} seeds trained together"
                    ),
                ));
            }
        };
        Ok(Sweep {
            path: path.to_path_buf(),
            name,
            grid_keys,
            runs,
            inspect: file.inspect,
            group_seeds,
        })
    }

    /// The runs in groups that train together: runs of one grid point (differing only in
    /// seed), in plan order, at most [`Self::group_size`] to a group; with a size of 1 every
    /// run is its own group. A group is listed at its first run's place in the plan.
    pub fn groups(&self) -> Vec<Vec<&PlannedRun>> {
        let mut by_point: BTreeMap<String, Vec<&PlannedRun>> = BTreeMap::new();
        for run in &self.runs {
            by_point.entry(run.point()).or_default().push(run);
        }
        let mut groups: Vec<Vec<&PlannedRun>> = by_point
            .into_values()
            .flat_map(|runs| {
                runs.chunks(self.group_size(runs[0]))
                    .map(<[&PlannedRun]>::to_vec)
                    .collect::<Vec<_>>()
            })
            .collect();
        groups.sort_by_key(|group| group[0].index);
        groups
    }

    /// The most seeds of `run`'s grid point that train together: `group_seeds` where the
    /// file sets it, else chosen from the point's backend ([`GroupSeeds::Auto`]). A config
    /// that does not load trains alone, and fails there with its own message.
    pub fn group_size(&self, run: &PlannedRun) -> usize {
        match self.group_seeds {
            GroupSeeds::Fixed(size) => size.max(1),
            GroupSeeds::Auto => match run.resolved_config() {
                Ok(config) if config.backend == BackendKind::Wgpu => AUTO_GROUP_SEEDS_WGPU,
                _ => 1,
            },
        }
    }

    /// The group that run `index` trains in.
    pub fn group_of(&self, index: usize) -> Option<Vec<&PlannedRun>> {
        self.groups()
            .into_iter()
            .find(|group| group.iter().any(|run| run.index == index))
    }

    /// The run called `name`.
    pub fn run(&self, name: &str) -> Option<&PlannedRun> {
        self.runs.iter().find(|run| run.name == name)
    }
}

/// A bad value of `key` in the sweep file at `path`.
fn key_error(path: &Path, key: &str, message: impl Into<String>) -> SweepError {
    SweepError::Key {
        path: path.to_path_buf(),
        key: key.to_string(),
        message: message.into(),
    }
}

/// The sweep's name: `name`, else the file's stem.
fn sweep_name(file: &SweepFile, path: &Path) -> Result<String, SweepError> {
    let name = match &file.name {
        Some(name) => name.clone(),
        None => path
            .file_stem()
            .map_or_else(|| "sweep".to_string(), |s| s.to_string_lossy().into_owned()),
    };
    check_name(&name).map_err(|m| key_error(path, "name", m))?;
    Ok(name)
}

/// `configs`, relative to the sweep file, each with its stem (which names its runs).
fn base_configs(file: &SweepFile, path: &Path) -> Result<Vec<(PathBuf, String)>, SweepError> {
    if file.configs.is_empty() {
        return Err(key_error(
            path,
            "configs",
            "the list is empty; give at least one config file, e.g. \
             configs = [\"../reverse.toml\"]",
        ));
    }
    let base = path.parent().unwrap_or(Path::new(""));
    let configs: Vec<(PathBuf, String)> = file
        .configs
        .iter()
        .map(|config| {
            let stem = config
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (base.join(config), stem)
        })
        .collect();
    let stems: BTreeSet<&String> = configs.iter().map(|(_, stem)| stem).collect();
    if stems.len() < configs.len() {
        return Err(key_error(
            path,
            "configs",
            "two configs share a file name; run names and tables tell configs apart by it",
        ));
    }
    Ok(configs)
}

/// `seeds` as a list: at least one, none twice.
fn seed_list(seeds: &Seeds, path: &Path) -> Result<Vec<u64>, SweepError> {
    let seeds = match seeds {
        Seeds::List(list) => list.clone(),
        Seeds::Range(range) => {
            if range.count as usize > MAX_RUNS {
                return Err(key_error(
                    path,
                    "seeds.count",
                    format!("{} is more than {MAX_RUNS} runs", range.count),
                ));
            }
            let end = range
                .from
                .checked_add(range.count)
                .filter(|&end| end <= MAX_SEED + 1)
                .ok_or_else(|| {
                    key_error(
                        path,
                        "seeds.from",
                        format!("from + count - 1 is past the largest seed, {MAX_SEED}"),
                    )
                })?;
            (range.from..end).collect()
        }
    };
    if seeds.is_empty() {
        return Err(key_error(
            path,
            "seeds",
            "no seeds; give a list or a count of at least 1",
        ));
    }
    if seeds.iter().collect::<BTreeSet<_>>().len() < seeds.len() {
        return Err(key_error(path, "seeds", "a seed is listed twice"));
    }
    Ok(seeds)
}

/// `[inspect]`'s values against the ranges of `inspect`'s own flags, named by their keys in
/// the sweep file (the probe's upper bound depends on each run: [`Sweep::load`]).
fn check_inspect(step: &InspectStep, path: &Path) -> Result<(), SweepError> {
    if let Some(probe) = step.probe {
        parse_size(&probe.to_string()).map_err(|m| key_error(path, "inspect.probe", m))?;
    }
    if let Some(tolerance) = step.prune_tolerance {
        parse_tolerance(&tolerance.to_string())
            .map_err(|m| key_error(path, "inspect.prune_tolerance", format!("{tolerance}: {m}")))?;
    }
    Ok(())
}

/// The hint for a table where one value belongs: in TOML an unquoted dotted key,
/// `model.n_heads = 2` under `[set]`, is a table `model = { n_heads = 2 }`, which `--set`
/// would take as the whole `[model]` table, dropping the config's other keys.
fn table_hint(section: &str, key: &str, value: &toml::Value) -> String {
    let example = match value {
        toml::Value::Table(table) => table
            .iter()
            .next()
            .map(|(inner, value)| format!("\"{key}.{inner}\" = {}", toml_value(value))),
        _ => None,
    }
    .unwrap_or_else(|| format!("\"{key}.NAME\" = VALUE"));
    format!(
        "{} is a table, not a value: an unquoted dotted key is TOML for a table, which would \
         replace the config's whole [{key}]; quote the key, e.g. {example} under [{section}]",
        toml_value(value)
    )
}

/// `[set]` as `--set` assignments.
fn fixed_overrides(file: &SweepFile, path: &Path) -> Result<Vec<String>, SweepError> {
    let mut fixed = Vec::new();
    for (key, value) in &file.set {
        check_key(key).map_err(|m| key_error(path, &format!("set.\"{key}\""), m))?;
        if matches!(value, toml::Value::Table(_)) {
            return Err(key_error(
                path,
                &format!("set.{key}"),
                table_hint("set", key, value),
            ));
        }
        if key == "seed" {
            return Err(key_error(path, "set.seed", "set seeds with `seeds`"));
        }
        fixed.push(format!("{key}={}", toml_value(value)));
    }
    Ok(fixed)
}

/// One grid axis: its key, and per value (shown, `--set` assignment).
type Axis = (String, Vec<(String, String)>);

/// `[grid]` as axes, each value checked to be a single value listed once.
fn grid_axes(file: &SweepFile, path: &Path) -> Result<Vec<Axis>, SweepError> {
    let mut axes = Vec::new();
    for (key, values) in &file.grid {
        let at = format!("grid.\"{key}\"");
        check_key(key).map_err(|m| key_error(path, &at, m))?;
        if key == "seed" {
            return Err(key_error(path, &at, "seeds go in `seeds`, not the grid"));
        }
        if file.set.contains_key(key) {
            return Err(key_error(path, &at, "the key is also in [set]; keep one"));
        }
        if matches!(values, toml::Value::Table(_)) {
            return Err(key_error(
                path,
                &format!("grid.{key}"),
                table_hint("grid", key, values),
            ));
        }
        let toml::Value::Array(values) = values else {
            return Err(key_error(
                path,
                &at,
                format!(
                    "expected a list of values, e.g. [\"split\", \"wide\"], got {}",
                    toml_value(values)
                ),
            ));
        };
        if values.is_empty() {
            return Err(key_error(path, &at, "the list is empty"));
        }
        let mut shown = BTreeSet::new();
        let mut axis = Vec::new();
        for value in values {
            if matches!(value, toml::Value::Array(_) | toml::Value::Table(_)) {
                return Err(key_error(
                    path,
                    &at,
                    format!("{} is not a single value", toml_value(value)),
                ));
            }
            let display = display_value(value);
            if !shown.insert(display.clone()) {
                return Err(key_error(path, &at, format!("{display} is listed twice")));
            }
            axis.push((display, format!("{key}={}", toml_value(value))));
        }
        axes.push((key.clone(), axis));
    }
    Ok(axes)
}

/// configs x grid x seeds, refused above [`MAX_RUNS`].
fn run_count(
    configs: usize,
    axes: &[Axis],
    seeds: usize,
    path: &Path,
) -> Result<usize, SweepError> {
    axes.iter()
        .try_fold(configs, |n, (_, axis)| n.checked_mul(axis.len()))
        .and_then(|n| n.checked_mul(seeds))
        .filter(|&n| n <= MAX_RUNS)
        .ok_or_else(|| {
            key_error(
                path,
                "grid",
                format!("configs x grid x seeds is more than {MAX_RUNS} runs"),
            )
        })
}

/// What the runs are made of, once every key is checked.
struct Plan<'a> {
    configs: &'a [(PathBuf, String)],
    seeds: &'a [u64],
    fixed: &'a [String],
    axes: &'a [Axis],
    pattern: &'a str,
}

impl Plan<'_> {
    /// Every run, seed first (every grid point's seed 0, then seed 1, ...), each named by
    /// the pattern; two runs of one name are refused.
    fn runs(&self, total: usize, path: &Path) -> Result<Vec<PlannedRun>, SweepError> {
        let mut runs = Vec::with_capacity(total);
        for &seed in self.seeds {
            for (config, stem) in self.configs {
                for combination in combinations(self.axes) {
                    let grid: BTreeMap<String, String> = combination
                        .iter()
                        .map(|(key, (display, _))| (key.to_string(), display.clone()))
                        .collect();
                    let mut overrides = self.fixed.to_vec();
                    overrides.extend(combination.iter().map(|(_, (_, set))| set.clone()));
                    overrides.push(format!("seed={seed}"));
                    let name = render(self.pattern, stem, seed, &grid);
                    check_name(&name)
                        .map_err(|m| key_error(path, "run_name", format!("run `{name}`: {m}")))?;
                    runs.push(PlannedRun {
                        index: runs.len(),
                        name,
                        config: config.clone(),
                        config_stem: stem.clone(),
                        grid,
                        seed,
                        overrides,
                    });
                }
            }
        }
        let mut names = BTreeSet::new();
        for run in &runs {
            if !names.insert(&run.name) {
                return Err(key_error(
                    path,
                    "run_name",
                    format!(
                        "`{}` gives two runs the name `{}`; add the keys that tell them \
                         apart ({{config}}, {{seed}} or a grid key in braces)",
                        self.pattern, run.name
                    ),
                ));
            }
        }
        Ok(runs)
    }
}

/// `{config}-{key}...-s{seed}`: the config's stem, each grid value, the seed.
fn default_pattern(grid_keys: &[String]) -> String {
    let mut parts = vec!["{config}".to_string()];
    parts.extend(grid_keys.iter().map(|key| format!("{{{key}}}")));
    parts.push("s{seed}".to_string());
    parts.join("-")
}

/// Every placeholder must be `config`, `seed` or a grid key.
fn check_pattern(pattern: &str, grid_keys: &[String]) -> Result<(), String> {
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("`{pattern}` has a `{{` without its `}}`"));
        };
        let key = &rest[open + 1..open + close];
        if key != "config" && key != "seed" && !grid_keys.iter().any(|k| k == key) {
            return Err(format!(
                "`{{{key}}}` is not a placeholder; use {{config}}, {{seed}} or a grid key ({})",
                if grid_keys.is_empty() {
                    "the grid is empty".to_string()
                } else {
                    grid_keys.join(", ")
                }
            ));
        }
        rest = &rest[open + close + 1..];
    }
    Ok(())
}

fn render(pattern: &str, config: &str, seed: u64, grid: &BTreeMap<String, String>) -> String {
    let mut name = pattern
        .replace("{config}", config)
        .replace("{seed}", &seed.to_string());
    for (key, value) in grid {
        name = name.replace(&format!("{{{key}}}"), value);
    }
    name
}

/// Every combination of one value per axis, the first axis slowest.
fn combinations(axes: &[(String, Vec<(String, String)>)]) -> Vec<Vec<(&str, &(String, String))>> {
    let mut all: Vec<Vec<(&str, &(String, String))>> = vec![Vec::new()];
    for (key, values) in axes {
        all = all
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |value| {
                    let mut next = prefix.clone();
                    next.push((key.as_str(), value));
                    next
                })
            })
            .collect();
    }
    all
}

/// A key path such as `model.n_heads`: dotted words.
fn check_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.split('.').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a config key path like \"model.n_heads\"",
            run::config::excerpt(key, 60)
        ))
    }
}

/// A run or sweep name: a run name ([`run::name::problem`]), and besides one directory name of
/// letters, digits, `-`, `_` and `.`, not starting with `.` or `_` (the sweep's own files
/// live in `_sweep/`).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.starts_with(['.', '_']) {
        return Err(format!(
            "`{}` starts with `.` or `_`; those are kept for headlab's own files",
            run::config::excerpt(name, 60)
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "`{}` holds {c:?}; a name is one directory name of letters, digits, `-`, `_` and `.`",
            run::config::excerpt(name, 60)
        ));
    }
    // Then the rule every run name keeps (empty, too long, ...), which the above is stricter
    // than in all but those.
    if let Some(problem) = run::name::problem(name) {
        return Err(format!(
            "`{}` is no run name: {problem}",
            run::config::excerpt(name, 60)
        ));
    }
    Ok(())
}

/// The value as a `--set` right-hand side (TOML).
fn toml_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => toml::Value::String(s.clone()).to_string(),
        other => other.to_string(),
    }
}

/// The value as a name part or table cell: strings without quotes.
fn display_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Sweep, SweepError> {
        Sweep::parse(text, Path::new("sweeps/demo.toml"))
    }

    #[test]
    fn expands_the_grid_seed_major_with_default_names() {
        let sweep = parse(
            r#"
            configs = ["../a.toml"]
            seeds = { from = 3, count = 2 }
            [grid]
            "model.head_layout" = ["split", "wide"]
            "model.n_heads" = [1, 2]
            [set]
            "train.steps" = 10
            "#,
        )
        .unwrap();
        assert_eq!(sweep.name, "demo");
        assert_eq!(sweep.grid_keys, ["model.head_layout", "model.n_heads"]);
        let names: Vec<&str> = sweep.runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "a-split-1-s3",
                "a-split-2-s3",
                "a-wide-1-s3",
                "a-wide-2-s3",
                "a-split-1-s4",
                "a-split-2-s4",
                "a-wide-1-s4",
                "a-wide-2-s4"
            ]
        );
        let run = &sweep.runs[5];
        assert_eq!(run.index, 5);
        assert_eq!(run.config, Path::new("sweeps/../a.toml"));
        assert_eq!(
            run.overrides,
            [
                "train.steps=10",
                "model.head_layout=\"split\"",
                "model.n_heads=2",
                "seed=4"
            ]
        );
        assert_eq!(run.point(), "a model.head_layout=split model.n_heads=2");
    }

    #[test]
    fn a_pattern_names_runs() {
        let sweep = parse(
            r#"
            configs = ["x.toml", "y.toml"]
            seeds = [7]
            run_name = "{config}_h{model.n_heads}_{seed}"
            [grid]
            "model.n_heads" = [2]
            "#,
        )
        .unwrap();
        let names: Vec<&str> = sweep.runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["x_h2_7", "y_h2_7"]);
    }

    #[test]
    fn bad_files_name_the_key() {
        let cases = [
            ("configs = []\nseeds = [0]", "configs"),
            ("configs = [\"a.toml\"]\nseeds = []", "seeds"),
            ("configs = [\"a.toml\"]\nseeds = [1, 1]", "listed twice"),
            (
                "configs = [\"a.toml\"]\nseeds = { count = 1000000000 }",
                "seeds.count",
            ),
            (
                "configs = [\"a/a.toml\", \"b/a.toml\"]\nseeds = [0]",
                "share a file name",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\n[grid]\n\"m.x\" = 3",
                "grid.\"m.x\"",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\n[grid]\n\"m.x\" = []",
                "empty",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\n[grid]\nseed = [1]",
                "`seeds`",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\n[grid]\n\"../x\" = [1]",
                "key path",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0, 1]\nrun_name = \"same\"",
                "two runs",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\nrun_name = \"{nope}\"",
                "placeholder",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\nrun_name = \"a/x{seed}\"",
                "holds '/'",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\nname = \"_x\"",
                "starts with",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\nsteps = 3",
                "unknown field",
            ),
            (
                "configs = [\"a.toml\"]\nseeds = [0]\n[grid]\n\"a.b\" = [[1], [2]]",
                "not a single value",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).expect_err(text).to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(error.starts_with("sweeps/demo.toml"), "{error}");
        }
    }

    #[test]
    fn a_grid_too_large_is_refused_before_expanding() {
        let values: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let list = values.join(", ");
        let text = format!(
            "configs = [\"a.toml\"]\nseeds = {{ count = 1000 }}\n[grid]\n\"a.b\" = [{list}]"
        );
        let error = parse(&text).unwrap_err().to_string();
        assert!(error.contains("more than 100000 runs"), "{error}");
    }

    #[test]
    fn every_bad_seed_is_named_on_one_line_with_the_accepted_forms() {
        let forms = "a list of integers 0..=9223372036854775807 (`seeds = [0, 1, 2]`) or a range \
                     (`seeds = { from = 0, count = 16 }`)";
        for (seeds, named) in [
            ("[-1]", "-1 is not a seed"),
            ("[1.5]", "1.5 is not a seed"),
            ("[\"a\"]", "\"a\" is not a seed"),
            ("[true]", "true is not a seed"),
            ("[[1]]", "a list is not a seed"),
            ("[9223372036854775808]", "9223372036854775808 is not a seed"),
            ("{ from = 0 }", "the range has no `count`"),
            ("{ from = -2, count = 3 }", "-2 is not a seed"),
            (
                "{ form = 1, count = 2 }",
                "a range has `from` and `count`, not `form`",
            ),
            ("7", "7 is neither a list nor a range"),
            ("true", "true is neither a list nor a range"),
        ] {
            let text = format!("configs = [\"a.toml\"]\nseeds = {seeds}");
            let error = parse(&text).unwrap_err().to_string();
            assert!(
                error.contains(&format!("seeds: {named}")),
                "{seeds}: {error}"
            );
            assert!(error.contains(forms), "{seeds}: {error}");
            assert!(!error.contains('\n'), "{seeds}: one line: {error}");
        }
        // The largest seed is accepted; a range reaching past it is not.
        let sweep = parse("configs = [\"a.toml\"]\nseeds = [9223372036854775807]").unwrap();
        assert_eq!(sweep.runs[0].seed, i64::MAX as u64);
        let error =
            parse("configs = [\"a.toml\"]\nseeds = { from = 9223372036854775807, count = 2 }")
                .unwrap_err()
                .to_string();
        assert!(error.contains("past the largest seed"), "{error}");
    }

    #[test]
    fn a_train_config_given_as_a_sweep_file_is_told_apart_in_lines() {
        let config = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/reverse.toml"),
        )
        .unwrap();
        let error = parse(&config).unwrap_err().to_string();
        // toml's own lines, not one line with `\n` written out.
        assert!(!error.contains("\\n"), "{error}");
        assert!(error.lines().count() > 2, "{error}");
        assert!(error.contains("unknown field"), "{error}");
        assert!(
            error.ends_with(
                "give it to headlab train, or name it in a sweep file's configs = [...]"
            ),
            "{error}"
        );
    }
}
