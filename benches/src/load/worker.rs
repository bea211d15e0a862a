//! One load thread: its own mio `Poll` (edge-triggered epoll on Linux) over
//! its share of the connections. Each connection takes a request (or a
//! pipelined batch) from the shared budget, runs it to its responses or an
//! error, and takes the next.

use super::conn::{classify, Conn, Done, Phase, ReadOutcome};
use super::link::{Link, Negotiated};
use super::{new_histogram, Config, ErrorKind, Mode, Report, Shared};
use hdrhistogram::Histogram;
use mio::{Events, Interest, Poll, Token};
use std::io;
use std::time::{Duration, Instant};

/// How often request timeouts are checked, and the longest single wait.
const TICK: Duration = Duration::from_millis(50);

pub(crate) struct Worker<'a, L: Link> {
    config: &'a Config,
    shared: &'a Shared,
    /// What a new connection is opened with (the TLS client, or nothing).
    opener: &'a L::Opener,
    /// One batch of requests; a shorter batch sends a prefix of it.
    request: &'a [u8],
    /// The length of one request in `request`.
    one: usize,
    poll: Poll,
    events: Events,
    conns: Vec<Conn<L>>,
    /// Connections with a request in flight.
    active: usize,
    start: Instant,
    last_done: Instant,
    completed: u64,
    failed: u64,
    bytes: u64,
    latency_us: Histogram<u64>,
    errors: [u64; super::ERROR_KINDS],
    first_other: Option<String>,
    timed_out: bool,
    /// TLS handshakes done: full, and resumed.
    handshakes: [u64; 2],
    /// What the first of them settled.
    negotiated: Option<Negotiated>,
}

impl<'a, L: Link> Worker<'a, L> {
    pub fn new(
        config: &'a Config,
        shared: &'a Shared,
        opener: &'a L::Opener,
        request: &'a [u8],
        conns: usize,
        start: Instant,
    ) -> Result<Worker<'a, L>, String> {
        let poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
        Ok(Worker {
            config,
            shared,
            opener,
            request,
            one: request.len() / config.mode.depth() as usize,
            poll,
            events: Events::with_capacity(1024),
            conns: (0..conns).map(|_| Conn::new(start)).collect(),
            active: 0,
            start,
            last_done: start,
            completed: 0,
            failed: 0,
            bytes: 0,
            latency_us: new_histogram(),
            errors: [0; super::ERROR_KINDS],
            first_other: None,
            timed_out: false,
            handshakes: [0; 2],
            negotiated: None,
        })
    }

    /// Runs until every connection is idle or the deadline passes.
    pub fn run(&mut self) {
        for i in 0..self.conns.len() {
            self.next_request(i);
        }
        let mut last_scan = Instant::now();
        while self.active > 0 {
            let now = Instant::now();
            if now >= self.shared.deadline {
                self.timed_out = true;
                break;
            }
            let wait = (self.shared.deadline - now).min(TICK);
            let mut events = std::mem::replace(&mut self.events, Events::with_capacity(0));
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.note_other(&e);
                    self.timed_out = true;
                    break;
                }
            }
            for ev in events.iter() {
                self.drive(ev.token().0);
            }
            self.events = events;
            if last_scan.elapsed() >= TICK {
                last_scan = Instant::now();
                self.expire(last_scan);
            }
        }
        // Requests cut off by the deadline are neither answered nor failed.
        for c in &mut self.conns {
            c.stream = None;
            c.phase = Phase::Idle;
        }
    }

    /// Fails the requests (batches) that have waited longer than the timeout.
    fn expire(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.phase != Phase::Idle && now.duration_since(c.started) > self.config.timeout {
                self.fail(i, ErrorKind::Timeout, None);
            }
        }
    }

    /// Starts the next request on slot `i` and drives it.
    fn next_request(&mut self, i: usize) {
        if self.begin(i) {
            self.drive(i);
        }
    }

    /// Takes the next request, or batch of up to the mode's depth, for slot
    /// `i` (reusing its connection in keep-alive modes); false, with the
    /// slot idled, once the budget is spent. A connect error fails the
    /// requests taken and it tries again.
    fn begin(&mut self, i: usize) -> bool {
        let was_active = self.conns[i].phase != Phase::Idle;
        loop {
            let n = self.shared.claim(u64::from(self.config.mode.depth())) as u32;
            if n == 0 {
                let c = &mut self.conns[i];
                c.stream = None;
                c.phase = Phase::Idle;
                if was_active {
                    self.active -= 1;
                }
                return false;
            }
            let c = &mut self.conns[i];
            c.reset_batch(n);
            c.started = Instant::now();
            if c.stream.is_some() {
                c.phase = Phase::Writing;
            } else if let Err(e) = self.connect(i) {
                self.count_errors(classify(&e), n, Some(&e));
                self.conns[i].outstanding = 0;
                continue;
            } else {
                self.conns[i].phase = Phase::Connecting;
            }
            if !was_active {
                self.active += 1;
            }
            return true;
        }
    }

    fn connect(&mut self, i: usize) -> io::Result<()> {
        let mut stream = L::open(self.config.target.addr, self.opener)?;
        self.poll.registry().register(
            stream.socket_mut(),
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.conns[i].stream = Some(stream);
        Ok(())
    }

    /// Moves slot `i` along as far as its socket allows, starting its next
    /// request after each one ends (a loop, not recursion: a refusing server
    /// could otherwise nest one call per request).
    fn drive(&mut self, i: usize) {
        loop {
            let keep_alive = self.config.mode.keep_alive();
            let c = &mut self.conns[i];
            match c.phase {
                Phase::Idle => return,
                Phase::Connecting => match c.connected() {
                    Ok(true) => {
                        c.phase = Phase::Writing;
                        // Keep-alive latency is per request, as wrk measures
                        // it; connection-per-request latency includes the
                        // connect, as ab's "Total" does.
                        if keep_alive {
                            c.started = Instant::now();
                        }
                    }
                    Ok(false) => return,
                    Err(e) => self.fail(i, classify(&e), Some(e)),
                },
                Phase::Writing => match c.write(&self.request[..c.batch as usize * self.one]) {
                    // Wait for the answer's readable edge rather than try a
                    // read now that would almost always find nothing.
                    Ok(true) => {
                        c.phase = Phase::Reading;
                        return;
                    }
                    Ok(false) => return,
                    Err(e) => self.fail(i, classify(&e), Some(e)),
                },
                Phase::Reading => match c.read() {
                    ReadOutcome::Pending => return,
                    ReadOutcome::Done(done) => self.complete(i, done),
                    ReadOutcome::Failed(kind, e) => self.fail(i, kind, e),
                },
            }
        }
    }

    fn complete(&mut self, i: usize, done: Done) {
        let now = Instant::now();
        let c = &mut self.conns[i];
        let us = now.duration_since(c.started).as_micros() as u64;
        self.latency_us.saturating_record(us.max(1));
        self.completed += 1;
        self.bytes += done.bytes;
        self.last_done = now;
        if !(200..300).contains(&done.status) {
            self.errors[ErrorKind::Non2xx as usize] += 1;
        } else if done.declared.is_some_and(|d| d != done.body) || !self.shared.length_ok(done.body)
        {
            self.errors[ErrorKind::WrongLength as usize] += 1;
        }
        c.outstanding = c.outstanding.saturating_sub(1);
        // A connection's first answer comes after its handshake.
        if let Some(n) = c.stream.as_mut().and_then(L::take_handshake) {
            self.handshakes[usize::from(n.resumed)] += 1;
            self.negotiated.get_or_insert(n);
        }
        if self.config.mode == Mode::Close || done.close {
            c.stream = None;
            // The server said it answers no more on this connection: the
            // rest of the batch goes back to the budget, to be sent again.
            self.shared.give_back(u64::from(c.outstanding));
            c.outstanding = 0;
        }
        // With answers still owed, the slot stays in Reading.
        if c.outstanding == 0 {
            self.begin(i);
        }
    }

    /// Fails every request of slot `i`'s batch not answered yet.
    fn fail(&mut self, i: usize, kind: ErrorKind, e: Option<io::Error>) {
        let c = &mut self.conns[i];
        let n = std::mem::take(&mut c.outstanding).max(1);
        c.stream = None;
        self.count_errors(kind, n, e.as_ref());
        self.begin(i);
    }

    fn count_errors(&mut self, kind: ErrorKind, n: u32, e: Option<&io::Error>) {
        self.failed += u64::from(n);
        self.errors[kind as usize] += u64::from(n);
        if kind == ErrorKind::Other {
            if let Some(e) = e {
                self.note_other(e);
            }
        }
    }

    fn note_other(&mut self, e: &io::Error) {
        if self.first_other.is_none() {
            self.first_other = Some(e.to_string());
        }
    }

    /// This thread's share of the run's report.
    pub fn into_report(self, mut report: Report) -> Report {
        report.completed = self.completed;
        report.failed = self.failed;
        report.bytes = self.bytes;
        report.elapsed = if self.timed_out {
            self.shared.deadline.duration_since(self.start)
        } else if self.completed > 0 {
            self.last_done.duration_since(self.start)
        } else {
            // Nothing answered: the run lasted until its last failure.
            self.start.elapsed()
        };
        report.latency_us = self.latency_us;
        report.errors = self.errors;
        report.first_other = self.first_other;
        report.timed_out = self.timed_out;
        report.handshakes = self.handshakes[0];
        report.resumed = self.handshakes[1];
        report.negotiated = self.negotiated;
        report
    }
}
