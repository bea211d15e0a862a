//! A worker process that ended: reaped (as PID 1, every child), the lines
//! of the requests lost with it, what it held given back, the facts
//! gathered for `decide`, and its decision applied.

use super::death::{End, InFlight};
use super::decide::{decide, Decision, Ending, Then};
use super::procs::Proc;
use super::Supervisor;
use crate::error::BootError;
use crate::ops::access_log::Answered;
use crate::ops::worker_row::{buffered_word, open_words};
use rustix::process::{Pid, WaitOptions};
use std::time::Instant;

impl Supervisor {
    /// Reaps every child that ended (as PID 1, adopted ones too) and acts
    /// on the workers among them.
    pub(super) fn reap(&mut self) -> Result<(), BootError> {
        loop {
            let ended = match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some(ended)) => ended,
                Ok(None) => return Ok(()),
                Err(rustix::io::Errno::CHILD) => return Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    log::warn!("waitpid: {e}");
                    return Ok(());
                }
            };
            let (pid, status) = ended;
            if status.stopped() || status.continued() {
                continue;
            }
            self.ended(pid, End::of(status))?;
        }
    }

    /// A worker process ended: frees what it held, gathers the facts,
    /// and does what `decide` says.
    fn ended(&mut self, pid: Pid, end: End) -> Result<(), BootError> {
        let found = self
            .places
            .iter_mut()
            .enumerate()
            .find_map(|(i, place)| place.take(pid).map(|(p, role)| (i, p, role)));
        let Some((i, proc, role)) = found else {
            log::debug!("reaped pid {} ({})", pid.as_raw_nonzero(), end.how());
            return Ok(());
        };
        let in_flight = InFlight::of(&proc.row);
        if end.is_crash() {
            self.log_lost(&in_flight);
        }
        self.free_row(&proc);
        let now = Instant::now();
        let culprit = in_flight.culprit.as_ref();
        let place = &self.places[i];
        let ending = Ending {
            role,
            end,
            ready: proc.ready,
            killed: proc.killed,
            from_candidate: proc.from_candidate,
            blame: culprit.map(|(_, digest)| self.deaths.blame(digest, now)),
            draining: self.draining.is_some(),
            announced: self.announced,
            upgrading: self.candidate.is_some(),
            next_starting: place.next.is_some(),
            failed_starts: place.failed_starts,
        };
        let (quarantine, then) = match decide(&ending) {
            Decision::LetGo { unasked: true } => {
                let (pid, how, what) = (proc.pid(), end.how(), in_flight.describe());
                log::warn!("worker {i} (pid {pid}) {how} while draining; {what}");
                return Ok(());
            }
            Decision::LetGo { unasked: false } => {
                log::info!(
                    "worker {i} (pid {}) {} after draining",
                    proc.pid(),
                    end.how()
                );
                return Ok(());
            }
            Decision::Counted { quarantine, then } => (quarantine, then),
        };
        self.count_death(i, &in_flight, quarantine, now);
        log::error!(
            "worker {i} (pid {}) {}; {}",
            proc.pid(),
            end.how(),
            in_flight.describe()
        );
        self.follow(i, then, end)
    }

    /// A worker ended: its counters join the retired ones, what it held
    /// in the host-wide counts is free again, and its row is no longer a
    /// worker of the host's status.
    fn free_row(&mut self, proc: &Proc) {
        self.tally.retire(&proc.row);
        give_back_holdings(self.area.words, &proc.row);
        proc.row.reset();
        self.rows.give_back(proc.row_index);
    }

    /// Counts a death against place `i`, the app its loop was in, and the
    /// plugin bytes it died of (quarantined now if `quarantine`).
    fn count_death(&mut self, i: usize, in_flight: &InFlight, quarantine: bool, now: Instant) {
        self.places[i].crashes += 1;
        self.tally.crashed(i, in_flight.app());
        let Some((app, digest)) = &in_flight.culprit else {
            return;
        };
        self.deaths.record(digest, now);
        if quarantine {
            let q = self.deaths.quarantined(app, digest);
            log::error!(
                "quarantined: {}; every worker refuses it, and takes it out of service",
                q.why()
            );
            self.tally.quarantine(q);
        }
    }

    /// Does what place `i` needs after a death (`end`) that counts.
    fn follow(&mut self, i: usize, then: Then, end: End) -> Result<(), BootError> {
        let place = &mut self.places[i];
        match then {
            Then::FailStart => {
                // A worker that cannot start at all: the start-up fails,
                // as a host that cannot load its apps does.
                self.kill_all();
                return Err(BootError::system(
                    format!("start worker {i}"),
                    std::io::Error::other(format!(
                        "it {} before it served (its log lines above say why)",
                        end.how()
                    )),
                ));
            }
            // Its replacement was on the way: it takes over.
            Then::TakeOver => place.serving = place.next.take(),
            Then::Replace => {
                place.failed_starts = 0;
                self.start(i)?;
                if let Some(new) = &self.places[i].serving {
                    log::info!("worker {i} replaced by pid {}", new.pid());
                }
            }
            Then::ReplaceAfterBackoff {
                failed_starts,
                pause,
            } => {
                log::warn!(
                    "worker {i} died before it served ({failed_starts} time(s) in a row); \
                     starting it again in {pause:?}"
                );
                place.failed_starts = failed_starts;
                place.start_at = Some(Instant::now() + pause);
            }
            Then::RetryReplacement {
                failed_starts,
                pause,
            } => {
                log::warn!("worker {i}: its replacement died before it served; again in {pause:?}");
                place.failed_starts = failed_starts;
                place.start_at = Some(Instant::now() + pause);
            }
            Then::AbandonUpgrade => {
                self.abandon_upgrade(&format!("a worker started from it {}", end.how()))
            }
        }
        Ok(())
    }

    /// One access-log line for each request lost with a dead worker, as
    /// a 502 (what nginx logs when its upstream dies mid-request).
    fn log_lost(&self, in_flight: &InFlight) {
        let Some(log) = &self.access_log else {
            return;
        };
        let answered = Answered {
            status: 502,
            bytes: 0,
            micros: 0,
        };
        for info in in_flight.lost_requests() {
            log.write(&info, &answered);
        }
    }
}

/// A worker ended: the connection slots and buffered bytes it held in the
/// host-wide counts are free again.
fn give_back_holdings(
    area: &'static [std::sync::atomic::AtomicU64],
    row: &crate::ops::worker_row::Row,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let (open, _) = open_words(area);
    for (total, mine) in [(open, row.held()), (buffered_word(area), row.buffered())] {
        let n = mine.swap(0, SeqCst);
        let _ = total.fetch_update(SeqCst, SeqCst, |t| Some(t.saturating_sub(n)));
    }
}
