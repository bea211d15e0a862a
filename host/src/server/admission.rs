//! Who gets in: accepting while the host is under its connection cap
//! (`--max-connections`, one count for every worker: `crate::open_count`;
//! under `queue` a slot is taken before each `accept` and given back if
//! none waits, under `shed` once a client is accepted), and
//! what clients past it get (`--overload`): `queue` pauses the listeners,
//! so they wait in the kernel backlog until a connection closes (on any
//! worker: the one that closes it wakes the workers paused at the cap);
//! `shed`
//! keeps accepting and answers each at once with 503 (`shed`). An
//! EMFILE/ENFILE from `accept` is met the same way: with `shed`, a spare
//! descriptor of the process's pool (`spares`) is given up for one accept,
//! that client answered 503 and closed, the spare reopened; otherwise (no
//! spare left: another loop's accept took its slot) accepts pause until
//! `RETRY_ACCEPT` passes, and the pool is filled again as soon as it can
//! be, every loop shedding and closing what it accepts meanwhile. Pauses
//! and sheds are counted, and the first of each a minute is logged with
//! the cap.

use super::conn::Conn;
use super::Server;
use crate::http::answer::HostAnswer;
use crate::http::response::{write_response, DateCache, Persist};
use crate::listen::Accepted;
use crate::poller::Token;
use crate::settings::Overload;
use crate::stats::{bump, stamp};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long accepts stay paused after `accept` failed (out of descriptors
/// without a spare, or another error) before they are tried again.
const RETRY_ACCEPT: Duration = Duration::from_millis(100);
/// At most one overload line a minute per worker.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// What giving up the spare descriptor for one accept came to.
enum Spare {
    /// A client was answered 503 (or went before it could be): try the
    /// next.
    Shed,
    /// No client waits: the backlog is empty.
    NoneWaits,
    /// No spare to give up, or it could not be had back (another worker
    /// took its slot): accepts pause, and the spare is reopened when
    /// descriptors free up.
    Missing,
}

/// True for the errors that mean no descriptor is left.
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Why a client accepted while the spares are short is shed.
fn descriptors_short() -> io::Error {
    io::Error::from_raw_os_error(libc::EMFILE)
}

impl Server {
    /// Accepts what waits on listener `i`: up to the cap, then as
    /// `--overload` says.
    pub(super) fn accept(&mut self, i: usize) {
        let queue = self.handles.settings.overload == Overload::Queue;
        loop {
            // Under `queue` the slot is taken first, so a full host leaves
            // clients in the backlog; under `shed` only once a client is
            // accepted, so an accept that finds nobody (another worker, or
            // process, woken for the same connection took it) never makes
            // the host look full to a third.
            if queue && !self.handles.open.try_open() {
                self.pause_at_cap();
                return;
            }
            let accepted = self.acceptor.accept(i);
            if queue && !matches!(accepted, Some(Ok(_))) {
                self.give_back_slot();
            }
            let Some(accepted) = accepted else {
                return;
            };
            match accepted {
                // The process is out of descriptors and this client took
                // the one a spare left: it is answered 503 and closed, so
                // the descriptor goes back to the pool.
                Ok((stream, peer)) if !queue && self.handles.spares.short() => {
                    self.shed(i, stream, peer, false, Some(&descriptors_short()))
                }
                Ok((stream, peer)) if !queue && !self.handles.open.try_open() => {
                    self.shed(i, stream, peer, true, None)
                }
                Ok((stream, peer)) => self.admit(stream, peer, i),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) if out_of_descriptors(&e) => match self.shed_with_spare(i, &e) {
                    Spare::Shed => {}
                    Spare::NoneWaits => return,
                    Spare::Missing => {
                        self.pause_accepts(Some(&e));
                        return;
                    }
                },
                Err(e) => {
                    self.pause_accepts(Some(&e));
                    return;
                }
            }
        }
    }

    /// Out of descriptors under `--overload shed`: closes a spare,
    /// accepts one client, answers it 503, closes it and reopens the
    /// spare. `accept` fails for want of a descriptor before it looks at
    /// the backlog, so an empty backlog shows only here (`NoneWaits`:
    /// without it, a full table would keep the loop accepting forever).
    fn shed_with_spare(&mut self, i: usize, why: &io::Error) -> Spare {
        if self.handles.settings.overload != Overload::Shed {
            return Spare::Missing;
        }
        let Some(spare) = self.handles.spares.take() else {
            return Spare::Missing;
        };
        drop(spare);
        let outcome = match self.acceptor.accept(i) {
            Some(Ok((stream, peer))) => {
                self.shed(i, stream, peer, false, Some(why));
                Spare::Shed
            }
            Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => Spare::NoneWaits,
            Some(Err(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                ) =>
            {
                Spare::Shed
            }
            // Out of descriptors still: another loop took the slot.
            _ => Spare::Missing,
        };
        match self.handles.spares.refill() {
            true => outcome,
            false => Spare::Missing,
        }
    }

    /// Answers a client of listener `via` past the cap (`why` None) or
    /// past the descriptor limit 503 and lets it linger (`keep_fd`) or
    /// closes it. A TLS listener's client is closed unanswered: a 503 in
    /// plaintext is no answer a TLS client can read.
    fn shed(
        &mut self,
        via: usize,
        stream: Accepted,
        peer: Arc<str>,
        keep_fd: bool,
        why: Option<&io::Error>,
    ) {
        let now = self.clock.now();
        let date = self.date.get();
        match self.dispatcher.serves_tls(via) {
            true => drop(stream),
            false => self
                .shedder
                .shed(stream, peer, date, now, keep_fd, &mut self.bufs),
        }
        bump(&self.handles.stats.worker(self.worker).shed, 1);
        self.log_overload("answering new clients 503 with Retry-After: 1", why);
    }

    /// Gives back a connection's slot in the host-wide count and wakes the
    /// other workers that paused at the cap.
    pub(super) fn give_back_slot(&mut self) {
        let waiting = self.handles.open.close();
        if !waiting.none() {
            self.handles
                .control
                .wake_some(|i| waiting.wants(i), self.worker);
        }
    }

    /// The host is full under `--overload queue`: stops accepting until a
    /// connection closes here or on another worker, which wakes this one
    /// (`after_accepts` then resumes).
    fn pause_at_cap(&mut self) {
        self.pause_accepts(None);
        self.paused_at_cap = true;
        self.wait_for_room();
    }

    /// Marks this worker as waiting for room, then looks at the count
    /// again: a slot freed before the mark found nobody to wake, so accepts
    /// are retried at once then. A close that takes the mark wakes this
    /// worker, whose next turn marks it again (another worker may have
    /// taken the slot first), so no wake-up is lost.
    fn wait_for_room(&mut self) {
        self.handles.open.wait_for_room(self.worker);
        if self.handles.open.has_room() {
            self.retry_accept_at = Some(self.clock.now());
        } else if self.handles.open.across_processes() && self.retry_accept_at.is_none() {
            // Another process's close cannot wake this loop.
            self.retry_accept_at = Some(self.clock.now() + RETRY_ACCEPT);
        }
    }

    /// Stops watching the listeners: at the cap (`why` None) or after a
    /// failed `accept`, which is tried again after `RETRY_ACCEPT` (the
    /// retry also serves a loop paused at the cap that found room).
    fn pause_accepts(&mut self, why: Option<&io::Error>) {
        let now = self.clock.now();
        if why.is_some() {
            self.retry_accept_at = Some(now + RETRY_ACCEPT);
        }
        if !self.acceptor.is_accepting() {
            return;
        }
        self.acceptor.pause(&mut *self.poller);
        self.paused_since = Some(now);
        let stats = &self.handles.stats.worker(self.worker);
        stats.paused_since.store(stamp(now), Relaxed);
        let what = match why {
            None => "accepts paused; new clients wait in the backlog",
            Some(_) => "accepts paused for 100 ms; new clients wait in the backlog",
        };
        self.log_overload(what, why);
    }

    /// Watches the listeners again (if it may) and accepts what waits.
    pub(super) fn resume_accepts(&mut self) {
        // Even if it cannot resume: a loop that may not accept does not wait
        // for room (nor spin on it).
        self.paused_at_cap = false;
        if self.handles.control.draining() || !self.acceptor.resume(&mut *self.poller) {
            return;
        }
        self.retry_accept_at = None;
        if let Some(since) = self.paused_since.take() {
            let stats = &self.handles.stats.worker(self.worker);
            let held = self.clock.now().saturating_duration_since(since);
            bump(
                &stats.paused_us,
                u64::try_from(held.as_micros()).unwrap_or(u64::MAX),
            );
            stats.paused_since.store(0, Relaxed);
        }
        // Connections may have queued in the backlogs meanwhile.
        for i in self.acceptor.watched() {
            self.accept(i);
        }
    }

    /// After a turn's events: closes shed connections that are done,
    /// looks for room if accepts are paused at the cap (another worker may
    /// have closed a connection and woken this one) and retries accepts
    /// paused by a failed `accept` or with room found.
    pub(super) fn after_accepts(&mut self, now: Instant) {
        if self.shedder.lingering() > 0 {
            self.shedder.sweep(now);
        }
        if self.paused_at_cap {
            self.wait_for_room();
        }
        if self.handles.spares.short() && !self.handles.spares.refill() {
            // Until the pool is whole the process's loops shed what they
            // accept: look again every turn, and at least every
            // `RETRY_ACCEPT`.
            self.retry_accept_at.get_or_insert(now + RETRY_ACCEPT);
        }
        if self.retry_accept_at.is_some_and(|at| at <= now) {
            self.retry_accept_at = None;
            if self.handles.open.has_room() {
                self.resume_accepts();
            }
        }
    }

    /// Logs an overload once a minute at most, with the cap.
    fn log_overload(&mut self, what: &str, why: Option<&io::Error>) {
        let now = self.clock.now();
        if self
            .overload_logged
            .is_some_and(|at| now.saturating_duration_since(at) < LOG_EVERY)
        {
            return;
        }
        self.overload_logged = Some(now);
        let handles = &self.handles;
        let cause = match why {
            Some(e) => format!("accept failed ({e})"),
            None => format!(
                "at the connection cap ({} open host-wide, {} on this worker)",
                handles.open.open(),
                self.conns.len()
            ),
        };
        log::warn!(
            "worker {}: {cause}: {what} (--max-connections {} host-wide over {} worker(s); \
             --overload {}; logged once a minute, counted in status and metrics)",
            self.worker,
            handles.settings.max_connections,
            handles.stats.workers().len(),
            handles.settings.overload.name()
        );
    }

    /// Watches a new connection (503 if it cannot be watched).
    fn admit(&mut self, stream: Accepted, addr: Arc<str>, via: usize) {
        if let Err(e) = stream.set_nodelay() {
            log::debug!("TCP_NODELAY on {addr}: {e}");
        }
        let tls = self.tls_of(via);
        let entry = self.conns.vacant_entry();
        let token = Token(entry.key());
        let stream = match self.poller.attach(stream.as_raw_fd(), token) {
            Ok(None) => stream,
            // A completion backend reads and writes it from now on.
            Ok(Some(link)) => stream.into_ring(link),
            Err(e) => {
                log::warn!("cannot watch connection from {addr}: {e}; answering 503");
                if tls.is_none() {
                    refuse(stream, &self.date);
                }
                self.give_back_slot();
                return;
            }
        };
        // A TLS listener's connection is read and written through its
        // session from the first byte (the handshake).
        let stream = match tls {
            Some(config) => {
                let fd = stream.as_raw_fd();
                match stream.into_tls(config) {
                    Ok(tls) => tls,
                    Err(e) => {
                        log::warn!("cannot start a TLS session for {addr}: {e}; closing it");
                        let _ = self.poller.deregister(fd);
                        self.give_back_slot();
                        return;
                    }
                }
            }
            None => stream,
        };
        let conn = entry.insert(Conn::new(stream, addr.clone()).via(via));
        // A client that never sends a byte is still timed out.
        conn.update_deadline(&self.handles.settings.conn, self.clock.now());
        bump(&self.handles.stats.worker(self.worker).accepted, 1);
        log::trace!("accepted {addr} as {}", token.0);
    }
}

/// Answers 503 to a connection that cannot be served, best effort, and closes it.
fn refuse(mut stream: Accepted, date: &DateCache) {
    use std::io::Write;
    let mut out = Vec::new();
    let resp = HostAnswer::AtCapacity.response();
    write_response(&mut out, &resp, false, Persist::Close, date.get());
    let _ = stream.write(&out);
}
