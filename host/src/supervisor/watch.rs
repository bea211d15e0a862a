//! Looking at the workers each tick: readiness, a replacement that took
//! over, a loop stuck past `--worker-timeout`, replacements asked for
//! (`--max-generations`, `--worker-max-requests`) or past
//! `--worker-max-memory`, delayed starts, the socket files and the TLS
//! files; and the service manager's `WATCHDOG=1`.

use super::procs::backoff;
use super::Supervisor;
use crate::listen::tls::expiry::unix_now;
use crate::ops::notify;
use crate::ops::watchdog::place_in_row;
use rustix::process::Signal;
use std::time::{Duration, Instant};

/// How often resident memory is read (`--worker-max-memory`).
const MEMORY_EVERY: Duration = Duration::from_secs(1);
/// How often the Unix socket files it made are looked at.
const FILES_EVERY: Duration = Duration::from_secs(1);

impl Supervisor {
    /// Readiness, stuck loops, replacements asked for, memory, and
    /// delayed starts.
    pub(super) fn watch(&mut self) {
        if self.draining.is_some() {
            return;
        }
        let now = Instant::now();
        let check_memory =
            self.max_memory > 0 && now.duration_since(self.memory_checked) >= MEMORY_EVERY;
        if check_memory {
            self.memory_checked = now;
        }
        for i in 0..self.places.len() {
            self.watch_place(i, now, check_memory);
        }
        // The socket files are the supervisor's: it made them.
        if now.duration_since(self.files_checked) >= FILES_EVERY {
            self.files_checked = now;
            crate::listen::watch_unix_sockets();
        }
        if let Some(tls) = self.tls.as_mut().filter(|t| now >= t.checked + t.every) {
            tls.checked = now;
            tls.watch.tick(unix_now());
        }
    }

    /// One place: its replacement taking over once it serves, its serving
    /// worker ready, stuck or to be replaced, and its delayed start.
    fn watch_place(&mut self, i: usize, now: Instant, check_memory: bool) {
        let timeout = self.worker_timeout;
        let max_memory = self.max_memory;
        let place = &mut self.places[i];
        if let Some(next) = &mut place.next {
            if next.says_ready() {
                next.ready = true;
                let next = place.next.take();
                if let (Some(old), Some(new)) = (place.serving.take(), next) {
                    log::info!(
                        "worker {i}: pid {} serves; pid {} drains",
                        new.pid(),
                        old.pid()
                    );
                    old.signal(Signal::TERM);
                    place.leaving.push(old);
                    place.serving = Some(new);
                }
            }
        }
        let mut replace = None;
        if let Some(p) = &mut place.serving {
            if !p.ready && p.says_ready() {
                p.ready = true;
                place.failed_starts = 0;
                log::info!("worker {i} (pid {}) ready", p.pid());
            }
            if p.ready && !p.killed {
                let pulse = p.row.pulse()[0].load(std::sync::atomic::Ordering::Relaxed);
                if pulse != p.pulse || pulse & 1 == 1 {
                    p.pulse = pulse;
                    p.pulse_since = now;
                } else if now.duration_since(p.pulse_since) >= timeout {
                    log::error!(
                        "worker {i} (pid {}) has been stuck for {}s in {}; killing it \
                         (--worker-timeout {})",
                        p.pid(),
                        now.duration_since(p.pulse_since).as_secs(),
                        place_in_row(&p.row).unwrap_or_else(|| "host code".to_string()),
                        humantime::format_duration(timeout)
                    );
                    p.killed = true;
                    p.signal(Signal::KILL);
                }
                if let Some(why) = p.row.recycle() {
                    replace = Some(why.reason().to_string());
                } else if check_memory {
                    let rss = crate::ops::peers::rss_bytes(p.pid() as u32);
                    if rss > max_memory {
                        replace = Some(format!(
                            "its resident memory {} passed --worker-max-memory {}",
                            crate::budget::size_text(rss as usize),
                            crate::budget::size_text(max_memory as usize)
                        ));
                    }
                }
            }
        }
        let paused = place.start_at.is_some_and(|at| now < at);
        if let (Some(why), None, Some(p), false) = (replace, &place.next, &place.serving, paused) {
            log::info!("worker {i} (pid {}) is replaced: {why}", p.pid());
            if let Err(e) = self.start(i) {
                log::error!("worker {i}: cannot start its replacement: {e}");
            }
        }
        let place = &mut self.places[i];
        if place.serving.is_none() && place.start_at.is_some_and(|at| now >= at) {
            if let Err(e) = self.start(i) {
                log::error!("worker {i}: cannot start it again: {e}");
                self.places[i].start_at = Some(now + backoff(8));
            }
        }
    }

    /// Sends the service manager's `WATCHDOG=1` every half period while
    /// at least one worker serves with a loop that turns; withheld only
    /// when none does (a dead or stuck worker is replaced here, at
    /// `--worker-timeout` for a stuck one).
    pub(super) fn keep_alive(&mut self) {
        let Some((every, last)) = self.keepalive else {
            return;
        };
        if last.elapsed() < every || self.draining.is_some() {
            return;
        }
        let now = Instant::now();
        // The host serves while one worker does: a dead or stuck worker is
        // replaced here, and a service-manager restart would undo that.
        let serving = self.places.iter().any(|p| {
            p.serving
                .as_ref()
                .is_some_and(|s| s.ready && now.duration_since(s.pulse_since) < every * 2)
        });
        if serving {
            notify::watchdog();
        } else {
            log::debug!("WATCHDOG=1 withheld: a worker is starting or stuck");
        }
        self.keepalive = Some((every, now));
    }
}
