//! One think-time load thread: a mio `Poll` over its users' connections and
//! a timer heap of the users who are thinking. A user connects, sends a
//! request, reads the answer, thinks, and repeats on the same connection
//! until its session's requests are done; then it closes and the next user
//! starts at once. A failed request ends its session: the next user arrives
//! after a think time (so a refusing server is not hammered in a tight loop).
//! The first users arrive spread over one longest think time.

use super::conn::{classify, Conn, Done, Phase, ReadOutcome};
use super::users::{Failure, UsersConfig, UsersReport, FAILURES};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::time::{Duration, Instant};

/// How often request timeouts are checked, and the longest single wait.
const TICK: Duration = Duration::from_millis(50);

struct User {
    conn: Conn<TcpStream>,
    /// Requests left in the current session.
    left: u32,
}

pub(crate) struct UserLoop<'a> {
    config: &'a UsersConfig,
    request: &'a [u8],
    poll: Poll,
    users: Vec<User>,
    /// Users waiting to send their next request (or to arrive), by time.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    deadline: Instant,
    rng: u64,
    ok: u64,
    sessions: u64,
    latency_us: Histogram<u64>,
    failures: [u64; FAILURES],
    first_other: Option<String>,
}

impl<'a> UserLoop<'a> {
    pub fn new(
        config: &'a UsersConfig,
        request: &'a [u8],
        users: usize,
        deadline: Instant,
        seed: u64,
    ) -> Result<UserLoop<'a>, String> {
        let poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
        let now = Instant::now();
        let mut l = UserLoop {
            config,
            request,
            poll,
            users: (0..users)
                .map(|_| User {
                    conn: Conn::new(now),
                    left: config.session_requests,
                })
                .collect(),
            timers: BinaryHeap::with_capacity(users),
            deadline,
            rng: seed | 1,
            ok: 0,
            sessions: 0,
            latency_us: super::new_histogram(),
            failures: [0; FAILURES],
            first_other: None,
        };
        for i in 0..users {
            let arrive = config.think.max.mul_f64(l.random());
            l.timers.push(Reverse((now + arrive, i)));
        }
        Ok(l)
    }

    /// A uniform draw from 0.0..1.0 (xorshift64*: a few lines instead of a
    /// dependency; think times need spread, not quality).
    fn random(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Runs until the deadline; requests still in flight then are not counted.
    pub fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_scan = Instant::now();
        loop {
            let now = Instant::now();
            if now >= self.deadline {
                break;
            }
            while let Some(&Reverse((at, i))) = self.timers.peek() {
                if at > now {
                    break;
                }
                self.timers.pop();
                self.start_request(i);
            }
            let next = self.timers.peek().map_or(self.deadline, |r| r.0 .0);
            let wait = next
                .min(self.deadline)
                .saturating_duration_since(now)
                .min(TICK);
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.note_other(&e);
                    break;
                }
            }
            for ev in events.iter() {
                self.drive(ev.token().0);
            }
            if last_scan.elapsed() >= TICK {
                last_scan = Instant::now();
                self.expire(last_scan);
            }
        }
        for u in &mut self.users {
            u.conn.stream = None;
        }
    }

    fn expire(&mut self, now: Instant) {
        for i in 0..self.users.len() {
            let c = &self.users[i].conn;
            if c.phase != Phase::Idle && now.duration_since(c.started) > self.config.timeout {
                self.fail(i, Failure::Timeout, None);
            }
        }
    }

    /// Sends user `i`'s next request, connecting first at a session's start.
    fn start_request(&mut self, i: usize) {
        let c = &mut self.users[i].conn;
        c.reset_batch(1);
        c.started = Instant::now();
        if c.stream.is_some() {
            c.phase = Phase::Writing;
        } else {
            match TcpStream::connect(self.config.target.addr).and_then(|mut s| {
                self.poll.registry().register(
                    &mut s,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )?;
                Ok(s)
            }) {
                Ok(s) => {
                    c.stream = Some(s);
                    c.phase = Phase::Connecting;
                }
                Err(e) => return self.fail(i, Failure::of_transport(classify(&e)), Some(e)),
            }
        }
        self.drive(i);
    }

    fn drive(&mut self, i: usize) {
        let Some(u) = self.users.get_mut(i) else {
            return;
        };
        let c = &mut u.conn;
        loop {
            let failed = match c.phase {
                Phase::Idle => return,
                Phase::Connecting => match c.connected() {
                    Ok(true) => {
                        c.phase = Phase::Writing;
                        continue;
                    }
                    Ok(false) => return,
                    Err(e) => (classify(&e), Some(e)),
                },
                Phase::Writing => match c.write(self.request) {
                    Ok(true) => {
                        c.phase = Phase::Reading;
                        return;
                    }
                    Ok(false) => return,
                    Err(e) => (classify(&e), Some(e)),
                },
                Phase::Reading => match c.read() {
                    ReadOutcome::Pending => return,
                    ReadOutcome::Done(done) => return self.complete(i, done),
                    ReadOutcome::Failed(kind, e) => (kind, e),
                },
            };
            return self.fail(i, Failure::of_transport(failed.0), failed.1);
        }
    }

    fn complete(&mut self, i: usize, done: Done) {
        let now = Instant::now();
        let u = &mut self.users[i];
        let us = now.duration_since(u.conn.started).as_micros() as u64;
        self.latency_us.saturating_record(us.max(1));
        match Failure::of_status(done.status) {
            None => self.ok += 1,
            Some(f) => self.failures[f as usize] += 1,
        }
        u.conn.phase = Phase::Idle;
        if done.close {
            u.conn.stream = None;
        }
        u.left = u.left.saturating_sub(1);
        if u.left == 0 {
            // The user leaves; the next one arrives at once.
            self.sessions += 1;
            u.conn.stream = None;
            u.left = self.config.session_requests;
            self.start_request(i);
        } else {
            self.think(i);
        }
    }

    /// Ends user `i`'s session with a failed request; the next user arrives
    /// after a think time.
    fn fail(&mut self, i: usize, kind: Failure, e: Option<io::Error>) {
        self.failures[kind as usize] += 1;
        if kind == Failure::Other {
            if let Some(e) = &e {
                self.note_other(e);
            }
        }
        let u = &mut self.users[i];
        u.conn.stream = None;
        u.conn.phase = Phase::Idle;
        u.left = self.config.session_requests;
        self.think(i);
    }

    fn think(&mut self, i: usize) {
        let pause = self.config.think.pick(self.random());
        self.timers.push(Reverse((Instant::now() + pause, i)));
    }

    fn note_other(&mut self, e: &io::Error) {
        if self.first_other.is_none() {
            self.first_other = Some(e.to_string());
        }
    }

    pub fn into_report(self, start: Instant) -> UsersReport {
        let mut r = UsersReport::empty();
        r.ok = self.ok;
        r.sessions = self.sessions;
        r.elapsed = Instant::now().min(self.deadline).duration_since(start);
        r.latency_us = self.latency_us;
        r.failures = self.failures;
        r.first_other = self.first_other;
        r
    }
}
