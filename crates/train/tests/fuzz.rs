//! No input makes the config parser (with `--set` overrides) or the JSONL dataset reader
//! panic: each either accepts the input, and what it accepts holds together, or refuses it
//! with a message that names the file or the override.
//!
//! Two parts share the checks below:
//! - property tests (proptest, a thousand cases each, about a second in all): config texts,
//!   overrides and datasets drawn from mutations of the shipped files and from a dictionary
//!   of keys and values that matter to the parser;
//! - `fuzz_for_a_while`, ignored by `cargo test`: a mutation fuzzer over the shipped configs
//!   and datasets that runs for `HEADLAB_FUZZ_SECONDS`, keeps every input that reaches an
//!   outcome not seen before (accepted, or refused with a message of a new kind) as a seed for
//!   further mutations, and reports how many inputs it tried and how many distinct outcomes
//!   it reached. `scripts/check/fuzz.sh SECONDS` runs it (and measures line coverage where the
//!   LLVM tools are installed).
//!
//! A panic in the code under test fails the property tests (proptest shrinks the input) and
//! the fuzzer (it saves the input under `HEADLAB_FUZZ_OUT` and fails at the end).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use run::RunConfig;
use run::config::ConfigError;
use tasks::{FileSpec, Task, TaskConfig};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const CRATE: &str = env!("CARGO_MANIFEST_DIR");

/// The name configs are parsed under; every refusal must mention it (or the override).
const CONFIG_NAME: &str = "fuzz.toml";
/// The name datasets are read under; every refusal must mention it.
const DATASET_NAME: &str = "fuzz.jsonl";

/// Every key a config can hold, as `--set` spells it.
const KEYS: [&str; 41] = [
    "name",
    "seed",
    "backend",
    "task.kind",
    "task.seq_len",
    "task.vocab_size",
    "task.shift",
    "task.combine",
    "task.n_pairs",
    "task.n_queries",
    "task.n_keys",
    "task.n_values",
    "task.path",
    "task.eval_fraction",
    "model.d_model",
    "model.n_layers",
    "model.n_heads",
    "model.head_layout",
    "model.d_head",
    "model.d_ff",
    "model.dropout",
    "model.norm",
    "model.positional",
    "model.init",
    "train.steps",
    "train.batch_size",
    "train.lr",
    "train.warmup_steps",
    "train.schedule",
    "train.min_lr_ratio",
    "train.weight_decay",
    "train.grad_clip",
    "train.log_every",
    "train.eval_every",
    "train.eval_size",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.snapshot_every",
    "train.target_accuracy",
    "train.threads",
    "train.shards",
];

/// TOML values at the edges of what the keys accept: zero, negatives, huge and non-finite
/// numbers, every name the enums know, wrong types, and TOML's less common syntax.
const VALUES: [&str; 60] = [
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "12",
    "64",
    "1e-3",
    "0.5",
    "1.0",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "1e400",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "16777216",
    "100000000000",
    "true",
    "false",
    "\"\"",
    "\"x\"",
    "\"copy\"",
    "\"reverse\"",
    "\"file\"",
    "\"recall\"",
    "\"neighbors\"",
    "\"wgpu\"",
    "\"flex\"",
    "\"ndarray\"",
    "\"split\"",
    "\"wide\"",
    "\"narrow\"",
    "\"rotary\"",
    "\"learned\"",
    "\"none\"",
    "\"post\"",
    "\"symmetric\"",
    "\"constant\"",
    "\"difference\"",
    "[]",
    "[1, 2]",
    "{}",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "'literal'",
    "\"\"\"multi\nline\"\"\"",
    "\"\\u00e9\"",
    "0x10",
    "0o7",
    "0b1",
    "1_000",
    "+1",
    ".5",
    "\"data/sample.jsonl\"",
    "\"/nonexistent/x.jsonl\"",
];

/// Numbers and values at the edges of what a dataset record accepts.
const JSON_VALUES: [&str; 20] = [
    "0",
    "-1",
    "1.5",
    "-0",
    "4294967295",
    "4294967296",
    "16777215",
    "16777216",
    "1e10",
    "1e400",
    "null",
    "true",
    "\"3\"",
    "[]",
    "[1]",
    "{}",
    "18446744073709551616",
    "00",
    "NaN",
    "\"\\ud800\"",
];

/// A small dataset for `kind = "file"` configs: the fuzzer must not read whatever path a
/// mutation names (`/dev/zero` would never end), and the shipped sample is larger than it
/// needs to be.
fn small_dataset() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let sample = std::fs::read_to_string(Path::new(ROOT).join("data/sample.jsonl")).unwrap();
        let lines: Vec<&str> = sample.lines().take(20).collect();
        // Written under a name of this process's, then renamed: another test process may be
        // reading the file at this moment.
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-small.jsonl");
        let own = path.with_extension(format!("jsonl.{}", std::process::id()));
        std::fs::write(&own, lines.join("\n")).unwrap();
        std::fs::rename(&own, &path).unwrap();
        path
    })
}

/// The kind of a refusal, for counting distinct outcomes: the first line of the message up
/// to its first quote (what follows a quote usually comes from the input: a key, a value, a
/// field name that may itself hold quotes), with every number made `#`.
fn kind_of(message: &str) -> String {
    let mut kind = String::new();
    for c in message.chars() {
        match c {
            '`' | '"' | '\n' => break,
            '0'..='9' if kind.ends_with('#') => {}
            '0'..='9' => kind.push('#'),
            _ => kind.push(c),
        }
    }
    kind
}

/// Parses `text` with `overrides` as `train` does, and resolves what parses; checks that an
/// accepted config survives being written out and read back (the run's config.toml), and
/// that a refusal names the file or the override. Returns the outcome.
fn check_config(text: &str, overrides: &[String]) -> Result<String, String> {
    let path = Path::new(CONFIG_NAME);
    let mut config = match RunConfig::parse(text, path, overrides) {
        Ok(config) => config,
        Err(e) => {
            let message = e.to_string();
            if !message.contains(CONFIG_NAME) && !message.contains("--set") {
                return Err(format!(
                    "a parse error names neither file nor --set: {message}"
                ));
            }
            // toml's message opens with the position and quotes the line; its own text
            // (without those) says what kind of error it is.
            let kind = match e {
                ConfigError::Parse { .. } => toml::from_str::<RunConfig>(text)
                    .err()
                    .map_or_else(|| kind_of(&message), |e| kind_of(e.message())),
                ConfigError::Override { message, .. } => format!("--set: {}", kind_of(&message)),
                _ => kind_of(&message),
            };
            return Ok(format!("parse: {kind}"));
        }
    };
    if let TaskConfig::File(spec) = &mut config.task {
        spec.path = small_dataset().to_path_buf();
    }
    let kind = config.task.kind_name();
    let run = match config.resolve(path) {
        Ok(run) => run,
        Err(e) => {
            let message = e.to_string();
            if !message.contains(CONFIG_NAME) {
                return Err(format!("a resolve error does not name the file: {message}"));
            }
            let message = message.strip_prefix(CONFIG_NAME).unwrap_or(&message);
            return Ok(format!("resolve{}", kind_of(message)));
        }
    };
    let io = run.io;
    if io.vocab_size == 0 || io.n_outputs == 0 || io.max_seq_len == 0 {
        return Err(format!("accepted with an empty size: {io:?}"));
    }
    // What `train` writes as the run's config.toml must read back as the same config:
    // `--resume` compares the two.
    let written = run.config.to_toml();
    match RunConfig::parse(&written, path, &[]) {
        Ok(again) if again == run.config => Ok(format!("accepted {kind}")),
        Ok(again) => Err(format!(
            "config.toml reads back differently: {:?} vs {again:?}",
            run.config
        )),
        Err(e) => Err(format!("its own config.toml is refused: {e}\n{written}")),
    }
}

/// Reads `text` as a JSONL dataset; checks that an accepted one yields examples that fit the
/// sizes it declares, and that a refusal names the file. Returns the outcome.
fn check_dataset(text: &str, vocab_size: Option<usize>) -> Result<String, String> {
    let spec = FileSpec {
        path: DATASET_NAME.into(),
        eval_fraction: 0.25,
        vocab_size,
    };
    match Task::from_jsonl(&spec, Path::new(DATASET_NAME), text) {
        Ok(task) => {
            let eval = task.eval_set(0, 0);
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let examples = eval.iter().cloned().chain([task.sample(&mut rng)]);
            for example in examples {
                // Records may differ in length; none is longer than the task's seq_len.
                let fits = (1..=task.seq_len()).contains(&example.input.len())
                    && example.target.len() == example.input.len()
                    && example
                        .input
                        .iter()
                        .all(|&t| (t as usize) < task.input_vocab())
                    && example
                        .target
                        .iter()
                        .flatten()
                        .all(|&c| (c as usize) < task.output_vocab());
                if !fits {
                    return Err(format!("an accepted example does not fit: {example:?}"));
                }
            }
            if eval.is_empty() || task.seq_len() == 0 {
                return Err("accepted with nothing to evaluate".into());
            }
            Ok("accepted".into())
        }
        Err(e) => {
            let message = e.to_string();
            // The spec's own values are refused by key, before the file is read.
            if !message.contains(DATASET_NAME) && !message.starts_with("task.") {
                return Err(format!(
                    "a dataset error names neither file nor key: {message}"
                ));
            }
            Ok(kind_of(
                message.strip_prefix(DATASET_NAME).unwrap_or(&message),
            ))
        }
    }
}

/// The shipped configs (the ready-to-run ones, the experiments', the tests' and the broken
/// ones of the bad-input corpus), as text.
fn shipped_configs() -> Vec<String> {
    let mut files = vec![];
    for dir in ["configs", "configs/experiments"] {
        files.extend(files_with(&Path::new(ROOT).join(dir), "toml"));
    }
    files.extend(files_with(
        &Path::new(CRATE).join("tests/bad_inputs"),
        "toml",
    ));
    files.push(Path::new(CRATE).join("tests/fixtures/tiny.toml"));
    read_all(files)
}

/// The shipped datasets: the sample (its first 30 lines), the broken ones of the corpus and
/// the fixtures.
fn shipped_datasets() -> Vec<String> {
    let mut files = files_with(&Path::new(CRATE).join("tests/bad_inputs/data"), "jsonl");
    files.push(Path::new(CRATE).join("tests/fixtures/bad.jsonl"));
    files.push(Path::new(CRATE).join("tests/fixtures/varying-lengths.jsonl"));
    let mut texts = read_all(files);
    let sample = std::fs::read_to_string(Path::new(ROOT).join("data/sample.jsonl")).unwrap();
    texts.push(sample.lines().take(30).collect::<Vec<_>>().join("\n"));
    texts
}

fn files_with(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

fn read_all(files: Vec<PathBuf>) -> Vec<String> {
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// Mutations, byte-wise and structural, driven by `rng`.
struct Mutator<'a> {
    rng: &'a mut ChaCha8Rng,
}

impl Mutator<'_> {
    fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[self.rng.random_range(0..items.len())]
    }

    fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n.max(1))
    }

    /// One byte-level change: flip a bit, set or insert bytes the grammars care about,
    /// delete, duplicate or splice in a range, truncate.
    fn bytes(&mut self, input: &mut Vec<u8>, donor: &[u8]) {
        const SPECIAL: &[u8] = b"\"'[]{}=.,\n\r\t#\\-+e0179:_ \x00\xff\xc3";
        let len = input.len();
        match self.below(7) {
            0 if len > 0 => {
                let at = self.below(len);
                input[at] ^= 1 << self.below(8);
            }
            1 if len > 0 => {
                let at = self.below(len);
                input[at] = *self.pick(SPECIAL);
            }
            2 => {
                let at = self.below(len + 1);
                let count = 1 + self.below(8);
                for _ in 0..count {
                    let byte = if self.rng.random_bool(0.5) {
                        *self.pick(SPECIAL)
                    } else {
                        self.rng.random()
                    };
                    input.insert(at, byte);
                }
            }
            3 if len > 0 => {
                let at = self.below(len);
                let end = (at + 1 + self.below(32)).min(len);
                input.drain(at..end);
            }
            4 if len > 0 => {
                let at = self.below(len);
                let end = (at + 1 + self.below(64)).min(len);
                let copy = input[at..end].to_vec();
                let to = self.below(len + 1);
                input.splice(to..to, copy);
            }
            5 if !donor.is_empty() => {
                let from = self.below(donor.len());
                let end = (from + 1 + self.below(128)).min(donor.len());
                let at = self.below(len + 1);
                let cut = (at + self.below(64)).min(len);
                input.splice(at..cut, donor[from..end].iter().copied());
            }
            _ => input.truncate(self.below(len + 1)),
        }
    }

    /// One line-level change to TOML: drop, repeat or swap lines, set a key to an edge value,
    /// rename a key, add a key or a section, or nest a value deeply.
    fn toml(&mut self, text: &str) -> String {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let n = lines.len();
        let at = self.below(n);
        match self.below(8) {
            0 if n > 0 => {
                lines.remove(at);
            }
            1 if n > 0 => {
                let line = lines[at].clone();
                lines.insert(self.below(n + 1), line);
            }
            2 if n > 1 => {
                let other = self.below(n);
                lines.swap(at, other);
            }
            3 if n > 0 && lines[at].contains('=') => {
                let key = lines[at].split('=').next().unwrap_or_default().to_string();
                lines[at] = format!("{key}= {}", self.pick(&VALUES));
            }
            4 if n > 0 && lines[at].contains('=') => {
                let value = lines[at].split_once('=').map(|x| x.1.to_string());
                let key = self.pick(&KEYS).rsplit('.').next().unwrap_or_default();
                lines[at] = format!("{key} ={}", value.unwrap_or_default());
            }
            5 => {
                let key = self.pick(&KEYS).rsplit('.').next().unwrap_or_default();
                let line = format!("{key} = {}", self.pick(&VALUES));
                lines.insert(self.below(n + 1), line);
            }
            6 => {
                let section = *self.pick(&[
                    "[task]",
                    "[model]",
                    "[train]",
                    "[extra]",
                    "[[train]]",
                    "[task.x]",
                    "[]",
                ]);
                lines.insert(self.below(n + 1), section.to_string());
            }
            _ => {
                let deep = self.rng.random_bool(0.1);
                let depth = 1 + self.below(if deep { 100_000 } else { 64 });
                let (open, close) = if self.rng.random_bool(0.5) {
                    ("[".repeat(depth), "]".repeat(depth))
                } else {
                    ("{ a = ".repeat(depth), " }".repeat(depth))
                };
                let key = self.pick(&KEYS).rsplit('.').next().unwrap_or_default();
                lines.insert(self.below(n + 1), format!("{key} = {open}1{close}"));
            }
        }
        lines.join("\n")
    }

    /// One change to JSONL: drop or repeat lines, set a number to an edge value, drop or repeat
    /// array elements, empty an array, rename a field, nest deeply, or change line endings.
    fn jsonl(&mut self, text: &str) -> String {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let n = lines.len();
        let at = self.below(n);
        match self.below(9) {
            0 if n > 0 => {
                lines.remove(at);
            }
            1 if n > 0 => {
                let line = lines[at].clone();
                lines.insert(self.below(n + 1), line);
            }
            7 if n > 0 => {
                // Empty an array: a record of no tokens, or input and target of other lengths.
                let field = *self.pick(&["\"input\": [", "\"target\": ["]);
                if let Some(start) = lines[at].find(field).map(|i| i + field.len())
                    && let Some(len) = lines[at][start..].find(']')
                {
                    lines[at].replace_range(start..start + len, "");
                }
            }
            2 if n > 0 => {
                let numbers: Vec<(usize, usize)> = number_spans(&lines[at]);
                if !numbers.is_empty() {
                    let (start, end) = *self.pick(&numbers);
                    let value = *self.pick(&JSON_VALUES);
                    lines[at].replace_range(start..end, value);
                }
            }
            3 if n > 0 => {
                // Repeat or drop one array element: records of other lengths.
                let numbers = number_spans(&lines[at]);
                if !numbers.is_empty() {
                    let (start, end) = *self.pick(&numbers);
                    if self.rng.random_bool(0.5) {
                        let copy = format!("{}, ", &lines[at][start..end]);
                        lines[at].insert_str(start, &copy);
                    } else {
                        let end = if lines[at][end..].starts_with(", ") {
                            end + 2
                        } else {
                            end
                        };
                        lines[at].replace_range(start..end, "");
                    }
                }
            }
            4 if n > 0 => {
                let field = *self.pick(&[
                    "\"input\"",
                    "\"target\"",
                    "\"weight\"",
                    "\"\"",
                    "\"input\": [], \"x\"",
                ]);
                let which = *self.pick(&["\"input\"", "\"target\""]);
                lines[at] = lines[at].replacen(which, field, 1);
            }
            5 if n > 0 => {
                let deep = self.rng.random_bool(0.1);
                let depth = 1 + self.below(if deep { 100_000 } else { 200 });
                let numbers = number_spans(&lines[at]);
                if let Some(&(start, end)) = numbers.first() {
                    let inner = lines[at][start..end].to_string();
                    let nested = format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth));
                    lines[at].replace_range(start..end, &nested);
                }
            }
            6 => {
                let extra = *self.pick(&[
                    "",
                    "   ",
                    "\u{feff}{\"input\": [1], \"target\": [1]}",
                    "{}",
                    "[]",
                    "null",
                    "{\"input\": [1, 2], \"target\": [1, null]} trailing",
                ]);
                lines.insert(self.below(n + 1), extra.to_string());
            }
            _ => return lines.join("\r\n"),
        }
        lines.join("\n")
    }

    /// One `--set`: a known key (sometimes bent) and an edge value (sometimes raw bytes).
    fn assignment(&mut self) -> String {
        let mut key = self.pick(&KEYS).to_string();
        match self.below(6) {
            0 => key.push_str(".x"),
            1 => key = key.replace('.', ".."),
            2 => key = format!("{key}{}", self.pick(&["", " ", "=", "."])),
            _ => {}
        }
        let value = if self.rng.random_bool(0.8) {
            self.pick(&VALUES).to_string()
        } else {
            (0..self.below(8))
                .map(|_| *self.pick(&['a', '1', '.', '[', '"', '=', ' ', '\n', 'é']))
                .collect()
        };
        if self.rng.random_bool(0.05) {
            key
        } else {
            format!("{key}={value}")
        }
    }
}

/// Byte ranges of the unsigned integers in `line`.
fn number_spans(line: &str) -> Vec<(usize, usize)> {
    let mut spans = vec![];
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (start, c.is_ascii_digit()) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    spans
}

/// Runs `check` on one input, turning a panic into an error.
fn guarded(check: impl FnOnce() -> Result<String, String>) -> Result<String, String> {
    match std::panic::catch_unwind(AssertUnwindSafe(check)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {message}"))
        }
    }
}

/// Applies 1 to 4 mutations to a shipped config.
fn mutated_config(seed: u64, configs: &[String]) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let base = configs[rng.random_range(0..configs.len())].clone();
    let donor = configs[rng.random_range(0..configs.len())].clone();
    let rounds = rng.random_range(1..=4);
    let mut mutator = Mutator { rng: &mut rng };
    let mut text = base;
    for _ in 0..rounds {
        if mutator.rng.random_bool(0.5) {
            text = mutator.toml(&text);
        } else {
            let mut bytes = text.into_bytes();
            mutator.bytes(&mut bytes, donor.as_bytes());
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    text
}

fn mutated_dataset(seed: u64, datasets: &[String]) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let base = datasets[rng.random_range(0..datasets.len())].clone();
    let donor = datasets[rng.random_range(0..datasets.len())].clone();
    let rounds = rng.random_range(1..=4);
    let mut mutator = Mutator { rng: &mut rng };
    let mut text = base;
    for _ in 0..rounds {
        if mutator.rng.random_bool(0.6) {
            text = mutator.jsonl(&text);
        } else {
            let mut bytes = text.into_bytes();
            mutator.bytes(&mut bytes, donor.as_bytes());
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    text
}

/// A property-test failure with the input that caused it.
fn failed(problem: String, input: &str) -> TestCaseError {
    TestCaseError::fail(format!("{problem}\ninput:\n{input}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn any_text_as_a_config_is_accepted_whole_or_refused_by_name(text in ".{0,300}") {
        guarded(|| check_config(&text, &[])).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn mutated_shipped_configs_are_accepted_whole_or_refused_by_name(seed in any::<u64>()) {
        let text = mutated_config(seed, shipped());
        guarded(|| check_config(&text, &[])).map_err(|e| failed(e, &text))?;
    }

    #[test]
    fn overrides_are_applied_whole_or_refused_by_name(
        seed in any::<u64>(),
        raw in proptest::collection::vec(".{0,40}", 0..2),
    ) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let configs = shipped();
        let base = configs[rng.random_range(0..configs.len())].clone();
        let mut mutator = Mutator { rng: &mut rng };
        let count = 1 + mutator.below(3);
        let mut sets: Vec<String> = (0..count).map(|_| mutator.assignment()).collect();
        sets.extend(raw);
        guarded(|| check_config(&base, &sets)).map_err(|e| failed(e, &format!("--set {sets:?}")))?;
    }

    #[test]
    fn any_text_as_a_dataset_is_accepted_whole_or_refused_by_name(
        text in concat!(
            "(\\{\"input\": \\[[0-9, ]{0,12}\\], \"target\": \\[[0-9, nul]{0,14}\\]\\}\n",
            "|.{0,40}\n){0,6}"
        ),
        vocab in proptest::option::of(0usize..20),
    ) {
        guarded(|| check_dataset(&text, vocab)).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn mutated_shipped_datasets_are_accepted_whole_or_refused_by_name(seed in any::<u64>()) {
        let text = mutated_dataset(seed, shipped_data());
        guarded(|| check_dataset(&text, None)).map_err(|e| failed(e, &text))?;
    }
}

fn shipped() -> &'static [String] {
    static CONFIGS: OnceLock<Vec<String>> = OnceLock::new();
    CONFIGS.get_or_init(shipped_configs)
}

fn shipped_data() -> &'static [String] {
    static DATASETS: OnceLock<Vec<String>> = OnceLock::new();
    DATASETS.get_or_init(shipped_datasets)
}

/// One fuzzing target's running totals.
#[derive(Default)]
struct Tally {
    inputs: u64,
    accepted: u64,
    outcomes: BTreeMap<String, u64>,
    /// Inputs that reached a new outcome, mutated further.
    seeds: Vec<String>,
}

impl Tally {
    fn record(&mut self, input: &str, outcome: &str) {
        self.inputs += 1;
        if outcome.starts_with("accepted") {
            self.accepted += 1;
        }
        let count = self.outcomes.entry(outcome.to_string()).or_default();
        *count += 1;
        // An input that reached something new is worth mutating further.
        if *count == 1 && self.seeds.len() < 4096 {
            self.seeds.push(input.to_string());
        }
    }

    fn report(&self, name: &str) -> String {
        format!(
            "{name}: {} inputs, {} accepted, {} refused, {} distinct outcomes",
            self.inputs,
            self.accepted,
            self.inputs - self.accepted,
            self.outcomes.len()
        )
    }
}

/// The bounded fuzzer. `HEADLAB_FUZZ_SECONDS` (default 10) bounds its time,
/// `HEADLAB_FUZZ_SEED` (default 0) seeds it, and `HEADLAB_FUZZ_OUT` (default a temporary
/// directory) receives `outcomes.txt` and any input that failed a check.
#[test]
#[ignore = "a time-bounded fuzzer: scripts/check/fuzz.sh SECONDS runs it"]
fn fuzz_for_a_while() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seconds = env("HEADLAB_FUZZ_SECONDS").unwrap_or(10);
    let seed = env("HEADLAB_FUZZ_SEED").unwrap_or(0);
    let out = std::env::var_os("HEADLAB_FUZZ_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("headlab-fuzz"));
    std::fs::create_dir_all(&out).unwrap();
    // A panic is caught and counted; its default report would flood the output.
    std::panic::set_hook(Box::new(|_| {}));

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut configs, mut overrides, mut datasets) =
        (Tally::default(), Tally::default(), Tally::default());
    configs.seeds = shipped().to_vec();
    datasets.seeds = shipped_data().to_vec();
    let mut failures: Vec<String> = vec![];
    // Each input is written here before it is tried: if one crashes or hangs the process
    // (a stack overflow aborts, it cannot be caught), this file holds it.
    let last = out.join("last-input.txt");
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        for _ in 0..64 {
            let which = rng.random_range(0..3);
            let (input, sets, result) = match which {
                0 => {
                    let seed = configs.seeds[rng.random_range(0..configs.seeds.len())].clone();
                    let other = shipped()[rng.random_range(0..shipped().len())].clone();
                    let text = mutated_config(rng.random(), &[seed, other]);
                    std::fs::write(&last, &text).unwrap();
                    let result = guarded(|| check_config(&text, &[]));
                    (text, vec![], result)
                }
                1 => {
                    let base = shipped()[rng.random_range(0..shipped().len())].clone();
                    let mut mutator = Mutator { rng: &mut rng };
                    let count = 1 + mutator.below(3);
                    let sets: Vec<String> = (0..count).map(|_| mutator.assignment()).collect();
                    std::fs::write(&last, format!("{sets:?}\n{base}")).unwrap();
                    let result = guarded(|| check_config(&base, &sets));
                    (base, sets, result)
                }
                _ => {
                    let seed = datasets.seeds[rng.random_range(0..datasets.seeds.len())].clone();
                    let other = shipped_data()[rng.random_range(0..shipped_data().len())].clone();
                    let text = mutated_dataset(rng.random(), &[seed, other]);
                    std::fs::write(&last, &text).unwrap();
                    let result = guarded(|| check_dataset(&text, None));
                    (text, vec![], result)
                }
            };
            let tally = match which {
                0 => &mut configs,
                1 => &mut overrides,
                _ => &mut datasets,
            };
            match result {
                Ok(outcome) => tally.record(&input, &outcome),
                Err(problem) => {
                    tally.record(&input, "FAILED");
                    let file = out.join(format!("failure-{}.txt", failures.len()));
                    let saved = format!("{problem}\n--set {sets:?}\n-- input --\n{input}");
                    std::fs::write(&file, saved).unwrap();
                    failures.push(format!("{problem} (input in {})", file.display()));
                }
            }
        }
    }
    let _ = std::panic::take_hook();

    let elapsed = started.elapsed().as_secs_f64();
    let total = configs.inputs + overrides.inputs + datasets.inputs;
    let mut listing = String::new();
    for (name, tally) in [
        ("config", &configs),
        ("--set", &overrides),
        ("dataset", &datasets),
    ] {
        for (outcome, count) in &tally.outcomes {
            listing.push_str(&format!("{name}\t{count}\t{outcome}\n"));
        }
    }
    std::fs::write(out.join("outcomes.txt"), listing).unwrap();
    println!(
        "fuzzed for {elapsed:.1} s (seed {seed}): {total} inputs, {:.0} per second",
        total as f64 / elapsed
    );
    for (name, tally) in [
        ("configs", &configs),
        ("--set overrides", &overrides),
        ("datasets", &datasets),
    ] {
        println!("  {}", tally.report(name));
    }
    println!("  outcomes by kind: {}", out.join("outcomes.txt").display());
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
