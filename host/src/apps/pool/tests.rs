use super::*;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// A pool whose jobs count their fates, and hold their thread when run
/// until their group is released once (or the fixture is dropped).
struct Fixture {
    pool: Arc<Pool>,
    /// Releases owed to each group's running jobs (plugin tasks: 0), and
    /// the last one that releases them all.
    held: Arc<([AtomicUsize; 4], AtomicUsize)>,
    /// Ran, expired, reclaimed.
    fates: Arc<[AtomicUsize; 3]>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.held.1.store(1, SeqCst);
    }
}

impl Fixture {
    fn new(threads: usize, queue: usize, share: u8) -> Self {
        Fixture {
            pool: Pool::new(threads, queue, share).unwrap(),
            held: Arc::new(Default::default()),
            fates: Arc::new(Default::default()),
        }
    }

    /// Lets one running job of `group` return.
    fn release(&self, group: usize) {
        self.held.0[group].fetch_add(1, SeqCst);
    }

    /// Submits a job of `group` (`None`: a plugin task), that must start
    /// before `deadline`.
    fn submit_to(&self, group: Option<usize>, deadline: Option<Instant>) -> Result<(), Refused> {
        let (fates, held) = (self.fates.clone(), self.held.clone());
        let job = Job {
            group,
            deadline,
            what: None,
            work: Box::new(move |fate| {
                let i = match fate {
                    Fate::Run => 0,
                    Fate::Expired => 1,
                    Fate::Reclaimed => 2,
                };
                fates[i].fetch_add(1, SeqCst);
                let mine = &held.0[group.unwrap_or(0)];
                while fate == Fate::Run && held.1.load(SeqCst) == 0 {
                    let taken = mine.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1));
                    if taken.is_ok() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            }),
        };
        self.pool.submit(job).map_err(|(_, why)| why)
    }

    fn submit(&self, group: usize, deadline: Option<Instant>) -> Result<(), Refused> {
        self.submit_to(Some(group), deadline)
    }

    fn ran(&self) -> usize {
        self.fates[0].load(SeqCst)
    }

    fn expired(&self) -> usize {
        self.fates[1].load(SeqCst)
    }

    fn reclaimed(&self) -> usize {
        self.fates[2].load(SeqCst)
    }

    /// (busy, queued) of each group, in order of first use.
    fn usage(&self) -> Vec<(usize, usize)> {
        self.pool
            .usage()
            .iter()
            .map(|u| (u.busy, u.queued))
            .collect()
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
fn a_lone_app_uses_idle_threads_past_its_share() {
    let f = Fixture::new(4, 16, 50);
    for _ in 0..5 {
        assert_eq!(f.submit(1, None), Ok(()));
    }
    wait_for(|| f.ran() == 4);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(f.ran(), 4, "no thread past the kept ones for a borrower");
    assert_eq!(f.usage(), [(4, 1)]);
    assert_eq!(f.pool.temporary_threads(), 0);
}

#[test]
fn another_app_gets_its_share_on_temporary_threads() {
    let f = Fixture::new(4, 16, 50);
    for _ in 0..4 {
        assert_eq!(f.submit(1, None), Ok(()));
    }
    wait_for(|| f.ran() == 4);
    for _ in 0..3 {
        assert_eq!(f.submit(2, None), Ok(()));
    }
    wait_for(|| f.ran() == 6);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(f.ran(), 6, "group 2 runs its share, not more");
    assert_eq!(f.usage(), [(4, 0), (2, 1)]);
    assert_eq!(f.pool.temporary_threads(), 2);
    for _ in 0..4 {
        f.release(1);
        f.release(2);
    }
    wait_for(|| f.ran() == 7 && f.pool.temporary_threads() == 0);
}

#[test]
fn a_job_within_its_share_goes_before_a_borrower() {
    let f = Fixture::new(2, 16, 50);
    assert_eq!(f.submit(1, None), Ok(()));
    assert_eq!(f.submit(2, None), Ok(()));
    wait_for(|| f.ran() == 2);
    assert_eq!(f.submit(1, None), Ok(()));
    assert_eq!(f.submit(3, None), Ok(()));
    // Group 3, within its share, has no kept thread to run on (groups 1
    // and 2 hold them within theirs). When group 2's returns, group 3
    // takes the thread before group 1's older job past its share.
    f.release(2);
    wait_for(|| f.ran() == 3);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(f.usage(), [(1, 1), (0, 0), (1, 0)]);
}

#[test]
fn queue_room_past_a_share_is_taken_back() {
    let f = Fixture::new(1, 2, 50);
    assert_eq!(f.submit(1, None), Ok(()));
    wait_for(|| f.ran() == 1);
    assert_eq!(f.submit(1, None), Ok(()));
    assert_eq!(f.submit(1, None), Ok(()), "free room past its share");
    assert_eq!(f.submit(1, None), Err(Refused::ShareFull));
    assert_eq!(f.submit(2, None), Ok(()), "takes group 1's borrowed room");
    assert_eq!(f.reclaimed(), 1);
    assert_eq!(f.usage(), [(1, 1), (0, 1)]);
    assert_eq!(f.submit(2, None), Err(Refused::ShareFull));
    assert_eq!(f.submit(3, None), Err(Refused::QueueFull));
}

#[test]
fn a_plugin_task_waits_only_within_its_share() {
    let f = Fixture::new(1, 4, 50);
    assert_eq!(f.submit_to(None, None), Ok(()));
    wait_for(|| f.ran() == 1);
    assert_eq!(f.submit_to(None, None), Ok(()));
    assert_eq!(f.submit_to(None, None), Ok(()));
    assert_eq!(f.submit_to(None, None), Err(Refused::ShareFull));
    assert_eq!(f.submit(1, None), Ok(()));
}

#[test]
fn a_job_past_its_deadline_is_dropped_unrun() {
    let f = Fixture::new(1, 4, 100);
    assert_eq!(f.submit(1, None), Ok(()));
    wait_for(|| f.ran() == 1);
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(f.submit(1, Some(soon)), Ok(()));
    std::thread::sleep(Duration::from_millis(40));
    f.release(1);
    wait_for(|| f.expired() == 1);
    assert_eq!(f.ran(), 1);
}

#[test]
fn the_tick_drops_an_expired_job_while_every_thread_is_busy() {
    let f = Fixture::new(1, 4, 50);
    assert_eq!(f.submit(1, None), Ok(()));
    wait_for(|| f.ran() == 1);
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(f.submit(2, Some(soon)), Ok(()));
    std::thread::sleep(Duration::from_millis(40));
    f.pool.report_overruns(Instant::now());
    assert_eq!((f.expired(), f.pool.queued()), (1, 0));
}

#[test]
fn no_queue_still_runs_on_a_free_thread() {
    let f = Fixture::new(2, 0, 50);
    assert_eq!(f.submit(1, None), Ok(()));
    assert_eq!(f.submit(1, None), Ok(()), "borrows the idle thread");
    wait_for(|| f.ran() == 2);
    assert_eq!(f.submit(1, None), Err(Refused::QueueFull));
    assert_eq!(f.submit(2, None), Ok(()), "within its share");
    wait_for(|| f.ran() == 3);
}

/// One request at a time runs on one thread, the one that went idle last,
/// not on each of the pool's threads in turn (a cold one each time).
#[test]
fn one_job_at_a_time_runs_on_the_thread_that_went_idle_last() {
    let pool = Pool::new(4, 16, 50).unwrap();
    let all_idle = || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while pool.lock().bells.idle() < 4 {
            assert!(
                Instant::now() < deadline,
                "the pool's threads never all waited"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let mut ran_on = Vec::new();
    for _ in 0..8 {
        all_idle();
        let (tx, rx) = std::sync::mpsc::channel();
        let job = Job {
            group: Some(1),
            deadline: None,
            what: None,
            work: Box::new(move |_| {
                let name = std::thread::current().name().map(str::to_string);
                let _ = tx.send(name);
            }),
        };
        assert!(pool.submit(job).is_ok());
        ran_on.push(rx.recv_timeout(Duration::from_secs(60)).unwrap());
    }
    ran_on.dedup();
    assert_eq!(ran_on.len(), 1, "jobs one at a time ran on {ran_on:?}");
}
