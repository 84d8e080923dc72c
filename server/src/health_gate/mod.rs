//! Health-gated updates (issue 39, after Nomad's `update` block): when a
//! change gives a workload whose new spec sets `update` a new generation,
//! a **gate** opens for it. The new generation must become Ready within
//! `healthyDeadline` and stay Ready for `minHealthyTime` without a break.
//! The gate passes (an `UpdateHealthy` event; the new spec becomes the
//! last healthy one) or fails at the deadline (a `Reverted` event; with
//! `autoRevert` the last healthy spec is written back into the desired
//! state by the server).
//!
//! This module owns the open gates and the last healthy spec of every
//! workload (its user-written spec at the last generation seen Ready while
//! no gate was open). It is a pure type on `tokio::time`: the actor tells
//! it about spec changes ([`HealthGates::spec_changed`]), what it sees of
//! Ready at each tick ([`HealthGates::observe`]) and asks what is decided
//! ([`HealthGates::due`]); it carries out the outcomes (events, the job's
//! failure, the revert) and saves [`HealthGates::saved`] next to the state
//! file whenever the open gates change ([`file`]).

pub(crate) mod carry;
pub mod file;
pub(crate) mod observe;

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::Workload;
use ank_common::duration::format_duration;
use ank_common::health_spec::GateSettings;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// A spec that was Ready, and at which generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Healthy {
    pub generation: u64,
    /// The workload as users wrote it (what a revert writes back).
    pub spec: Workload,
}

/// What one tick saw of a workload's Ready condition at its current
/// generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Ready,
    /// Not Ready; why, e.g. `NotAvailable: readinessProbe failed: HTTP 500`.
    NotReady(String),
}

/// What a gate decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Ready for `minHealthyTime` within the deadline.
    Passed { workload: String, generation: u64, reason: String },
    /// The deadline passed first; `revert` is the spec to put back (only
    /// with `autoRevert` and a known healthy spec).
    Failed { workload: String, generation: u64, reason: String, revert: Option<Box<Healthy>> },
}

/// One open gate.
#[derive(Debug, Clone)]
struct Gate {
    generation: u64,
    /// The gated spec as users wrote it.
    spec: Workload,
    settings: GateSettings,
    deadline: Instant,
    /// Since when it is Ready without a break, if it is.
    ready_since: Option<Instant>,
    /// Why it was last seen not Ready.
    not_ready: String,
    revert_to: Option<Healthy>,
}

/// A gate as saved next to the state file: a restarted server opens it
/// again with a fresh deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedGate {
    pub workload: String,
    /// The generation it gated (numbered by the server that saved it).
    pub generation: u64,
    pub spec: Workload,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_to: Option<Healthy>,
}

/// The open gates and the last healthy specs.
#[derive(Debug, Default)]
pub struct HealthGates {
    open: BTreeMap<String, Gate>,
    healthy: BTreeMap<String, Healthy>,
}

impl HealthGates {
    /// A workload's spec changed to `spec` at `generation`: a gate opens
    /// when `spec` sets `update`, unless `spec` is its last healthy spec
    /// (a revert, or a re-apply of the spec that was healthy): that is
    /// known good. A gate of an earlier generation is replaced; its revert
    /// target stays (the generation in between never proved healthy).
    /// Returns whether the open gates changed (they are saved then).
    // [feature: issue 39 health-gated update opens a gate on a new generation]
    pub fn spec_changed(&mut self, workload: &str, generation: u64, spec: &Workload, now: Instant) -> bool {
        let earlier = self.open.remove(workload);
        let had_gate = earlier.is_some();
        if let Some(h) = self.healthy.get_mut(workload)
            && h.spec == *spec
        {
            h.generation = generation;
            return had_gate;
        }
        // Validated at apply; a spec that does not read has no gate.
        let Some(settings) = spec.update.as_ref().and_then(|u| u.settings().ok()) else { return had_gate };
        let revert_to = match earlier {
            Some(gate) => gate.revert_to,
            None => self.healthy.get(workload).cloned(),
        };
        let gate = Gate {
            generation,
            spec: spec.clone(),
            settings,
            deadline: now + settings.healthy_deadline,
            ready_since: None,
            not_ready: "no report yet".to_owned(),
            revert_to,
        };
        self.open.insert(workload.to_owned(), gate);
        true
    }

    /// The workload left the desired state: its gate and healthy spec go.
    /// Returns whether the open gates changed.
    pub fn removed(&mut self, workload: &str) -> bool {
        self.healthy.remove(workload);
        self.open.remove(workload).is_some()
    }

    /// Whether a tick's look at `workload` at `generation` can change
    /// anything: a gate is open, or that generation is not known healthy
    /// yet. Otherwise [`Self::observe`] would do nothing, and the tick
    /// skips the workload (no instance name to hash, every second, for
    /// every workload that is Ready and settled).
    pub fn wants_to_see(&self, workload: &str, generation: u64) -> bool {
        self.open.contains_key(workload) || self.healthy.get(workload).is_none_or(|h| h.generation != generation)
    }

    /// What a tick saw of `workload` at `generation`, its current spec
    /// being `spec`. A gate follows it; without a gate a Ready spec becomes
    /// the last healthy one. Returns whether an open gate changed what it
    /// shows ([`Self::open_for`]).
    pub fn observe(&mut self, workload: &str, generation: u64, seen: Seen, spec: &Workload, now: Instant) -> bool {
        if let Some(gate) = self.open.get_mut(workload) {
            if gate.generation != generation {
                return false;
            }
            return match seen {
                Seen::Ready => gate.ready_since.replace(gate.ready_since.unwrap_or(now)).is_none(),
                Seen::NotReady(why) => {
                    let changed = gate.ready_since.is_some() || gate.not_ready != why;
                    gate.ready_since = None;
                    gate.not_ready = why;
                    changed
                }
            };
        }
        if seen != Seen::Ready {
            return false;
        }
        // Within one run of the server a generation names one spec: no
        // comparison of specs at every tick.
        if self.healthy.get(workload).is_none_or(|h| h.generation != generation) {
            self.healthy.insert(workload.to_owned(), Healthy { generation, spec: spec.clone() });
        }
        false
    }

    /// The gates decided at `now`; they close.
    // [feature: issue 39 gate passes after minHealthyTime Ready, fails at healthyDeadline]
    pub fn due(&mut self, now: Instant) -> Vec<Outcome> {
        let decided: Vec<String> = self
            .open
            .iter()
            .filter(|(_, g)| g.passed(now) || now >= g.deadline)
            .map(|(name, _)| name.clone())
            .collect();
        let mut out = Vec::new();
        for workload in decided {
            let Some(gate) = self.open.remove(&workload) else { continue };
            let generation = gate.generation;
            if gate.passed(now) {
                let reason = format!("generation {generation} Ready for {}", gate.min_healthy_text());
                self.healthy.insert(workload.clone(), Healthy { generation, spec: gate.spec });
                out.push(Outcome::Passed { workload, generation, reason });
            } else {
                let (reason, revert) = gate.failure(now);
                out.push(Outcome::Failed { workload, generation, reason, revert });
            }
        }
        out
    }

    /// Why the item of `workload` at `generation` is still in progress, if
    /// a gate is open for it (what `ank get jobs` shows). The text changes
    /// only when Ready does, not with the clock: event subscribers see no
    /// change every second.
    pub fn open_for(&self, workload: &str, generation: u64) -> Option<String> {
        let gate = self.open.get(workload).filter(|g| g.generation == generation)?;
        let deadline = gate.deadline_text();
        Some(match gate.ready_since {
            Some(_) => format!("update gate: Ready, to stay so for {} (deadline {deadline})", gate.min_healthy_text()),
            None => format!("update gate: not Ready ({}) (deadline {deadline})", gate.not_ready),
        })
    }

    /// Whether a gate is open for `workload` (its dependents wait).
    pub fn is_open(&self, workload: &str) -> bool {
        self.open.contains_key(workload)
    }

    /// Whether `spec` is the last healthy spec of `workload`.
    pub fn is_last_healthy(&self, workload: &str, spec: &Workload) -> bool {
        self.healthy.get(workload).is_some_and(|h| h.spec == *spec)
    }

    /// The last healthy spec of `workload`, if one was seen.
    pub fn last_healthy(&self, workload: &str) -> Option<&Healthy> {
        self.healthy.get(workload)
    }

    /// The open gates as they are saved.
    pub fn saved(&self) -> Vec<SavedGate> {
        self.open
            .iter()
            .map(|(name, g)| SavedGate {
                workload: name.clone(),
                generation: g.generation,
                spec: g.spec.clone(),
                revert_to: g.revert_to.clone(),
            })
            .collect()
    }

    /// Opens the saved gates again after a restart, each with a fresh
    /// deadline at the workload's generation now, when the desired state
    /// still has the gated spec (`current(name)`: the spec and its
    /// generation); a gate whose spec changed meanwhile is dropped.
    pub fn restore(&mut self, saved: Vec<SavedGate>, current: impl Fn(&str) -> Option<(u64, Workload)>, now: Instant) {
        for s in saved {
            let Some((generation, spec)) = current(&s.workload).filter(|(_, spec)| *spec == s.spec) else {
                tracing::info!("update gate of '{}' not restored: its spec changed", s.workload);
                continue;
            };
            if let Some(h) = s.revert_to {
                self.healthy.insert(s.workload.clone(), h);
            }
            self.spec_changed(&s.workload, generation, &spec, now);
        }
    }
}

impl Gate {
    /// `healthyDeadline` as the user wrote it (`60s` stays `60s`).
    fn deadline_text(&self) -> String {
        let written = self.spec.update.as_ref().and_then(|u| u.healthy_deadline.clone());
        written.unwrap_or_else(|| format_duration(self.settings.healthy_deadline))
    }

    /// `minHealthyTime` as the user wrote it.
    fn min_healthy_text(&self) -> String {
        let written = self.spec.update.as_ref().and_then(|u| u.min_healthy_time.clone());
        written.unwrap_or_else(|| format_duration(self.settings.min_healthy_time))
    }

    fn passed(&self, now: Instant) -> bool {
        self.ready_since.is_some_and(|since| now.saturating_duration_since(since) >= self.settings.min_healthy_time)
    }

    /// Why the gate failed at `now`, and the spec to put back.
    fn failure(self, now: Instant) -> (String, Option<Box<Healthy>>) {
        let g = self.generation;
        let within = self.deadline_text();
        let what = match self.ready_since {
            Some(since) => format!(
                "generation {g} not Ready for {} within {within} (Ready since {})",
                self.min_healthy_text(),
                format_duration(whole_seconds(now.saturating_duration_since(since)))
            ),
            None => format!("generation {g} not Ready within {within} ({})", self.not_ready),
        };
        match (self.settings.auto_revert, self.revert_to) {
            (true, Some(h)) => (format!("{what}; put back generation {}", h.generation), Some(Box::new(h))),
            (true, None) => (format!("{what}; no healthy generation to put back"), None),
            (false, _) => (format!("{what}; autoRevert is off, nothing put back"), None),
        }
    }
}

fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

#[cfg(test)]
mod tests;
