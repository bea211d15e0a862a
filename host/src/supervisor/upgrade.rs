//! SIGUSR2 in process mode: every worker replaced, one place at a time,
//! by a worker of the binary now at the path; once all are, the
//! supervisor re-executes itself from it (`resume`). A worker of the new
//! binary that dies before serving, or a replacement that takes too long,
//! gives the upgrade up.

use super::binary::Binary;
use super::resume::{self, Resumed};
use super::{Candidate, Supervisor};
use crate::error::BootError;
use crate::listen;
use crate::ops::worker_row::Recycle;
use std::time::Instant;

impl Supervisor {
    /// SIGUSR2: replaces every worker, one place at a time, with workers
    /// of the binary now at the path; once every place is served by one,
    /// the supervisor re-executes itself from it, in place.
    pub(super) fn replace_all(&mut self, why: &str) {
        if self.draining.is_some() {
            log::warn!("{why} ignored: draining");
            return;
        }
        if self.candidate.is_some() {
            log::warn!("{why} ignored: an upgrade is already under way");
            return;
        }
        let path = crate::ops::upgrade::own_binary();
        let binary = match Binary::open(&path, 64 + self.sockets.len()) {
            Ok(binary) => binary,
            Err(e) => {
                log::error!(
                    "{why}: cannot open {}: {e}; nothing changes",
                    path.display()
                );
                return;
            }
        };
        log::info!(
            "{why}: replacing every worker, one at a time, with workers of {}",
            path.display()
        );
        self.candidate = Some(Candidate {
            binary,
            since: Instant::now(),
        });
    }

    /// Gives an upgrade up: the running binary's workers keep serving.
    pub(super) fn abandon_upgrade(&mut self, why: &str) {
        let Some(candidate) = self.candidate.take() else {
            return;
        };
        let mixed = self
            .places
            .iter()
            .filter(|p| p.serving.as_ref().is_some_and(|s| s.from_candidate))
            .count();
        log::error!(
            "upgrade failed: {why}; the workers of the running binary keep serving \
             ({} is not used{})",
            candidate.binary.path.display(),
            if mixed > 0 {
                format!(
                    "; the {mixed} worker(s) already started from it are replaced by workers of \
                     the running binary, each serving before its old one drains"
                )
            } else {
                String::new()
            }
        );
        for place in &mut self.places {
            if let Some(p) = &place.serving {
                match p.from_candidate {
                    true => p.row.ask_recycle(Recycle::Abandoned),
                    false => p.row.clear_recycle(),
                }
            }
            place.start_at = None;
            place.failed_starts = 0;
        }
    }

    /// While an upgrade is under way: once every place is served by a
    /// worker of the new binary (and the old ones have drained), the
    /// supervisor re-executes itself from it. `Some` only if that failed
    /// past recovery.
    pub(super) fn upgrade_step(&mut self) -> Option<Result<(), BootError>> {
        let since = self.candidate.as_ref()?.since;
        if self.draining.is_some() {
            self.candidate = None;
            return None;
        }
        if since.elapsed() > self.start_bound * self.places.len() as u32 {
            self.abandon_upgrade(&format!(
                "its workers did not all serve within {} s",
                (self.start_bound * self.places.len() as u32).as_secs()
            ));
            return None;
        }
        // One place at a time: the next one once no replacement is under
        // way (one asked for otherwise, e.g. at the generation cap, runs
        // its course first and is replaced again).
        let busy = self
            .places
            .iter()
            .any(|p| p.next.is_some() || !p.leaving.is_empty());
        if !busy {
            let next = self.places.iter().find_map(|p| {
                p.serving
                    .as_ref()
                    .filter(|s| !s.from_candidate && s.row.recycle().is_none())
            });
            if let Some(p) = next {
                p.row.ask_recycle(Recycle::Upgrade);
            }
        }
        let done = self.places.iter().all(|p| {
            p.next.is_none()
                && p.leaving.is_empty()
                && p.serving
                    .as_ref()
                    .is_some_and(|s| s.ready && s.from_candidate)
        });
        if !done {
            return None;
        }
        let candidate = self.candidate.take()?;
        let resumed = Resumed {
            sockets: self.sockets.len(),
            rows: self.row_count,
            workers: self
                .places
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.serving.as_ref().map(|s| (i, s.pid(), s.row_index)))
                .collect(),
            crashes: self.places.iter().map(|p| p.crashes).collect(),
            unix_files: listen::created_files(),
        };
        log::info!(
            "upgrade: every worker runs {}; the supervisor re-executes itself from it (pid {} \
             stays)",
            candidate.binary.path.display(),
            std::process::id()
        );
        crate::ops::error_log::flush(crate::ops::log_writer::EXIT_FLUSH);
        let e = resume::exec(
            &candidate.binary.exec_path(),
            &self.args,
            &self.sockets,
            &self.names,
            &self.area,
            &resumed,
        );
        // The workers already run the new binary; this image goes on
        // supervising them.
        log::error!("{e}; this supervisor goes on with the new workers");
        self.binary = candidate.binary;
        None
    }
}
