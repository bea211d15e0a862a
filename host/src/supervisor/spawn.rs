//! Starting worker processes: a place's new one (its first, or a
//! replacement while one serves), from the binary an upgrade tries while
//! one is under way; and a re-executed supervisor's adoption of the
//! workers its previous image ran.

use super::handoff::Handoff;
use super::procs::{Place, Proc};
use super::resume::Resumed;
use super::Supervisor;
use crate::error::BootError;
use crate::ops::worker_row::Phase;
use rustix::process::Pid;

impl Supervisor {
    /// What a worker process is started with: the binary (an upgrade's
    /// while one is under way), the arguments, the sockets and the area.
    fn handoff(&self) -> Handoff<'_> {
        let binary = self.candidate.as_ref().map_or(&self.binary, |c| &c.binary);
        Handoff {
            exe: binary.exec_path(),
            args: &self.args,
            sockets: &self.sockets,
            names: &self.names,
            area: &self.area,
            rows: self.row_count,
        }
    }

    /// Starts a process for place `i` (its serving one, or its
    /// replacement when one serves).
    pub(super) fn start(&mut self, i: usize) -> Result<(), BootError> {
        let Some((row_index, row)) = self.rows.take() else {
            log::error!("worker {i}: no free row in the shared area; not started");
            return Ok(());
        };
        row.set_phase(Phase::Starting);
        row.set_place(i);
        let from = self
            .candidate
            .as_ref()
            .map_or(&self.binary, |c| &c.binary)
            .path
            .clone();
        let spawned = self.handoff().command(row_index).and_then(|mut cmd| {
            cmd.spawn()
                .map_err(|e| BootError::file("start a worker process from", &from, e))
        });
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                self.rows.give_back(row_index);
                return Err(e);
            }
        };
        let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
            return Ok(());
        };
        // Reaped by `reap`, never through the handle.
        drop(child);
        let mut proc = Proc::new(pid, row_index, row);
        proc.from_candidate = self.candidate.is_some();
        self.tally.started(i);
        let place = &mut self.places[i];
        place.start_at = None;
        if place.serving.is_some() {
            log::info!("worker {i}: replacement started (pid {})", proc.pid());
            place.next = Some(proc);
        } else {
            log::info!("worker {i} started (pid {})", proc.pid());
            place.serving = Some(proc);
        }
        Ok(())
    }

    /// A re-executed supervisor takes its workers over.
    pub(super) fn adopt(&mut self, resumed: Resumed) {
        for (i, pid, row_index) in resumed.workers {
            let (Some(pid), Some(row)) = (Pid::from_raw(pid), self.rows.claim(row_index)) else {
                continue;
            };
            if i >= self.places.len() {
                self.places.resize_with(i + 1, Place::default);
            }
            let mut proc = Proc::new(pid, row_index, row);
            proc.ready = true;
            self.places[i].serving = Some(proc);
            self.places[i].crashes = resumed.crashes.get(i).copied().unwrap_or(0);
        }
        self.announced = true;
        log::info!(
            "supervisor re-executed in place from {} (pid {}), serving with {} worker(s)",
            self.binary.path.display(),
            std::process::id(),
            self.places.iter().filter(|p| p.serving.is_some()).count()
        );
        // Places the old image left without a worker start now.
        for i in 0..self.places.len() {
            if self.places[i].serving.is_none() {
                if let Err(e) = self.start(i) {
                    log::error!("worker {i}: cannot start it: {e}");
                }
            }
        }
    }
}
