//! Rendering: `sweep.csv`, `heads.csv` and `report.md` from the collected and aggregated
//! report.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::report::aggregate::{PointReport, SweepReport};
use inspect::measures::heads::unit_of;

use crate::report::collect::{HEAD_NUMBERS, NUMBERS, Number, RunRow};
use crate::spec::Sweep;
use crate::stats::{EstimateJson, wilson};

/// One CSV line (RFC 4180): a field holding a comma, a quote or a line break is quoted.
/// Written here rather than with the `csv` crate, which asks for serde features the rest of
/// the workspace does not, and so would make every package rebuild Burn.
pub fn csv_line(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|field| {
            if field.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", field.replace('"', "\"\""))
            } else {
                field.clone()
            }
        })
        .collect();
    format!("{}\n", quoted.join(","))
}

/// `sweep.csv`: one row per run, a column per grid key and per number some run has.
pub fn runs_csv(sweep: &Sweep, rows: &[RunRow]) -> String {
    let mut header: Vec<String> = ["run", "state", "config", "seed"]
        .map(String::from)
        .to_vec();
    header.extend(sweep.grid_keys.iter().cloned());
    header.extend(NUMBERS.iter().map(Number::csv_column));
    let mut text = csv_line(&header);
    for row in rows {
        let mut record = vec![
            row.name.clone(),
            row.state.clone(),
            row.config.clone(),
            row.seed.to_string(),
        ];
        record.extend(sweep.grid_keys.iter().map(|k| row.grid[k].clone()));
        record.extend(NUMBERS.iter().map(|number| {
            row.numbers
                .get(number.key)
                .map_or(String::new(), |v| v.to_string())
        }));
        text.push_str(&csv_line(&record));
    }
    text
}

/// `heads.csv`'s measures of a head, after its layer, head and role, each column named with
/// its unit ([`unit_of`]); then a `score_<pattern>_frac` column per pattern (the share of the
/// head's attention on it).
const HEAD_CSV_MEASURES: [&str; 6] = [
    "entropy",
    "confidence",
    "mean_distance",
    "ablation_drop",
    "mean_ablation_drop",
    "resample_ablation_drop",
];

/// `heads.csv`: one row per head per run.
pub fn heads_csv(sweep: &Sweep, rows: &[RunRow]) -> String {
    let patterns: BTreeSet<&String> = rows
        .iter()
        .flat_map(|row| row.heads.iter().flat_map(|h| h.pattern_scores.keys()))
        .collect();
    let mut header: Vec<String> = ["run", "config", "seed"].map(String::from).to_vec();
    header.extend(sweep.grid_keys.iter().cloned());
    header.extend(["layer", "head", "role"].map(String::from));
    header.extend(HEAD_CSV_MEASURES.map(|field| unit_of(field).csv_column(field)));
    header.extend(
        patterns
            .iter()
            .map(|p| unit_of(&format!("pattern_scores.{p}")).csv_column(&format!("score_{p}"))),
    );
    let mut text = csv_line(&header);
    for row in rows {
        for head in &row.heads {
            let mut record = vec![row.name.clone(), row.config.clone(), row.seed.to_string()];
            record.extend(sweep.grid_keys.iter().map(|k| row.grid[k].clone()));
            record.extend([
                head.id.layer.to_string(),
                head.id.head.to_string(),
                head.role.clone(),
                head.entropy.to_string(),
                head.confidence.to_string(),
                head.mean_distance.to_string(),
                head.ablation_drop.map_or(String::new(), |d| d.to_string()),
                head.mean_ablation_drop
                    .map_or(String::new(), |d| d.to_string()),
                head.resample_ablation_drop
                    .map_or(String::new(), |d| d.to_string()),
            ]);
            record.extend(patterns.iter().map(|p| {
                head.pattern_scores
                    .get(*p)
                    .map_or(String::new(), |v| v.to_string())
            }));
            text.push_str(&csv_line(&record));
        }
    }
    text
}

/// `report.md`.
pub fn markdown(report: &SweepReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Sweep `{}`\n", report.sweep);
    let done = report.runs.iter().filter(|r| r.state == "done").count();
    let _ = writeln!(
        md,
        "{done} of {} runs done. Each cell: mean ± 95% confidence interval over the seeds \
         done (Student's t); \"steps to 99%\" over the runs that reached 99% eval token \
         accuracy; accuracies and drops are fractions (0 to 1). Every other number (ablations, \
         pruning, divergence, composition, patching) is in [`estimates.csv`](estimates.csv), \
         one row per grid point and number; each run's in [`sweep.csv`](sweep.csv), each \
         head's in [`heads.csv`](heads.csv).\n",
        report.runs.len()
    );
    let damaged: Vec<&RunRow> = report.runs.iter().filter(|r| r.damage.is_some()).collect();
    if !damaged.is_empty() {
        let _ = writeln!(
            md,
            "Left out, damaged (files not as their manifests recorded; `headlab sweep run` \
             trains or inspects them again):\n"
        );
        for row in damaged {
            let damage = row.damage.as_deref().unwrap_or_default();
            let _ = writeln!(md, "- `{}`: {damage}", row.name);
        }
        let _ = writeln!(md);
    }
    estimates_markdown(&mut md, report);
    let _ = writeln!(
        md,
        "\n## Roles across seeds\n\nPer grid point and layer: in how many seeds at least one \
         head has the role (a role: 0.5 or more of a head's attention on one pattern), with \
         its 95% Wilson interval, and the same count on untrained models of the same configs \
         and seeds, measured on the same probe. Then each head of the first seed, matched in \
         every other seed as `compare` matches them: the matched heads' most frequent role.\n"
    );
    for point in &report.points {
        let _ = writeln!(md, "### {}\n", point.point);
        if let Some(note) = &point.matching_note {
            let _ = writeln!(md, "Not matched: {note}\n");
            continue;
        }
        roles_markdown(&mut md, point);
        slots_markdown(&mut md, point);
        let _ = writeln!(md);
    }
    relations_markdown(&mut md, report);
    files_markdown(&mut md, report);
    md
}

/// Links to the figures and to each grid point's `compare` page.
fn files_markdown(md: &mut String, report: &SweepReport) {
    let _ = writeln!(
        md,
        "## Figures and pages
"
    );
    let figures: Vec<&std::path::Path> = report
        .files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "png"))
        .filter_map(|f| f.strip_prefix(&report.dir).ok())
        .collect();
    for figure in figures {
        let _ = writeln!(md, "- [{0}]({0})", figure.display());
    }
    for point in &report.points {
        let page = std::path::Path::new("matching")
            .join(slug(&point.point))
            .join("compare.html");
        if report.dir.join(&page).is_file() {
            let _ = writeln!(
                md,
                "- [{}: heads matched across seeds]({})",
                point.point,
                page.display()
            );
        }
    }
}

/// The numbers of `report.md`'s headline table; every number is in `estimates.csv`.
pub const HEADLINE: [&str; 6] = [
    "eval_token_acc",
    "steps_to_99",
    "heads_with_role",
    "mean_pattern_js",
    "max_ablation_drop",
    "removable_heads",
];

/// `estimates.csv`: a row per grid point and number some point has (named as its column in
/// `sweep.csv`, unit suffix and all), the number's unit in words, its mean and 95% interval
/// over seeds (Student's t; empty with one seed), the seeds it is over.
pub fn estimates_csv(report: &SweepReport) -> String {
    let header = [
        "grid_point",
        "number",
        "unit",
        "seeds",
        "mean",
        "ci95",
        "low",
        "high",
    ];
    let mut text = csv_line(&header.map(String::from));
    for point in &report.points {
        for number in NUMBERS {
            let Some(estimate) = point.estimates.get(number.key) else {
                continue;
            };
            let show = |v: f64| match v.is_finite() {
                true => v.to_string(),
                false => String::new(),
            };
            let ci95 = estimate.ci95.unwrap_or(f64::NAN);
            text.push_str(&csv_line(&[
                point.point.clone(),
                number.csv_column(),
                number.unit.name().to_string(),
                estimate.n.to_string(),
                show(estimate.mean),
                show(ci95),
                show(estimate.mean - ci95),
                show(estimate.mean + ci95),
            ]));
        }
    }
    text
}

/// The headline table: a row per grid point, a column per [`HEADLINE`] number some point
/// has; the rest are in `estimates.csv`.
fn estimates_markdown(md: &mut String, report: &SweepReport) {
    let columns: Vec<Number> = NUMBERS
        .into_iter()
        .filter(|n| HEADLINE.contains(&n.key))
        .filter(|n| {
            report
                .points
                .iter()
                .any(|p| p.estimates.contains_key(n.key))
        })
        .collect();
    let mut header = "| grid point | seeds | reached 99% |".to_string();
    let mut rule = "| --- | --- | --- |".to_string();
    for number in &columns {
        let _ = write!(header, " {} |", number.header());
        rule.push_str(" --- |");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for point in &report.points {
        let mut line = format!(
            "| {} | {} of {} | {} of {} |",
            point.point, point.runs, point.planned, point.reached_99, point.runs
        );
        for number in &columns {
            let cell = show_estimate(point.estimates.get(number.key), number.decimals);
            let _ = write!(line, " {cell} |");
        }
        let _ = writeln!(md, "{line}");
    }
}

/// A grid point's roles per layer: trained seeds with the role, its Wilson interval, and
/// untrained ones.
fn roles_markdown(md: &mut String, point: &PointReport) {
    let _ = writeln!(
        md,
        "| layer | role | trained | 95% interval (% of seeds) | untrained |\n| --- | --- | --- | --- | --- |"
    );
    let mut any = false;
    for (layer, roles) in point.roles.iter().enumerate() {
        for (role, count) in roles {
            any = true;
            let (low, high) = wilson(count.trained, count.of);
            let _ = writeln!(
                md,
                "| {layer} | {role} | {} of {} | {:.0}% to {:.0}% | {} of {} |",
                count.trained,
                count.of,
                low * 100.0,
                high * 100.0,
                count.untrained,
                count.of
            );
        }
    }
    if !any {
        let _ = writeln!(md, "| - | no head has a role in any seed | | | |");
    }
}

/// A grid point's slots: each head of the first seed, its matches' most frequent role, and
/// the matched heads' numbers over seeds (the columns some slot has).
fn slots_markdown(md: &mut String, point: &PointReport) {
    let columns: Vec<Number> = HEAD_NUMBERS
        .into_iter()
        .filter(|n| point.slots.iter().any(|s| s.numbers.contains_key(n.key)))
        .collect();
    let titles: String = columns
        .iter()
        .map(|n| format!(" {} |", n.header()))
        .collect();
    let rules: String = columns.iter().map(|_| " --- |").collect();
    let _ = writeln!(
        md,
        "\n| slot | most frequent role | seeds | mean similarity |{titles}\n| --- | --- | --- | --- |{rules}"
    );
    for slot in &point.slots {
        let cells: String = columns
            .iter()
            .map(|n| {
                let cell = show_estimate(slot.numbers.get(n.key), n.decimals);
                format!(" {cell} |")
            })
            .collect();
        let similarity = match slot.mean_similarity.is_finite() {
            true => format!("{:.2}", slot.mean_similarity),
            false => "-".to_string(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} of {} | {similarity} |{cells}",
            slot.reference, slot.role, slot.count, slot.of
        );
    }
}

/// The "Syntax heads across seeds" section, when any grid point has relation scores: per
/// grid point, one table of what the best heads find and, where they were ablated, one of
/// what they are needed for (two tables of nine columns rather than one of seventeen).
fn relations_markdown(md: &mut String, report: &SweepReport) {
    if report.points.iter().all(|p| p.relations.is_empty()) {
        return;
    }
    let _ = writeln!(
        md,
        "## Syntax heads across seeds\n\nPer grid point, relation and direction (dep -> head: \
         the dependent's most-attended word is its head; head -> dep: the other way), each \
         seed's best head (Clark et al. 2019): its score with the 95% interval over seeds, the \
         best fixed offset's score, in how many seeds the best head beats that offset (with \
         its 95% Wilson interval, and the same count on untrained models of the same seeds), \
         the untrained models' best head's score, and the layers the best heads sit in. Then, \
         where the best heads were ablated, what taking each out costs on masked words that \
         are the relation's dependents against every other masked word: eval token accuracy \
         lost when it is zeroed and when it is resample-ablated (its output taken from \
         another sentence), and the masked-LM loss gained when it is resample-ablated (nats \
         per masked word), with that gain's difference, dependents minus elsewhere, taken \
         within each seed and then over seeds. A difference whose interval excludes zero says \
         the relation's words need the head more than other words do; a head that finds a \
         relation but costs its words no more is found but not needed.\n"
    );
    for point in report.points.iter().filter(|p| !p.relations.is_empty()) {
        let _ = writeln!(md, "### {}\n", point.point);
        relations_found_table(md, point);
        relations_needed_table(md, point);
        let _ = writeln!(md);
    }
}

/// `dep -> head` or `head -> dep`.
fn direction_of(direction: &str) -> &'static str {
    match direction {
        "dependent_to_head" => "dep -> head",
        _ => "head -> dep",
    }
}

/// An estimate with `digits` decimals, `-` where there is none.
fn show_estimate(estimate: Option<&EstimateJson>, digits: usize) -> String {
    estimate.map_or("-".to_string(), |e| e.show(digits))
}

/// What each relation's best heads find, against the offset and untrained models.
fn relations_found_table(md: &mut String, point: &PointReport) {
    let _ = writeln!(
        md,
        "| relation | direction | best head (fraction of arcs) | offset baseline (fraction of \
         arcs) | beats it | 95% interval (% of seeds) | untrained beats it | untrained best \
         head (fraction of arcs) | best head's layer |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for r in &point.relations {
        let (low, high) = wilson(r.beats_baseline, r.of);
        let untrained = r
            .untrained_beats_baseline
            .map_or("-".to_string(), |k| format!("{k} of {}", r.of));
        let layers: Vec<String> = r
            .best_layers
            .iter()
            .map(|(layer, seeds)| format!("L{layer}: {seeds}"))
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} ({:+}) | {} of {} | {:.0}% to {:.0}% | {untrained} | {} | {} |",
            r.relation,
            direction_of(r.direction),
            r.best_score.show(2),
            r.baseline.show(2),
            r.baseline_offset,
            r.beats_baseline,
            r.of,
            low * 100.0,
            high * 100.0,
            show_estimate(r.untrained_best_score.as_ref(), 2),
            layers.join(", "),
        );
    }
}

/// What the best heads are needed for, for the relations whose best heads were ablated
/// (nothing when none was).
fn relations_needed_table(md: &mut String, point: &PointReport) {
    let ablated: Vec<_> = point
        .relations
        .iter()
        .filter(|r| r.drop_on_relation.is_some() || r.resample_loss_rise_on_relation.is_some())
        .collect();
    if ablated.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n| relation | direction | zeroed: accuracy lost on dependents | zeroed: elsewhere | \
         resampled: accuracy lost on dependents | resampled: elsewhere | resampled: loss \
         gained on dependents (nats) | resampled: elsewhere (nats) | resampled: loss gained, \
         dependents minus elsewhere (nats) |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for r in ablated {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.relation,
            direction_of(r.direction),
            show_estimate(r.drop_on_relation.as_ref(), 3),
            show_estimate(r.drop_elsewhere.as_ref(), 3),
            show_estimate(r.resample_drop_on_relation.as_ref(), 3),
            show_estimate(r.resample_drop_elsewhere.as_ref(), 3),
            show_estimate(r.resample_loss_rise_on_relation.as_ref(), 3),
            show_estimate(r.resample_loss_rise_elsewhere.as_ref(), 3),
            show_estimate(r.resample_loss_rise_difference.as_ref(), 3),
        );
    }
}

/// A grid point as a directory name.
pub fn slug(point: &str) -> String {
    run::name::file_safe(point, '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::aggregate::RelationAcrossSeeds;
    use std::collections::BTreeMap;

    #[test]
    fn relations_get_a_table_of_what_heads_find_and_one_of_what_they_are_needed_for() {
        let estimate = |mean, ci95| EstimateJson { n: 2, mean, ci95 };
        let relation = |name: &str, ablated: bool| RelationAcrossSeeds {
            relation: name.to_string(),
            direction: "head_to_dependent",
            best_score: estimate(0.61, Some(0.04)),
            baseline: estimate(0.53, Some(0.01)),
            baseline_offset: 1,
            beats_baseline: 1,
            untrained_beats_baseline: None,
            untrained_best_score: None,
            drop_on_relation: ablated.then(|| estimate(0.03, Some(0.02))),
            drop_elsewhere: ablated.then(|| estimate(0.006, Some(0.001))),
            resample_drop_on_relation: None,
            resample_drop_elsewhere: None,
            loss_rise_on_relation: None,
            loss_rise_elsewhere: None,
            resample_loss_rise_on_relation: ablated.then(|| estimate(0.4, Some(0.3))),
            resample_loss_rise_elsewhere: ablated.then(|| estimate(0.15, Some(0.1))),
            resample_loss_rise_difference: ablated.then(|| estimate(0.25, Some(1.906))),
            of: 2,
            best_layers: BTreeMap::from([(1, 2)]),
        };
        let report = SweepReport {
            sweep: "syntax".to_string(),
            grid_keys: Vec::new(),
            runs: Vec::new(),
            points: vec![PointReport::with_relations(
                "syntax-pilot",
                2,
                vec![relation("aux", true), relation("obj", false)],
            )],
            files: Vec::new(),
            dir: std::path::PathBuf::new(),
        };
        let mut md = String::new();
        relations_markdown(&mut md, &report);
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
            .collect();
        // Each table: a header, then its rows; both relations are found, only aux ablated.
        assert!(
            rows[0].starts_with("| relation | direction | best head"),
            "{md}"
        );
        assert_eq!(
            rows[1],
            "| aux | head -> dep | 0.61 ± 0.04 | 0.53 ± 0.01 (+1) | 1 of 2 | 9% to 91% | - | - | L1: 2 |"
        );
        assert!(rows[2].starts_with("| obj | head -> dep |"), "{md}");
        assert!(
            rows[3].starts_with("| relation | direction | zeroed"),
            "{md}"
        );
        assert_eq!(
            rows[4],
            "| aux | head -> dep | 0.030 ± 0.020 | 0.006 ± 0.001 | - | - | 0.400 ± 0.300 | 0.150 ± 0.100 | 0.250 ± 1.906 |"
        );
        assert_eq!(
            rows.len(),
            5,
            "obj was not ablated: no row of its own\n{md}"
        );
        assert!(
            rows.iter().all(|row| row.matches(" | ").count() == 8),
            "{md}"
        );
    }

    #[test]
    fn csv_fields_with_commas_or_quotes_are_quoted() {
        let fields = ["plain", "a,b", "say \"hi\"", ""].map(String::from);
        assert_eq!(csv_line(&fields), "plain,\"a,b\",\"say \"\"hi\"\"\",\n");
    }
}
