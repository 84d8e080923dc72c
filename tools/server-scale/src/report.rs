//! The report of a run: per server and size the median of each figure
//! over the rounds, a markdown table (ours, the reference and their
//! ratio), the growth check between the smallest and largest size, and
//! the plot's charts.

use std::collections::BTreeSet;

use crate::sample::Sample;
use crate::svg::{Chart, Series};

/// One figure of the table: its heading and how to read it off a sample.
struct Figure {
    heading: &'static str,
    value: fn(&Sample) -> Option<f64>,
}

const FIGURES: [Figure; 9] = [
    Figure { heading: "apply→last agent created (s)", value: |s| Some(s.apply_created_s) },
    Figure { heading: "apply→all Running (s)", value: |s| Some(s.apply_running_s) },
    Figure { heading: "update one (s)", value: |s| Some(s.update_s) },
    Figure { heading: "reconnect one (s)", value: |s| s.reconnect_s },
    Figure { heading: "CPU apply (s)", value: |s| Some(s.cpu.apply) },
    Figure { heading: "CPU update (s)", value: |s| Some(s.cpu.update) },
    Figure { heading: "CPU total (s)", value: |s| Some(s.cpu.total) },
    Figure { heading: "RSS after apply (MiB)", value: |s| Some(s.rss_after_apply_kib as f64 / 1024.0) },
    Figure { heading: "peak RSS (MiB)", value: |s| Some(s.peak_rss_kib as f64 / 1024.0) },
];

/// The median of `value` over the samples of `server` with `agents`.
pub fn median(samples: &[Sample], server: &str, agents: usize, value: fn(&Sample) -> Option<f64>) -> Option<f64> {
    let mut values: Vec<f64> =
        samples.iter().filter(|s| s.server == server && s.agents == agents).filter_map(value).collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 })
}

fn sizes(samples: &[Sample]) -> Vec<usize> {
    samples.iter().map(|s| s.agents).collect::<BTreeSet<_>>().into_iter().collect()
}

fn has(samples: &[Sample], server: &str) -> bool {
    samples.iter().any(|s| s.server == server)
}

/// The markdown table: a row per size, a column per figure; with the
/// reference each cell is `ours / reference (×ours/reference)`.
pub fn table(samples: &[Sample]) -> String {
    let reference = has(samples, "reference");
    let mut out = String::from("| agents (×20 workloads) |");
    for f in &FIGURES {
        out.push_str(&format!(" {} |", f.heading));
    }
    out.push_str(&format!("\n|---:|{}\n", "---:|".repeat(FIGURES.len())));
    for n in sizes(samples) {
        out.push_str(&format!("| {n} |"));
        for f in &FIGURES {
            let ours = median(samples, "ours", n, f.value);
            let theirs = reference.then(|| median(samples, "reference", n, f.value));
            let cell = match (ours, theirs) {
                (o, None) => opt(o),
                (Some(o), Some(Some(r))) if r > 0.0 => format!("{} / {} (×{:.2})", fmt(o), fmt(r), o / r),
                (o, Some(r)) => format!("{} / {}", opt(o), opt(r)),
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), fmt)
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The growth exponent of a figure of `server` between the smallest and
/// the largest size: log(v_max / v_min) / log(n_max / n_min); 1 is
/// linear, above 1 superlinear.
pub fn growth(samples: &[Sample], server: &str, value: fn(&Sample) -> Option<f64>) -> Option<f64> {
    let sizes = sizes(samples);
    let (&first, &last) = (sizes.first()?, sizes.last()?);
    let (a, b) = (median(samples, server, first, value)?, median(samples, server, last, value)?);
    (first < last && a > 0.0 && b > 0.0).then(|| (b / a).ln() / (last as f64 / first as f64).ln())
}

/// The lines about growth: apply-to-last-agent latency and RSS of each server.
pub fn growth_lines(samples: &[Sample]) -> Vec<String> {
    let mut lines = Vec::new();
    for server in ["ours", "reference"].into_iter().filter(|s| has(samples, s)) {
        for (what, value) in [("apply→last agent created", FIGURES[0].value), ("RSS after apply", FIGURES[7].value)] {
            if let Some(k) = growth(samples, server, value) {
                let verdict = if k <= 1.1 { "at most linear" } else { "SUPERLINEAR" };
                lines.push(format!("{server}: {what} grows as N^{k:.2} ({verdict})"));
            }
        }
    }
    lines
}

/// The plot: apply→last agent latency and RSS after the apply, by size,
/// one line per server.
pub fn charts(samples: &[Sample]) -> Vec<Chart> {
    let panel = |title: &str, y_label: &str, value: fn(&Sample) -> Option<f64>| Chart {
        title: title.to_owned(),
        x_label: "agents (20 workloads each)".to_owned(),
        y_label: y_label.to_owned(),
        series: ["ours", "reference"]
            .into_iter()
            .filter(|s| has(samples, s))
            .map(|server| Series {
                name: server.to_owned(),
                points: sizes(samples)
                    .into_iter()
                    .filter_map(|n| median(samples, server, n, value).map(|v| (n as f64, v)))
                    .collect(),
            })
            .collect(),
    };
    vec![
        panel("apply → last agent created", "seconds", FIGURES[0].value),
        panel("apply → all Running(Ok)", "seconds", FIGURES[1].value),
        panel("server RSS after apply", "MiB", FIGURES[7].value),
    ]
}
