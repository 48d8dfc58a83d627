//! The benchmark's markdown table: one row per size and backend, headlab and Burn side by
//! side with their ratio, and, when the PyTorch reference ran, its training speed and
//! headlab's ratio to it (in the rows of the CPU backends).

use std::fmt::Write;

use crate::case::{CaseResult, Implementation, Size};
use crate::pytorch::TorchDevice;
use run::BackendKind;

/// Where and when the figures were taken, for the line above the table.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// `YYYY-MM-DD`.
    pub date: String,
    /// CPU model name.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Rayon threads the cases used.
    pub threads: usize,
    /// Whether the CPU has AVX-512F.
    pub avx512: bool,
    /// headlab's `train.shards`.
    pub shards: usize,
    /// PyTorch's version when the PyTorch reference was run: the table then has its column.
    pub pytorch: Option<String>,
    /// Where the PyTorch reference ran: its figures stand in the rows of the backends it
    /// stands beside ([`TorchDevice::stands_beside`]).
    pub torch_device: TorchDevice,
    /// The wgpu adapter, described, when a case ran on wgpu.
    pub wgpu_adapter: Option<String>,
    /// Rounds each figure is the median of.
    pub rounds: usize,
}

/// The results as a markdown table with a provenance line. `results` may miss cases (a
/// failed or unrequested one shows as a dash).
pub fn markdown(results: &[CaseResult], provenance: &Provenance) -> String {
    let mut out = provenance_line(provenance);
    let with_pytorch = provenance.pytorch.is_some();
    out.push_str(&header(with_pytorch));
    for (size, backend) in row_keys(results) {
        out.push_str(&row(
            results,
            size,
            backend,
            with_pytorch.then_some(provenance.torch_device),
        ));
    }
    out
}

/// The two model sizes, as the tables' paragraphs describe them.
const SIZES: &str = "small: d_model 64, 4 heads, 2 layers, d_ff 256, seq 32, batch 64; large: \
                     d_model 256, 8 heads, 4 layers, d_ff 1024, seq 64, batch 32.";

/// `Measured DATE on CPU (N cores, T rayon threads, AVX-512 on).`, and the wgpu adapter
/// when a case ran there.
fn machine_sentence(provenance: &Provenance) -> String {
    let adapter = provenance
        .wgpu_adapter
        .as_ref()
        .map_or_else(String::new, |adapter| format!(" wgpu adapter: {adapter}."));
    format!(
        "Measured {} on {} ({} cores, {} rayon threads, AVX-512 {}).{adapter}",
        provenance.date,
        provenance.cpu,
        provenance.cores,
        provenance.threads,
        if provenance.avx512 { "on" } else { "off" },
    )
}

/// Where the reference ran, for the paragraphs: `on the CPU, torch.set_num_threads(T)` or
/// `on CUDA`.
fn torch_where(provenance: &Provenance) -> String {
    match provenance.torch_device {
        TorchDevice::Cpu => format!("on the CPU, torch.set_num_threads({})", provenance.threads),
        TorchDevice::Cuda => "on CUDA".to_string(),
    }
}

/// The paragraph above the table: where and when the figures were taken, the cases' shapes,
/// and what the ratios divide, followed by a blank line.
fn provenance_line(provenance: &Provenance) -> String {
    let mut out = String::new();
    let pytorch = provenance
        .pytorch
        .as_ref()
        .map_or_else(String::new, |version| {
            format!(
                " PyTorch {version}: the same model, loss, AdamW and batches in plain PyTorch {}, \
                 the whole batch per step; its figures stand in every {} row.",
                torch_where(provenance),
                match provenance.torch_device {
                    TorchDevice::Cpu => "CPU",
                    TorchDevice::Cuda => "wgpu",
                }
            )
        });
    let rounds = if provenance.rounds > 1 {
        format!(
            " Figures are medians over {} rounds, the cases interleaved.",
            provenance.rounds
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{} Reverse task, AdamW, steps of batch x seq tokens; {SIZES} headlab trains with \
         train.shards = {}; Burn's encoder in a plain Burn step on the whole batch.{pytorch} \
         Ratios are headlab / {}.{rounds}\n",
        machine_sentence(provenance),
        provenance.shards,
        if provenance.pytorch.is_some() {
            "Burn and headlab / PyTorch"
        } else {
            "Burn"
        },
    );
    out
}

/// The table's header row and its alignment row; the PyTorch columns only `with_pytorch`.
fn header(with_pytorch: bool) -> String {
    let mut out = String::new();
    out.push_str("| size | backend | train steps/s headlab | train steps/s Burn | ratio |");
    if with_pytorch {
        out.push_str(" train steps/s PyTorch | headlab/PyTorch |");
    }
    out.push_str(
        " train tokens/s headlab | train tokens/s Burn | forward tokens/s headlab | \
         forward tokens/s Burn | ratio | peak MiB headlab | peak MiB Burn |\n",
    );
    out.push_str("| --- | --- |");
    out.push_str(&" ---: |".repeat(if with_pytorch { 12 } else { 10 }));
    out.push('\n');
    out
}

/// The table's rows: each size and backend that has a result, in the order they first
/// appear in `results`.
fn row_keys(results: &[CaseResult]) -> Vec<(Size, BackendKind)> {
    let mut rows: Vec<(Size, BackendKind)> = Vec::new();
    for result in results {
        let key = (result.case.size, result.case.backend);
        if !rows.contains(&key) {
            rows.push(key);
        }
    }
    rows
}

/// One row of the table, `size` on `backend`, with its line break; the PyTorch cells when
/// the reference ran (on `torch_device`).
fn row(
    results: &[CaseResult],
    size: Size,
    backend: BackendKind,
    torch_device: Option<TorchDevice>,
) -> String {
    let with_pytorch = torch_device.is_some();
    let mut out = String::new();
    let find = |implementation| {
        results.iter().find(|r| {
            r.case.size == size
                && r.case.backend == backend
                && r.case.implementation == implementation
        })
    };
    let (ours, burn) = (find(Implementation::Headlab), find(Implementation::Burn));
    // The reference runs once per size: it stands in every row of the backends beside its
    // device (the CPU's, or wgpu's for CUDA).
    let torch = results.iter().find(|r| {
        r.case.size == size
            && r.case.implementation == Implementation::Pytorch
            && torch_device.is_some_and(|device| device.stands_beside(backend))
    });
    let figure = |result: Option<&CaseResult>, f: fn(&CaseResult) -> f64| {
        result.map_or_else(|| "-".to_string(), |r| format_figure(f(r)))
    };
    let ratio = |other: Option<&CaseResult>, f: fn(&CaseResult) -> f64| match (ours, other) {
        (Some(a), Some(b)) => format!("{:.2}x", f(a) / f(b)),
        _ => "-".to_string(),
    };
    let memory = |result: Option<&CaseResult>| {
        result
            .and_then(|r| r.peak_rss_mib)
            .map_or_else(|| "-".to_string(), |mib| format!("{mib:.0}"))
    };
    let pytorch_cells = if with_pytorch {
        format!(
            " {} | {} |",
            figure(torch, |r| r.train_steps_per_s),
            ratio(torch, |r| r.train_steps_per_s)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} |{pytorch_cells} {} | {} | {} | {} | {} | {} | {} |",
        size.name(),
        backend.name(),
        figure(ours, |r| r.train_steps_per_s),
        figure(burn, |r| r.train_steps_per_s),
        ratio(burn, |r| r.train_steps_per_s),
        figure(ours, CaseResult::train_tokens_per_s),
        figure(burn, CaseResult::train_tokens_per_s),
        figure(ours, CaseResult::forward_tokens_per_s),
        figure(burn, CaseResult::forward_tokens_per_s),
        ratio(burn, |r| r.forward_passes_per_s),
        memory(ours),
        memory(burn),
    );
    out
}

/// Three significant figures, without a decimal point from 100 up (`31.4`, `2.05`, `58200`).
fn format_figure(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if value >= 100.0 {
        let magnitude = 10f64.powi(value.log10().floor() as i32 - 2);
        return format!("{:.0}", (value / magnitude).round() * magnitude);
    }
    let decimals = if value >= 10.0 { 1 } else { 2 };
    format!("{value:.decimals$}")
}

/// `bench --seeds`: per size, backend and implementation, the seed-steps per second (a
/// step of a stack of S seeds counts S) at every seed count, and each against the same
/// implementation's single model (S = 1) and, for headlab, against PyTorch's `vmap` at the
/// same S.
pub fn seeds_markdown(results: &[CaseResult], provenance: &Provenance) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} Reverse task, AdamW, each seed on its own batch; {SIZES} S seeds train as one \
         batched model: headlab's seed stack (`train --seeds`, train.shards = {}), PyTorch's \
         torch.func.stack_module_state + vmap{}. S = 1 is one plain model, the speed of \
         separate runs. Seed-steps per second count a step of S seeds as S.\n",
        machine_sentence(provenance),
        provenance.shards,
        provenance
            .pytorch
            .as_ref()
            .map_or_else(String::new, |v| format!(
                " ({v}, {})",
                torch_where(provenance)
            )),
    );
    out.push_str(
        "| size | backend | implementation | S | seed-steps/s | vs S = 1 | headlab / PyTorch |\n\
         | --- | --- | --- | ---: | ---: | ---: | ---: |\n",
    );
    let seed_steps = |r: &CaseResult| r.train_steps_per_s * r.case.seeds as f64;
    for result in results {
        let case = &result.case;
        let single = results.iter().find(|r| {
            r.case.size == case.size
                && r.case.backend == case.backend
                && r.case.implementation == case.implementation
                && r.case.seeds == 1
        });
        let pytorch = results.iter().find(|r| {
            r.case.implementation == Implementation::Pytorch
                && r.case.size == case.size
                && r.case.seeds == case.seeds
        });
        let backend = match case.implementation {
            Implementation::Pytorch => provenance.torch_device.name(),
            _ => case.backend.name(),
        };
        let ratio = |other: Option<&CaseResult>| {
            other.map_or("-".to_string(), |o| {
                format!("{:.2}x", seed_steps(result) / seed_steps(o))
            })
        };
        let against_pytorch = match case.implementation {
            Implementation::Headlab => ratio(pytorch),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {backend} | {} | {} | {:.1} | {} | {against_pytorch} |",
            case.size.name(),
            case.implementation.name(),
            case.seeds,
            seed_steps(result),
            ratio(single),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provenance() -> Provenance {
        Provenance {
            date: "2026-11-21".into(),
            cpu: "Test CPU".into(),
            cores: 2,
            threads: 2,
            avx512: true,
            shards: 2,
            pytorch: None,
            torch_device: TorchDevice::Cpu,
            wgpu_adapter: None,
            rounds: 1,
        }
    }

    #[test]
    fn a_row_holds_both_implementations_and_their_ratio() {
        let table = markdown(
            &[
                CaseResult::example(Implementation::Headlab, 30.0),
                CaseResult::example(Implementation::Burn, 20.0),
            ],
            &provenance(),
        );
        let row = table.lines().last().unwrap();
        // 30 steps/s of 64 x 32 tokens = 61440 tokens/s; forward is 4x that.
        assert_eq!(
            row,
            "| small | flex | 30.0 | 20.0 | 1.50x | 61400 | 41000 | 246000 | 164000 | 1.50x | 50 | 50 |"
        );
        assert!(table.starts_with("Measured 2026-11-21 on Test CPU (2 cores"));
    }

    #[test]
    fn a_missing_implementation_shows_dashes() {
        let table = markdown(
            &[CaseResult::example(Implementation::Headlab, 3.0)],
            &provenance(),
        );
        let row = table.lines().last().unwrap();
        assert_eq!(
            row,
            "| small | flex | 3.00 | - | - | 6140 | - | 24600 | - | - | 50 | - |"
        );
    }

    #[test]
    fn the_pytorch_column_shows_only_when_the_reference_ran() {
        let without = markdown(
            &[
                CaseResult::example(Implementation::Headlab, 30.0),
                CaseResult::example(Implementation::Burn, 20.0),
            ],
            &provenance(),
        );
        assert!(!without.contains("PyTorch"), "{without}");

        let with = Provenance {
            pytorch: Some("2.15.0".into()),
            torch_device: TorchDevice::Cpu,
            wgpu_adapter: None,
            rounds: 3,
            ..provenance()
        };
        let mut ndarray = CaseResult::example(Implementation::Headlab, 15.0);
        ndarray.case.backend = BackendKind::Ndarray;
        let table = markdown(
            &[
                CaseResult::example(Implementation::Headlab, 30.0),
                CaseResult::example(Implementation::Burn, 20.0),
                CaseResult::example(Implementation::Pytorch, 40.0),
                ndarray,
            ],
            &with,
        );
        let lines: Vec<&str> = table.lines().collect();
        let header = lines.iter().find(|l| l.starts_with("| size")).unwrap();
        assert!(
            header.contains(
                "| train steps/s Burn | ratio | train steps/s PyTorch | headlab/PyTorch | \
                 train tokens/s headlab |"
            ),
            "{header}"
        );
        let columns = header.matches('|').count();
        for line in lines.iter().filter(|l| l.starts_with('|')) {
            assert_eq!(line.matches('|').count(), columns, "{line}");
        }
        assert_eq!(
            lines[lines.len() - 2],
            "| small | flex | 30.0 | 20.0 | 1.50x | 40.0 | 0.75x | 61400 | 41000 | 246000 | 164000 | 1.50x | 50 | 50 |"
        );
        // The reference ran once per size; it stands in the ndarray row too.
        assert_eq!(
            lines[lines.len() - 1],
            "| small | ndarray | 15.0 | - | - | 40.0 | 0.38x | 30700 | - | 123000 | - | - | 50 | - |"
        );
        assert!(table.contains("PyTorch 2.15.0"), "{table}");
        assert!(table.contains("medians over 3 rounds"), "{table}");
        assert!(table.contains("headlab / PyTorch"), "{table}");
    }

    /// On CUDA the reference stands beside wgpu, not beside the CPU backends, and the
    /// paragraph names the adapter and where PyTorch ran.
    #[test]
    fn a_cuda_reference_stands_in_the_wgpu_rows() {
        let on = |backend, implementation, steps_per_s| {
            let mut result = CaseResult::example(implementation, steps_per_s);
            result.case.backend = backend;
            result
        };
        let cuda = Provenance {
            pytorch: Some("2.11.0+cu130, CUDA on NVIDIA H200".into()),
            torch_device: TorchDevice::Cuda,
            wgpu_adapter: Some("NVIDIA H200 (Vulkan, discrete GPU)".into()),
            ..provenance()
        };
        let table = markdown(
            &[
                on(BackendKind::Wgpu, Implementation::Headlab, 80.0),
                on(BackendKind::Flex, Implementation::Headlab, 30.0),
                on(BackendKind::Wgpu, Implementation::Pytorch, 160.0),
            ],
            &cuda,
        );
        assert!(
            table.contains("| small | wgpu | 80.0 | - | - | 160 | 0.50x |"),
            "{table}"
        );
        assert!(
            table.contains("| small | flex | 30.0 | - | - | - | - |"),
            "{table}"
        );
        assert!(table.contains("wgpu adapter: NVIDIA H200"), "{table}");
        assert!(table.contains("in plain PyTorch on CUDA"), "{table}");
        assert!(table.contains("stand in every wgpu row"), "{table}");
    }

    #[test]
    fn figures_keep_three_significant_digits() {
        assert_eq!(format_figure(31.44), "31.4");
        assert_eq!(format_figure(2.054), "2.05");
        assert_eq!(format_figure(58_249.0), "58200");
        assert_eq!(format_figure(123.4), "123");
    }

    /// Seed-steps count a step of S seeds as S; each row is read against its own
    /// implementation's S = 1 and, for headlab, PyTorch at the same S.
    #[test]
    fn the_seeds_table_counts_seed_steps_and_their_ratios() {
        let with_seeds = |implementation, seeds, steps_per_s| {
            let mut result = CaseResult::example(implementation, steps_per_s);
            result.case.seeds = seeds;
            result
        };
        let results = [
            with_seeds(Implementation::Headlab, 1, 100.0),
            with_seeds(Implementation::Headlab, 4, 30.0),
            with_seeds(Implementation::Pytorch, 1, 50.0),
            with_seeds(Implementation::Pytorch, 4, 10.0),
        ];
        let provenance = Provenance {
            pytorch: Some("2.15".into()),
            ..provenance()
        };
        let table = seeds_markdown(&results, &provenance);
        assert!(
            table.contains("| small | flex | headlab | 4 | 120.0 | 1.20x | 3.00x |"),
            "{table}"
        );
        assert!(
            table.contains("| small | cpu | pytorch | 4 | 40.0 | 0.80x | - |"),
            "{table}"
        );
        assert!(
            table.contains("| small | flex | headlab | 1 | 100.0 | 1.00x | 2.00x |"),
            "{table}"
        );
    }
}
