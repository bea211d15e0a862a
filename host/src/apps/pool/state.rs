//! The pool's bookkeeping and its rules, under the pool's lock: which job
//! may wait, which a free thread takes, when a temporary thread starts and
//! when a thread leaves.
//!
//! A group's share is a guarantee, not a cap. Within it a group's jobs run
//! on the pool's kept capacity (`--blocking-threads`); beyond it a group
//! borrows: a job over its group's share starts only while fewer jobs than
//! the kept threads run and no job within a share waits. A borrowed thread
//! cannot be taken back (its job may never return), so while jobs run on
//! borrowed threads the pool may start as many temporary threads, used only
//! for jobs within their group's share: jobs within shares always have the
//! kept threads' worth of capacity, whatever borrowers hold. A thread that
//! finds no job while more than the kept threads are alive leaves.
//!
//! The queue likewise: a group within its queue share may wait while the
//! queue has room, and when it is full it takes back the room of the group
//! furthest past its own share (that group's newest waiting job is refused
//! with a 503); a group past its share may wait only in free room. A plugin
//! task never waits past its share: its plugin was told it was accepted,
//! so it is never refused later.

use super::bells::Bells;
use super::{describe, Job, Refused, Work};
use crate::apps::loader::LoadedApp;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// A group's waiting jobs and running count.
pub(super) struct Group {
    pub key: Option<usize>,
    pub name: String,
    /// Waiting jobs with their arrival order.
    pub waiting: VecDeque<(u64, Job)>,
    pub busy: usize,
    /// The threads, and waiting jobs, the group is guaranteed (its app's
    /// own `blocking_share`, or the pool's).
    pub threads_share: usize,
    pub queue_share: usize,
}

impl Group {
    /// Running jobs past its thread share (on borrowed threads).
    fn borrowed(&self) -> usize {
        self.busy.saturating_sub(self.threads_share)
    }

    /// Waiting jobs its thread share has room for.
    fn owed(&self) -> usize {
        self.threads_share
            .saturating_sub(self.busy)
            .min(self.waiting.len())
    }

    /// Waiting jobs past its queue share (in borrowed room).
    fn over_queue(&self) -> usize {
        self.waiting.len().saturating_sub(self.queue_share)
    }
}

/// A job a thread is running.
pub(super) struct Running {
    pub group: Option<usize>,
    pub deadline: Option<Instant>,
    pub what: Option<(Arc<LoadedApp>, Box<str>)>,
    /// Its overrun has been logged.
    pub reported: bool,
}

/// One thread's place.
pub(super) enum Slot {
    /// No thread here (a temporary one left).
    Vacant,
    Idle,
    Busy(Running),
}

/// Whether a job may wait.
pub(super) enum Admit {
    /// It waits; the job given is the one whose room it takes back.
    Wait(Option<Job>),
    Refuse(Refused),
}

/// What a thread does next.
pub(super) enum Next {
    Run(Work),
    /// Jobs whose deadline passed while they waited: answer them.
    Drop(Vec<Job>),
    /// Nothing to run and more than the kept threads alive: leave.
    Leave,
    Wait,
}

#[derive(Default)]
pub(super) struct State {
    pub seq: u64,
    /// Jobs in the groups' waiting lists.
    pub queued: usize,
    pub groups: Vec<Group>,
    /// By thread index.
    pub slots: Vec<Slot>,
    /// Threads alive (the kept ones and temporary ones).
    pub live: usize,
    /// Jobs running.
    pub busy: usize,
    /// The idle threads, and which one a job wakes.
    pub bells: Bells,
}

impl State {
    /// The index of `job`'s group, made on its first job, with its shares.
    pub fn group(&mut self, job: &Job, shares: (usize, usize)) -> usize {
        let i = match self.groups.iter().position(|g| g.key == job.group) {
            Some(i) => i,
            None => {
                self.groups.push(Group {
                    key: job.group,
                    name: job
                        .what
                        .as_ref()
                        .map_or_else(|| "(plugin tasks)".to_string(), |(app, _)| app.name.clone()),
                    waiting: VecDeque::new(),
                    busy: 0,
                    threads_share: 1,
                    queue_share: 0,
                });
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[i];
        (g.threads_share, g.queue_share) = shares;
        i
    }

    fn borrowed(&self) -> usize {
        self.groups.iter().map(Group::borrowed).sum()
    }

    fn owed(&self) -> usize {
        self.groups.iter().map(Group::owed).sum()
    }

    /// Whether a new job of group `gi` gets a thread at once, with `kept`
    /// threads: within its share while jobs within shares leave kept
    /// capacity, past it while the kept threads outnumber every running and
    /// waiting job.
    fn runs_now(&self, gi: usize, kept: usize) -> bool {
        let g = &self.groups[gi];
        if g.busy + g.waiting.len() < g.threads_share {
            self.busy - self.borrowed() + self.owed() < kept
        } else {
            self.busy + self.queued < kept
        }
    }

    /// Whether group `gi`'s new job may wait, in a queue of `room` jobs; a
    /// job that runs at once always may.
    pub fn admit(&mut self, gi: usize, task: bool, kept: usize, room: usize) -> Admit {
        if self.runs_now(gi, kept) {
            return Admit::Wait(None);
        }
        let free = self.queued < room;
        let g = &self.groups[gi];
        if g.waiting.len() >= g.queue_share {
            return match (free, task) {
                (true, false) => Admit::Wait(None),
                _ if room == 0 => Admit::Refuse(Refused::QueueFull),
                _ => Admit::Refuse(Refused::ShareFull),
            };
        }
        if free {
            return Admit::Wait(None);
        }
        // Full: take back the newest job of the app furthest past its share.
        let lender = self
            .groups
            .iter_mut()
            .filter(|g| g.key.is_some() && g.over_queue() > 0)
            .max_by_key(|g| g.over_queue());
        match lender.and_then(|g| g.waiting.pop_back()) {
            Some((_, job)) => {
                self.queued -= 1;
                Admit::Wait(Some(job))
            }
            None => Admit::Refuse(Refused::QueueFull),
        }
    }

    /// Queues `job` in group `gi`.
    pub fn push(&mut self, gi: usize, job: Job) {
        self.seq += 1;
        self.queued += 1;
        self.groups[gi].waiting.push_back((self.seq, job));
    }

    /// How many temporary threads to start now, with `kept` threads: as
    /// many as jobs within their share wait past the idle threads, while
    /// borrowed threads leave room for them.
    pub fn to_start(&self, kept: usize) -> usize {
        let idle = self.live - self.busy;
        let room = (kept + self.borrowed()).saturating_sub(self.live);
        self.owed().saturating_sub(idle).min(room)
    }

    /// Reserves a slot for a thread about to start; its index.
    pub fn reserve(&mut self) -> usize {
        self.live += 1;
        match self.slots.iter().position(|s| matches!(s, Slot::Vacant)) {
            Some(i) => {
                self.slots[i] = Slot::Idle;
                i
            }
            None => {
                self.slots.push(Slot::Idle);
                self.slots.len() - 1
            }
        }
    }

    /// Thread `me` has gone (or never started).
    pub fn vacate(&mut self, me: usize) {
        if let Some(slot) = self.slots.get_mut(me) {
            *slot = Slot::Vacant;
            self.live -= 1;
        }
    }

    /// What thread `me`, one of at least `kept`, does next.
    pub fn next(&mut self, me: usize, kept: usize, now: Instant) -> Next {
        let expired = self.take_expired(now);
        if !expired.is_empty() {
            return Next::Drop(expired);
        }
        if let Some(work) = self.pick(me, kept) {
            return Next::Run(work);
        }
        if self.live > kept {
            self.vacate(me);
            return Next::Leave;
        }
        Next::Wait
    }

    /// The earliest deadline of a waiting job.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.groups
            .iter()
            .filter_map(|g| g.waiting.front().and_then(|(_, j)| j.deadline))
            .min()
    }

    /// Removes waiting jobs whose deadline has passed (a group's deadlines
    /// grow in queue order, so they are at the front).
    pub fn take_expired(&mut self, now: Instant) -> Vec<Job> {
        let mut expired = Vec::new();
        for g in &mut self.groups {
            while g
                .waiting
                .front()
                .is_some_and(|(_, j)| j.deadline.is_some_and(|d| d <= now))
            {
                if let Some((_, job)) = g.waiting.pop_front() {
                    expired.push(job);
                }
            }
        }
        self.queued -= expired.len();
        expired
    }

    /// Takes for thread `me` the oldest waiting job of a group within its
    /// share, else (fewer jobs than `kept` threads running) the oldest
    /// waiting job.
    fn pick(&mut self, me: usize, kept: usize) -> Option<Work> {
        if !matches!(self.slots.get(me), Some(Slot::Idle)) {
            return None;
        }
        let oldest = |g: &Group| g.waiting.front().map(|(seq, _)| *seq);
        let within = (0..self.groups.len())
            .filter(|&i| self.groups[i].busy < self.groups[i].threads_share)
            .filter_map(|i| Some((oldest(&self.groups[i])?, i)))
            .min();
        let borrowing = || {
            (0..self.groups.len())
                .filter_map(|i| Some((oldest(&self.groups[i])?, i)))
                .min()
        };
        let (_, gi) = match within {
            Some(found) => found,
            None if self.busy < kept => borrowing()?,
            None => return None,
        };
        let g = &mut self.groups[gi];
        let (_, job) = g.waiting.pop_front()?;
        g.busy += 1;
        self.busy += 1;
        self.queued -= 1;
        self.slots[me] = Slot::Busy(Running {
            group: job.group,
            deadline: job.deadline,
            what: job.what,
            reported: false,
        });
        Some(job.work)
    }

    /// Thread `me` finished its job; what it ran.
    pub fn finished(&mut self, me: usize) -> Option<Running> {
        let slot = self.slots.get_mut(me)?;
        let Slot::Busy(done) = std::mem::replace(slot, Slot::Idle) else {
            return None;
        };
        self.busy -= 1;
        if let Some(g) = self.groups.iter_mut().find(|g| g.key == done.group) {
            g.busy = g.busy.saturating_sub(1);
        }
        Some(done)
    }

    /// The running jobs past their deadline not yet logged, marked logged.
    pub fn overruns(&mut self, now: Instant) -> Vec<(usize, String, std::time::Duration)> {
        let mut late = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Slot::Busy(r) = slot else { continue };
            if let Some(deadline) = r.deadline.filter(|d| *d <= now && !r.reported) {
                r.reported = true;
                late.push((i, describe(&r.what), now.duration_since(deadline)));
            }
        }
        late
    }

    /// When every thread runs a job past its deadline: for how long they
    /// all have (since the latest of those deadlines).
    pub fn all_overdue(&self, now: Instant) -> Option<std::time::Duration> {
        let mut latest = None;
        for slot in &self.slots {
            let Slot::Busy(r) = slot else { return None };
            let deadline = r.deadline.filter(|d| *d <= now)?;
            latest = Some(latest.map_or(deadline, |l: Instant| l.max(deadline)));
        }
        latest.map(|l| now.duration_since(l))
    }

    /// Running jobs of `key`'s group past their deadline.
    pub fn stuck(&self, key: Option<usize>, now: Instant) -> usize {
        self.slots
            .iter()
            .filter(|s| {
                matches!(s, Slot::Busy(r) if r.group == key && r.deadline.is_some_and(|d| d <= now))
            })
            .count()
    }
}
