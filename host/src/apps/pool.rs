//! The blocking pool: a fixed set of threads that run handlers declared
//! blocking (and plugins' `spawn_blocking` tasks), fed by a bounded queue.
//!
//! Fairness: jobs are grouped by app (plugin tasks form a group of their
//! own). A group runs on at most its share of the threads (`--blocking-share`
//! percent, at least one thread) and may have at most that share of the
//! queue waiting; past it a job is refused at once (its request gets 503).
//! A free thread takes the oldest waiting job of a group below its share, so
//! an app whose handlers never return holds its share, not the pool.
//!
//! Deadlines: a request's job carries its deadline (started + app_timeout).
//! One still waiting when its deadline passes is dropped, never run (its
//! client gets 504); one that runs past it is logged with its app and path.

use crate::apps::loader::LoadedApp;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a job does: run (`true`) or, dropped unrun, answer its request
/// (`false`).
pub type Work = Box<dyn FnOnce(bool) + Send>;

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

    /// A plugin's `spawn_blocking` task: no deadline, always run.
    pub fn task(task: Box<dyn FnOnce() + Send>) -> Self {
        Job {
            group: None,
            deadline: None,
            what: None,
            work: Box::new(move |run| {
                if run {
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
    /// The whole queue is full (`blocking_queue`).
    QueueFull,
    /// The app's share of the queue is full (`blocking_queue` x `blocking_share`).
    ShareFull,
}

/// `percent` of `n`, at least one.
fn share_of(n: usize, percent: u8) -> usize {
    (n * usize::from(percent) / 100).max(1)
}

/// A group's waiting jobs and running count.
struct Group {
    key: Option<usize>,
    name: String,
    waiting: VecDeque<(u64, Job)>,
    busy: usize,
    /// Most threads, and most waiting jobs, the group may hold (its app's
    /// own `blocking_share`, or the pool's).
    threads_max: usize,
    queue_max: usize,
}

/// A job a thread is running.
struct Running {
    group: Option<usize>,
    deadline: Option<Instant>,
    what: Option<(Arc<LoadedApp>, Box<str>)>,
    /// Its overrun has been logged.
    reported: bool,
}

#[derive(Default)]
struct State {
    seq: u64,
    queued: usize,
    groups: Vec<Group>,
    /// By thread index.
    running: Vec<Option<Running>>,
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
    ready: Condvar,
    threads: usize,
    queue: usize,
    share_percent: u8,
    /// Most threads, and most waiting jobs, one group may hold.
    group_threads: usize,
    group_queue: usize,
}

impl Pool {
    /// Starts `threads` threads (at least one) with room for `queue` waiting
    /// jobs; a group may hold `share_percent` of each.
    pub fn new(threads: usize, queue: usize, share_percent: u8) -> std::io::Result<Arc<Pool>> {
        let threads = threads.max(1);
        let share = |n: usize| share_of(n, share_percent);
        let pool = Arc::new(Pool {
            state: Mutex::new(State {
                running: (0..threads).map(|_| None).collect(),
                ..State::default()
            }),
            ready: Condvar::new(),
            threads,
            queue,
            share_percent,
            group_threads: share(threads),
            group_queue: if queue == 0 { 0 } else { share(queue) },
        });
        for i in 0..threads {
            let pool = pool.clone();
            std::thread::Builder::new()
                .name(format!("stoa-blocking-{i}"))
                .spawn(move || pool.serve(i))?;
        }
        Ok(pool)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most threads and waiting jobs `job`'s group may hold: its app's
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

    /// Queues `job`, or gives it back with the reason it is refused: it may
    /// wait when the queue and its group's share of it have room, or take a
    /// free thread at once when its group is below its thread share.
    pub fn submit(&self, job: Job) -> Result<(), (Job, Refused)> {
        let mut state = self.lock();
        let running = state.running.iter().filter(|r| r.is_some()).count();
        let free = self.threads.saturating_sub(running + state.queued);
        let (group_threads, group_queue) = self.shares(&job);
        let queued = state.queued;
        let group = state.group(&job);
        group.threads_max = group_threads;
        group.queue_max = group_queue;
        let runs_now = free > 0 && group.busy + group.waiting.len() < group_threads;
        if !runs_now {
            if queued >= self.queue {
                return Err((job, Refused::QueueFull));
            }
            if group.waiting.len() >= group_queue {
                return Err((job, Refused::ShareFull));
            }
        }
        state.seq += 1;
        let seq = state.seq;
        state.queued += 1;
        state.group(&job).waiting.push_back((seq, job));
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// Jobs waiting for a thread.
    pub fn queued(&self) -> usize {
        self.lock().queued
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn share_percent(&self) -> u8 {
        self.share_percent
    }

    /// Most threads one app may hold.
    pub fn group_threads(&self) -> usize {
        self.group_threads
    }

    /// Most jobs of one app that may wait.
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
                stuck: state
                    .running
                    .iter()
                    .flatten()
                    .filter(|r| r.group == g.key && r.deadline.is_some_and(|d| d <= now))
                    .count(),
                queued: g.waiting.len(),
            })
            .collect()
    }

    /// Logs, once each, the jobs running past their request's deadline.
    pub fn report_overruns(&self, now: Instant) {
        let mut late = Vec::new();
        for (i, running) in self.lock().running.iter_mut().enumerate() {
            let Some(r) = running.as_mut() else { continue };
            if let Some(deadline) = r.deadline.filter(|d| *d <= now && !r.reported) {
                r.reported = true;
                late.push((i, describe(&r.what), now.duration_since(deadline)));
            }
        }
        for (thread, what, over) in late {
            log::warn!(
                "blocking thread {thread}: {what} is running {:.1} s past its deadline \
                 (app_timeout); its client got 504",
                over.as_secs_f32()
            );
        }
    }

    /// One pool thread: take a job, run it, repeat.
    fn serve(&self, me: usize) {
        loop {
            let (job, expired) = self.next(me);
            for job in expired {
                log::warn!(
                    "dropped a blocking job of {}: its deadline (app_timeout) passed before a \
                     thread was free; its client got 504 and it never ran",
                    job.describe()
                );
                (job.work)(false);
            }
            if let Some(work) = job {
                work(true);
                self.finished(me);
            }
        }
    }

    /// Waits for a job this thread may run (its group below its share), or
    /// for waiting jobs whose deadline has passed (to drop them).
    fn next(&self, me: usize) -> (Option<Work>, Vec<Job>) {
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            let expired = state.take_expired(now);
            if !expired.is_empty() {
                return (None, expired);
            }
            if let Some(work) = state.pick(me) {
                return (Some(work), expired);
            }
            let next_deadline = state
                .groups
                .iter()
                .filter_map(|g| g.waiting.front().and_then(|(_, j)| j.deadline))
                .min();
            state = match next_deadline {
                Some(at) => {
                    let wait = at.saturating_duration_since(now) + Duration::from_millis(1);
                    self.ready
                        .wait_timeout(state, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.ready.wait(state).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }

    /// Thread `me` finished its job; logs it if it ran past its deadline.
    fn finished(&self, me: usize) {
        let mut state = self.lock();
        let Some(done) = state.running.get_mut(me).and_then(Option::take) else {
            return;
        };
        if let Some(g) = state.groups.iter_mut().find(|g| g.key == done.group) {
            g.busy = g.busy.saturating_sub(1);
        }
        drop(state);
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

impl State {
    /// `job`'s group, made on its first job.
    fn group(&mut self, job: &Job) -> &mut Group {
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
                    threads_max: 1,
                    queue_max: 0,
                });
                self.groups.len() - 1
            }
        };
        &mut self.groups[i]
    }

    /// Removes waiting jobs whose deadline has passed (a group's deadlines
    /// grow in queue order, so they are at the front).
    fn take_expired(&mut self, now: Instant) -> Vec<Job> {
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

    /// Takes the oldest waiting job of a group below `share` threads for
    /// thread `me`.
    fn pick(&mut self, me: usize) -> Option<Work> {
        if !self.running.get(me).is_some_and(Option::is_none) {
            return None;
        }
        let g = self
            .groups
            .iter_mut()
            .filter(|g| g.busy < g.threads_max)
            .filter_map(|g| Some((g.waiting.front()?.0, g)))
            .min_by_key(|(seq, _)| *seq)
            .map(|(_, g)| g)?;
        let (_, job) = g.waiting.pop_front()?;
        g.busy += 1;
        self.queued -= 1;
        self.running[me] = Some(Running {
            group: job.group,
            deadline: job.deadline,
            what: job.what,
            reported: false,
        });
        Some(job.work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::mpsc;

    /// A pool whose jobs count their runs, then hold their thread until
    /// released (or until the fixture is dropped).
    struct Fixture {
        pool: Arc<Pool>,
        release: mpsc::Sender<()>,
        held: Arc<Mutex<mpsc::Receiver<()>>>,
        ran: Arc<AtomicUsize>,
    }

    impl Fixture {
        fn new(threads: usize, queue: usize, share: u8) -> Self {
            let (release, held) = mpsc::channel();
            Fixture {
                pool: Pool::new(threads, queue, share).unwrap(),
                release,
                held: Arc::new(Mutex::new(held)),
                ran: Arc::new(AtomicUsize::new(0)),
            }
        }

        /// Submits a job of `group`, that must start before `deadline`.
        fn submit(&self, group: usize, deadline: Option<Instant>) -> Result<(), Refused> {
            let (ran, held) = (self.ran.clone(), self.held.clone());
            let job = Job {
                group: Some(group),
                deadline,
                what: None,
                work: Box::new(move |run| {
                    if run {
                        ran.fetch_add(1, SeqCst);
                        let _ = held.lock().unwrap().recv();
                    }
                }),
            };
            self.pool.submit(job).map_err(|(_, why)| why)
        }

        fn ran(&self) -> usize {
            self.ran.load(SeqCst)
        }
    }

    fn wait_for(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !what() {
            assert!(Instant::now() < deadline, "timed out");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn an_app_holds_at_most_its_share_of_the_threads() {
        let f = Fixture::new(4, 16, 50);
        for _ in 0..4 {
            assert_eq!(f.submit(1, None), Ok(()));
        }
        wait_for(|| f.ran() == 2);
        assert_eq!(f.submit(2, None), Ok(()));
        wait_for(|| f.ran() == 3);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(f.ran(), 3, "group 1 stays at its share");
        let usage = f.pool.usage();
        let usage: Vec<_> = usage.iter().map(|u| (u.busy, u.queued)).collect();
        assert_eq!(usage, [(2, 2), (1, 0)]);
    }

    #[test]
    fn an_app_past_its_share_of_the_queue_is_refused() {
        let f = Fixture::new(1, 4, 50);
        assert_eq!(f.submit(1, None), Ok(()));
        wait_for(|| f.ran() == 1);
        assert_eq!(f.submit(1, None), Ok(()));
        assert_eq!(f.submit(1, None), Ok(()));
        assert_eq!(f.submit(1, None), Err(Refused::ShareFull));
        assert_eq!(f.submit(2, None), Ok(()));
        assert_eq!(f.submit(3, None), Ok(()));
        assert_eq!(f.submit(4, None), Err(Refused::QueueFull));
    }

    #[test]
    fn a_job_past_its_deadline_is_dropped_unrun() {
        let f = Fixture::new(1, 4, 100);
        assert_eq!(f.submit(1, None), Ok(()));
        wait_for(|| f.ran() == 1);
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(f.submit(1, Some(soon)), Ok(()));
        std::thread::sleep(Duration::from_millis(40));
        f.release.send(()).unwrap();
        wait_for(|| f.pool.queued() == 0);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(f.ran(), 1);
    }

    #[test]
    fn no_queue_still_runs_on_a_free_thread() {
        let f = Fixture::new(2, 0, 50);
        assert_eq!(f.submit(1, None), Ok(()));
        assert_eq!(f.submit(1, None), Err(Refused::QueueFull));
        assert_eq!(f.submit(2, None), Ok(()));
    }
}
