//! The blocking pool: threads that run handlers declared blocking (and
//! plugins' `spawn_blocking` tasks), fed by a bounded queue.
//!
//! Fairness: jobs are grouped by app (plugin tasks form a group of their
//! own). A group's share (`--blocking-share` percent of the threads and of
//! the queue, at least one thread) is what it is guaranteed while others
//! want threads; a group may also use idle threads and free queue room past
//! it. The rules that keep the guarantee when borrowed threads never come
//! back (temporary threads, room taken back) are in `state.rs`. A free
//! thread takes the oldest waiting job of a group within its share, so an
//! app whose handlers never return cannot shut the others out.
//!
//! Deadlines: a request's job carries its deadline (started + app_timeout).
//! One still waiting when its deadline passes is dropped, never run (its
//! client gets 504), by a free thread or by the watchdog's tick when every
//! thread is busy; one that runs past it is logged with its app and path.

mod bells;
mod state;
#[cfg(test)]
mod tests;

use crate::apps::loader::LoadedApp;
use state::{Admit, Next, State};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// What becomes of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// A thread runs it.
    Run,
    /// Its deadline passed while it waited: answer 504.
    Expired,
    /// It waited in queue room past its app's share, and another app took
    /// the room back: answer 503.
    Reclaimed,
}

/// What a job does, told its fate.
pub type Work = Box<dyn FnOnce(Fate) + Send>;

/// One unit of work for the pool.
pub struct Job {
    /// The app's slot; `None` for plugin tasks.
    group: Option<usize>,
    deadline: Option<Instant>,
    /// The app and path, for the log and status.
    what: Option<(Arc<LoadedApp>, Box<str>)>,
    work: Work,
}

impl Job {
    /// A request for `app` at `path` that must start before `deadline`.
    pub fn request(app: Arc<LoadedApp>, path: Box<str>, deadline: Instant, work: Work) -> Self {
        Job {
            group: Some(app.slot),
            deadline: Some(deadline),
            what: Some((app, path)),
            work,
        }
    }

    /// A plugin's `spawn_blocking` task: no deadline, never refused once
    /// accepted, so always run.
    pub fn task(task: Box<dyn FnOnce() + Send>) -> Self {
        Job {
            group: None,
            deadline: None,
            what: None,
            work: Box::new(move |fate| {
                if fate == Fate::Run {
                    task()
                }
            }),
        }
    }

    fn describe(&self) -> String {
        describe(&self.what)
    }
}

fn describe(what: &Option<(Arc<LoadedApp>, Box<str>)>) -> String {
    match what {
        Some((app, path)) => format!("app {} {path}", app.name),
        None => "a plugin task".to_string(),
    }
}

/// Why a job was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The whole queue is full (`blocking_queue`) and every app waiting is
    /// within its share.
    QueueFull,
    /// The app is past its share of the queue (`blocking_queue` x
    /// `blocking_share`) and no free room is left for it.
    ShareFull,
}

/// `percent` of `n`, at least one.
fn share_of(n: usize, percent: u8) -> usize {
    (n * usize::from(percent) / 100).max(1)
}

/// One group's use of the pool, for status and metrics.
pub struct Usage {
    pub name: String,
    pub busy: usize,
    /// Running past their request's deadline.
    pub stuck: usize,
    pub queued: usize,
}

pub struct Pool {
    state: Mutex<State>,
    /// Itself, for the temporary threads it starts.
    me: Weak<Pool>,
    /// The threads it keeps.
    threads: usize,
    queue: usize,
    share_percent: u8,
    /// The threads, and waiting jobs, one group is guaranteed.
    group_threads: usize,
    group_queue: usize,
}

impl Pool {
    /// Starts `threads` threads (at least one) with room for `queue` waiting
    /// jobs; a group is guaranteed `share_percent` of each.
    pub fn new(threads: usize, queue: usize, share_percent: u8) -> std::io::Result<Arc<Pool>> {
        let threads = threads.max(1);
        let share = |n: usize| share_of(n, share_percent);
        let pool = Arc::new_cyclic(|me| Pool {
            state: Mutex::new(State::default()),
            me: me.clone(),
            threads,
            queue,
            share_percent,
            group_threads: share(threads),
            group_queue: if queue == 0 { 0 } else { share(queue) },
        });
        for _ in 0..threads {
            let me = pool.lock().reserve();
            pool.start(me)?;
        }
        Ok(pool)
    }

    /// Starts the thread of slot `me` (reserved).
    fn start(&self, me: usize) -> std::io::Result<()> {
        let Some(pool) = self.me.upgrade() else {
            return Ok(());
        };
        let started = std::thread::Builder::new()
            .name(format!("stoa-blocking-{me}"))
            .spawn(move || pool.serve(me));
        if started.is_err() {
            self.lock().vacate(me);
        }
        started.map(drop)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The threads and waiting jobs `job`'s group is guaranteed: its app's
    /// own `blocking_share`, else the pool's.
    fn shares(&self, job: &Job) -> (usize, usize) {
        let own = job
            .what
            .as_ref()
            .and_then(|(app, _)| app.limits.blocking_share);
        match own {
            Some(percent) => (
                share_of(self.threads, percent),
                if self.queue == 0 {
                    0
                } else {
                    share_of(self.queue, percent)
                },
            ),
            None => (self.group_threads, self.group_queue),
        }
    }

    /// Queues `job`, or gives it back with the reason it is refused (see
    /// `state.rs` for the rules). A job whose room it takes back is
    /// answered 503, and temporary threads start if its group is owed one.
    pub fn submit(&self, job: Job) -> Result<(), (Job, Refused)> {
        let mut state = self.lock();
        let gi = state.group(&job, self.shares(&job));
        let reclaimed = match state.admit(gi, job.group.is_none(), self.threads, self.queue) {
            Admit::Refuse(why) => return Err((job, why)),
            Admit::Wait(reclaimed) => reclaimed,
        };
        state.push(gi, job);
        let slots: Vec<usize> = (0..state.to_start(self.threads))
            .map(|_| state.reserve())
            .collect();
        let bell = state.bells.latest();
        drop(state);
        ring(bell);
        for me in slots {
            if let Err(e) = self.start(me) {
                log::warn!("cannot start a temporary blocking thread: {e}; the job waits");
            }
        }
        if let Some(job) = reclaimed {
            log::warn!(
                "refused a waiting blocking job of {} (503): it waited past its app's share of \
                 the queue (blocking_share) and another app needed the room",
                job.describe()
            );
            (job.work)(Fate::Reclaimed);
        }
        Ok(())
    }

    /// Jobs waiting for a thread.
    pub fn queued(&self) -> usize {
        self.lock().queued
    }

    /// The threads the pool keeps.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Threads alive past the kept ones.
    pub fn temporary_threads(&self) -> usize {
        self.lock().live.saturating_sub(self.threads)
    }

    pub fn share_percent(&self) -> u8 {
        self.share_percent
    }

    /// Threads one app is guaranteed.
    pub fn group_threads(&self) -> usize {
        self.group_threads
    }

    /// Waiting jobs one app is guaranteed room for.
    pub fn group_queue(&self) -> usize {
        self.group_queue
    }

    /// Busy, stuck and waiting jobs of every app that has used the pool.
    pub fn usage(&self) -> Vec<Usage> {
        let now = Instant::now();
        let state = self.lock();
        state
            .groups
            .iter()
            .map(|g| Usage {
                name: g.name.clone(),
                busy: g.busy,
                stuck: state.stuck(g.key, now),
                queued: g.waiting.len(),
            })
            .collect()
    }

    /// The watchdog's tick: logs, once each, the jobs running past their
    /// request's deadline, and answers the waiting ones whose deadline
    /// passed (no thread may be free to).
    pub fn report_overruns(&self, now: Instant) {
        let (late, expired) = {
            let mut state = self.lock();
            (state.overruns(now), state.take_expired(now))
        };
        for (thread, what, over) in late {
            log::warn!(
                "blocking thread {thread}: {what} is running {:.1} s past its deadline \
                 (app_timeout); its client got 504",
                over.as_secs_f32()
            );
        }
        drop_unrun(expired);
    }

    /// How long every thread has been running a job past its deadline
    /// (the pool is exhausted by hung jobs), if they all are.
    pub fn exhausted_for(&self, now: Instant) -> Option<std::time::Duration> {
        self.lock().all_overdue(now)
    }

    /// One pool thread: take a job, run it, repeat; leave when told.
    fn serve(&self, me: usize) {
        loop {
            match self.next(me) {
                Some(Ok(work)) => {
                    work(Fate::Run);
                    self.finished(me);
                }
                Some(Err(expired)) => drop_unrun(expired),
                None => return,
            }
        }
    }

    /// Waits for a job this thread may run, or for waiting jobs whose
    /// deadline has passed (to drop them); `None` when it is to leave.
    fn next(&self, me: usize) -> Option<Result<Work, Vec<Job>>> {
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            match state.next(me, self.threads, now) {
                Next::Run(work) => return Some(Ok(work)),
                Next::Drop(expired) => return Some(Err(expired)),
                Next::Leave => return None,
                Next::Wait => {}
            }
            let bell = state.bells.sleep(me);
            state = match state.next_deadline() {
                Some(at) => {
                    let wait = at.saturating_duration_since(now) + Duration::from_millis(1);
                    bell.wait_timeout(state, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => bell.wait(state).unwrap_or_else(|p| p.into_inner()),
            };
            state.bells.woke(me);
        }
    }

    /// Thread `me` finished its job; logs it if it ran past its deadline.
    fn finished(&self, me: usize) {
        let (done, bell) = {
            let mut state = self.lock();
            let done = state.finished(me);
            // This thread takes one waiting job; a freed share may let
            // another idle thread take one more.
            let bell = (state.queued > 1).then(|| state.bells.latest()).flatten();
            (done, bell)
        };
        ring(bell);
        let Some(done) = done else {
            return;
        };
        if let Some(deadline) = done.deadline {
            let over = Instant::now().saturating_duration_since(deadline);
            if !over.is_zero() {
                log::warn!(
                    "blocking thread {me}: {} returned {:.1} s past its deadline (app_timeout); \
                     its answer was dropped",
                    describe(&done.what),
                    over.as_secs_f32()
                );
            }
        }
    }
}

/// Wakes the thread whose bell it is (see `bells`).
fn ring(bell: Option<Arc<Condvar>>) {
    if let Some(bell) = bell {
        bell.notify_one();
    }
}

/// Answers jobs whose deadline passed before a thread was free.
fn drop_unrun(expired: Vec<Job>) {
    for job in expired {
        log::warn!(
            "dropped a blocking job of {}: its deadline (app_timeout) passed before a \
             thread was free; its client got 504 and it never ran",
            job.describe()
        );
        (job.work)(Fate::Expired);
    }
}
