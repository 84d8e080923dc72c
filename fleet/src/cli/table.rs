//! The tables `ank-fleet` prints.

use std::collections::BTreeMap;

use super::rollout::Progress;
use super::view::VehicleRow;
use crate::payload::RolloutRecord;

fn render(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("{}\n", padded.join("   ").trim_end())
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

fn dash(v: Option<&str>) -> String {
    v.filter(|s| !s.is_empty()).unwrap_or("-").to_owned()
}

fn yes(b: bool) -> String {
    if b { "True" } else { "False" }.to_owned()
}

/// `ank-fleet status`.
pub fn vehicles(rows: &[VehicleRow]) -> String {
    let header = ["VEHICLE", "ROLLOUT", "JOB", "READY", "AVAILABLE", "REJECTED", "ONLINE", "LAST SEEN"];
    let body = rows
        .iter()
        .map(|r| {
            vec![
                r.vehicle.clone(),
                dash(r.rollout_id.as_deref()),
                dash(r.job_phase.as_deref()),
                yes(r.ready),
                yes(r.available),
                r.rejected_rollout
                    .as_deref()
                    .map_or("-".to_owned(), |id| if id.is_empty() { "(no id)".to_owned() } else { id.to_owned() }),
                r.online.map_or("-".to_owned(), yes),
                dash(r.last_seen.as_deref()),
            ]
        })
        .collect();
    render(&header, body)
}

/// `ank-fleet rollout status ID`.
pub fn rollout(record: &RolloutRecord, vehicles: &BTreeMap<String, (usize, Progress)>) -> String {
    let mut out = format!(
        "rollout {}: {:?}{} ({} of {} waves done, selector '{}', at most {} failures)\n",
        record.id,
        record.phase,
        if record.reason.is_empty() { String::new() } else { format!(": {}", record.reason) },
        record.waves_done,
        record.waves.len(),
        record.selector,
        record.max_failures
    );
    let body = vehicles
        .iter()
        .map(|(v, (wave, p))| {
            let (state, why) = match p {
                Progress::Ready => ("Ready", String::new()),
                Progress::Failed(why) => ("Failed", why.clone()),
                Progress::Pending => ("Pending", String::new()),
            };
            vec![v.clone(), wave.to_string(), state.to_owned(), why]
        })
        .collect();
    out.push_str(&render(&["VEHICLE", "WAVE", "PROGRESS", "REASON"], body));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_table_has_a_row_per_vehicle_with_dashes_for_unknowns() {
        let row = VehicleRow {
            vehicle: "v01".into(),
            labels: BTreeMap::new(),
            online: Some(true),
            rollout_id: Some("r1".into()),
            rejected_rollout: Some("r2".into()),
            rejected_reason: Some("bad".into()),
            job_phase: None,
            ready: true,
            available: true,
            last_seen: Some("2026-11-27T01:00:00Z".into()),
            workloads: BTreeMap::new(),
        };
        let text = vehicles(&[row]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "VEHICLE   ROLLOUT   JOB   READY   AVAILABLE   REJECTED   ONLINE   LAST SEEN");
        assert_eq!(lines[1], "v01       r1        -     True    True        r2         True     2026-11-27T01:00:00Z");
    }
}
