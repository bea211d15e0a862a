//! What the supervisor counts for status and metrics, kept in the shared
//! area (so whichever worker answers shows it, and a re-executed
//! supervisor reads it back): crashes by app and by place, the workers
//! started, and the counters of every worker that has ended.

use crate::ops::peers::{read_cell, SupervisorNotes};
use crate::ops::worker_row::{retired_cell, supervisor_cell, Row};
use crate::stats::Counts;
use std::sync::atomic::AtomicU64;

pub struct Tally {
    area: &'static [AtomicU64],
    notes: SupervisorNotes,
    retired: Counts,
}

impl Tally {
    /// The tally kept in `area` (empty in a new one).
    pub fn new(area: &'static [AtomicU64], places: usize) -> Self {
        let mut notes: SupervisorNotes = read_cell(supervisor_cell(area));
        notes.pid = std::process::id();
        if notes.crashes_by_place.len() < places {
            notes.crashes_by_place.resize(places, 0);
        }
        let retired = read_cell(retired_cell(area));
        let tally = Tally {
            area,
            notes,
            retired,
        };
        tally.write_notes();
        tally
    }

    fn write_notes(&self) {
        if let (Some(cell), Ok(text)) = (
            supervisor_cell(self.area),
            serde_json::to_string(&self.notes),
        ) {
            cell.write(&text);
        }
    }

    /// A worker process of place `place` started.
    pub fn started(&mut self, place: usize) {
        self.notes.started += 1;
        if self.notes.started_by_place.len() <= place {
            self.notes.started_by_place.resize(place + 1, 0);
        }
        self.notes.started_by_place[place] += 1;
        self.write_notes();
    }

    /// A worker of place `place` died running `app` (if in app code).
    pub fn crashed(&mut self, place: usize, app: Option<&str>) {
        *self
            .notes
            .crashes_by_app
            .entry(app.unwrap_or("(none)").to_string())
            .or_default() += 1;
        if self.notes.crashes_by_place.len() <= place {
            self.notes.crashes_by_place.resize(place + 1, 0);
        }
        self.notes.crashes_by_place[place] += 1;
        self.write_notes();
    }

    /// Plugin bytes are quarantined (every worker reads it from the cell).
    pub fn quarantine(&mut self, q: crate::ops::peers::Quarantined) {
        self.notes.quarantined.push(q);
        self.write_notes();
    }

    /// A worker ended: its last published counters join the retired ones.
    pub fn retire(&mut self, row: &Row) {
        let last: Counts = read_cell(Some(row.snapshot()));
        self.retired.add(&last.retired());
        if let (Some(cell), Ok(text)) = (
            retired_cell(self.area),
            serde_json::to_string(&self.retired),
        ) {
            cell.write(&text);
        }
    }
}
