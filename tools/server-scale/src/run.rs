//! A whole run: every round, every size, each server in turn (ours, then
//! the reference), each measurement on a new server process and a new
//! fleet; then the JSON file of all samples, the SVG plot and the report
//! on stdout. A measurement that fails is reported and kept in the JSON
//! as a failure; the run goes on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Result, ScaleError};
use crate::measure::{Plan, measure};
use crate::report;
use crate::sample::Sample;
use crate::server::ServerProcess;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub server: PathBuf,
    pub reference: Option<PathBuf>,
    pub sizes: Vec<usize>,
    pub rounds: usize,
    pub subscribers: usize,
    pub json: PathBuf,
    pub svg: PathBuf,
}

/// A measurement that did not finish.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub server: String,
    pub agents: usize,
    pub round: usize,
    pub error: String,
}

/// Everything the JSON file holds.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub server: PathBuf,
    pub reference: Option<PathBuf>,
    pub samples: Vec<Sample>,
    pub failures: Vec<Failure>,
    pub seconds: f64,
}

/// Runs every measurement, writes the files and prints the report.
pub async fn run(options: &RunOptions) -> Result<Outcome> {
    let started = tokio::time::Instant::now();
    let mut servers = vec![("ours", options.server.clone())];
    if let Some(reference) = &options.reference {
        servers.push(("reference", reference.clone()));
    }
    let (mut samples, mut failures) = (Vec::new(), Vec::new());
    // A server that failed at a size is not tried at that size or above
    // again: a server that cannot keep up would only time out again.
    let mut failed_at: HashMap<&str, usize> = HashMap::new();
    for round in 1..=options.rounds {
        for &agents in &options.sizes {
            for (label, path) in &servers {
                let plan = Plan { server: (*label).to_owned(), agents, round, subscribers: options.subscribers };
                eprint!("round {round}, {agents} agents, {label}: ");
                if let Some(&at) = failed_at.get(label).filter(|&&at| agents >= at) {
                    eprintln!("skipped (failed with {at} agents)");
                    let error = format!("skipped: failed with {at} agents before");
                    failures.push(Failure { server: plan.server, agents, round, error });
                    continue;
                }
                match measure_binary(path, &plan).await {
                    Ok(sample) => {
                        eprintln!(
                            "created {:.3} s, running {:.3} s, cpu {:.2} s, rss {} KiB, resubscribed {}{}",
                            sample.apply_created_s,
                            sample.apply_running_s,
                            sample.cpu.total,
                            sample.rss_after_apply_kib,
                            sample.resubscriptions,
                            if sample.correctness.holds(agents) { "" } else { ", INCORRECT" }
                        );
                        samples.push(sample);
                    }
                    Err(e) => {
                        let error = error_chain(&e);
                        eprintln!("FAILED: {error}");
                        failed_at.insert(label, agents);
                        failures.push(Failure { server: plan.server, agents, round, error });
                    }
                }
            }
        }
    }
    let outcome = Outcome {
        server: options.server.clone(),
        reference: options.reference.clone(),
        samples,
        failures,
        seconds: started.elapsed().as_secs_f64(),
    };
    write(&options.json, &serde_json::to_string_pretty(&outcome)?)?;
    write(&options.svg, &crate::svg::render(&report::charts(&outcome.samples)))?;
    print_report(&outcome, options);
    Ok(outcome)
}

async fn measure_binary(path: &Path, plan: &Plan) -> Result<Sample> {
    let server = ServerProcess::start(path).await?;
    let sample = measure(server.target(), plan).await;
    let tail = server.log_warnings(5);
    server.stop().await;
    sample.map_err(|error| match tail.is_empty() {
        true => error,
        false => ScaleError::WithServerLog { error: Box::new(error), log: tail },
    })
}

fn print_report(outcome: &Outcome, options: &RunOptions) {
    println!("{}", report::table(&outcome.samples));
    for line in report::growth_lines(&outcome.samples) {
        println!("- {line}");
    }
    let incorrect = outcome.samples.iter().filter(|s| !s.correctness.holds(s.agents)).count();
    println!("- correctness: {} of {} samples hold", outcome.samples.len() - incorrect, outcome.samples.len());
    for f in &outcome.failures {
        println!("- FAILED {} with {} agents (round {}): {}", f.server, f.agents, f.round, f.error);
    }
    println!(
        "- {:.0} s in all; samples in {}, plot in {}",
        outcome.seconds,
        options.json.display(),
        options.svg.display()
    );
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| ScaleError::Write { path: path.to_path_buf(), source })?;
    }
    std::fs::write(path, text).map_err(|source| ScaleError::Write { path: path.to_path_buf(), source })
}

/// The error and its sources on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
