//! What the supervisor does when a worker process ends, decided from plain
//! facts (`Ending`) by one pure function (`decide`), so every case is a
//! unit test; `reap` gathers the facts and applies the decision.
//!
//! The rules, in the order they apply:
//! - a process on its way out (one that was draining after its
//!   replacement took over, or any while the host drains) is let go;
//! - any other death counts: in the crash tallies, and against the plugin
//!   bytes it died of, quarantined when they reach `--quarantine-after`;
//! - before the host ever served, a worker that died of no plugin's code
//!   fails the start-up (a host that cannot start at all, not a crash);
//! - a serving worker whose replacement was starting hands its place over;
//!   one that had served is replaced at once; one that died starting is
//!   started again after a pause that grows with each such death in a row;
//! - a replacement that died starting is tried again after that pause,
//!   unless it came from the binary an upgrade tries: the upgrade is given
//!   up.

use super::death::End;
use super::procs::{backoff, unasked, Role};
use std::time::Duration;

/// What is known when a worker process ends: the process, and the
/// supervisor's state then.
#[derive(Clone, Debug)]
pub struct Ending {
    /// Which of its place's processes it was.
    pub role: Role,
    pub end: End,
    /// It had served (its row said so).
    pub ready: bool,
    /// The supervisor killed it (stuck past `--worker-timeout`).
    pub killed: bool,
    /// It was started from the binary an upgrade tries.
    pub from_candidate: bool,
    /// The plugin bytes it died of, if known.
    pub blame: Option<Blame>,
    /// The host drains.
    pub draining: bool,
    /// Every first worker has served (the host was announced).
    pub announced: bool,
    /// An upgrade (SIGUSR2) is under way.
    pub upgrading: bool,
    /// Its place has a replacement starting.
    pub next_starting: bool,
    /// Its place's deaths before serving in a row, before this one.
    pub failed_starts: u32,
}

/// The plugin bytes a worker died of, as the quarantine counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blame {
    /// Deaths of the same bytes within `--quarantine-window`, before this
    /// one.
    pub before: u32,
    /// `--quarantine-after` (0: no quarantine).
    pub after: u32,
}

/// What to do about a worker process that ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It was on its way out: nothing to do. `unasked`: its end was not
    /// the one asked for (a crash, not a clean exit or the supervisor's
    /// kill), said as a warning.
    LetGo { unasked: bool },
    /// A death that counts (the crash tallies, the blamed bytes' deaths);
    /// `quarantine`: with it those bytes reach `--quarantine-after`, and
    /// every worker is to refuse them. `then`: what its place needs.
    Counted { quarantine: bool, then: Then },
}

/// What a place needs after a death that counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// The host never served: the start-up fails, every worker killed.
    FailStart,
    /// Its replacement, already starting, takes the place.
    TakeOver,
    /// It had served: a new worker now.
    Replace,
    /// It died before it served, the `failed_starts`-th time in a row: a
    /// new worker after `pause`.
    ReplaceAfterBackoff { failed_starts: u32, pause: Duration },
    /// The replacement died before it served, the `failed_starts`-th
    /// time in a row: another after `pause`.
    RetryReplacement { failed_starts: u32, pause: Duration },
    /// A worker of the binary an upgrade tries died: the upgrade is given
    /// up.
    AbandonUpgrade,
}

/// What to do about `ending`: the rules of this module's comment, one arm
/// each, in their order.
pub fn decide(ending: &Ending) -> Decision {
    let failed_starts = ending.failed_starts.saturating_add(1);
    let pause = backoff(failed_starts);
    let then = match ending.role {
        _ if ending.draining => return let_go(ending),
        Role::Leaving => return let_go(ending),
        _ if !ending.announced && !ending.ready && ending.blame.is_none() => Then::FailStart,
        Role::Serving if ending.next_starting => Then::TakeOver,
        Role::Serving if ending.ready => Then::Replace,
        Role::Serving => Then::ReplaceAfterBackoff {
            failed_starts,
            pause,
        },
        Role::Next if ending.upgrading && ending.from_candidate => Then::AbandonUpgrade,
        Role::Next => Then::RetryReplacement {
            failed_starts,
            pause,
        },
    };
    let quarantine = ending
        .blame
        .is_some_and(|b| b.after > 0 && b.before.saturating_add(1) == b.after);
    Decision::Counted { quarantine, then }
}

fn let_go(ending: &Ending) -> Decision {
    Decision::LetGo {
        unasked: unasked(ending.end, ending.killed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEGV: End = End::Signaled(11);
    const KILL: End = End::Signaled(9);

    /// What is decided for a serving worker that had served and crashed,
    /// in a host that serves, once `change` made it the case at hand.
    fn decided(change: impl FnOnce(&mut Ending)) -> Decision {
        let mut ending = Ending {
            role: Role::Serving,
            end: SEGV,
            ready: true,
            killed: false,
            from_candidate: false,
            blame: None,
            draining: false,
            announced: true,
            upgrading: false,
            next_starting: false,
            failed_starts: 0,
        };
        change(&mut ending);
        decide(&ending)
    }

    fn counted(then: Then) -> Decision {
        Decision::Counted {
            quarantine: false,
            then,
        }
    }

    fn blamed(before: u32, after: u32) -> Option<Blame> {
        Some(Blame { before, after })
    }

    fn after_backoff(failed_starts: u32, ms: u64) -> Then {
        Then::ReplaceAfterBackoff {
            failed_starts,
            pause: Duration::from_millis(ms),
        }
    }

    fn retry(failed_starts: u32, ms: u64) -> Then {
        Then::RetryReplacement {
            failed_starts,
            pause: Duration::from_millis(ms),
        }
    }

    #[test]
    fn a_crash_of_a_serving_worker_is_replaced_at_once() {
        assert_eq!(decided(|_| {}), counted(Then::Replace));
        assert_eq!(decided(|e| e.end = End::Exited(3)), counted(Then::Replace));
    }

    #[test]
    fn a_clean_exit_nobody_asked_for_counts_too() {
        assert_eq!(decided(|e| e.end = End::Exited(0)), counted(Then::Replace));
    }

    #[test]
    fn a_stuck_worker_killed_by_the_supervisor_is_replaced_at_once() {
        let stuck = decided(|e| (e.end, e.killed) = (KILL, true));
        assert_eq!(stuck, counted(Then::Replace));
    }

    #[test]
    fn a_worker_that_dies_starting_is_started_again_after_a_growing_pause() {
        let first = decided(|e| e.ready = false);
        assert_eq!(first, counted(after_backoff(1, 200)));
        let third = decided(|e| (e.ready, e.failed_starts) = (false, 2));
        assert_eq!(third, counted(after_backoff(3, 800)));
        // Too many in a row: the pause stops growing at its bound.
        let many = decided(|e| (e.ready, e.failed_starts) = (false, 30));
        assert_eq!(many, counted(after_backoff(31, 10_000)));
    }

    #[test]
    fn a_serving_worker_whose_replacement_is_starting_hands_its_place_over() {
        // A recycled worker (generation cap, max requests, memory, an
        // upgrade's step) that ends before its replacement served.
        let recycled = decided(|e| (e.end, e.next_starting) = (End::Exited(0), true));
        assert_eq!(recycled, counted(Then::TakeOver));
    }

    #[test]
    fn a_recycled_worker_draining_after_its_replacement_took_over_is_let_go() {
        let leaving = |e: &mut Ending| e.role = Role::Leaving;
        let clean = decided(|e| {
            leaving(e);
            e.end = End::Exited(0);
        });
        assert_eq!(clean, Decision::LetGo { unasked: false });
        // Killed past the graceful timeout: asked for.
        let killed = decided(|e| {
            leaving(e);
            (e.end, e.killed) = (KILL, true);
        });
        assert_eq!(killed, Decision::LetGo { unasked: false });
        // A crash while draining is news, but nothing to do.
        assert_eq!(decided(leaving), Decision::LetGo { unasked: true });
    }

    #[test]
    fn while_the_host_drains_every_end_is_let_go() {
        for role in [Role::Serving, Role::Next, Role::Leaving] {
            let draining = |e: &mut Ending| {
                (e.role, e.draining, e.blame) = (role, true, blamed(2, 3));
            };
            assert_eq!(decided(draining), Decision::LetGo { unasked: true });
            let clean = decided(|e| {
                draining(e);
                e.end = End::Exited(0);
            });
            assert_eq!(clean, Decision::LetGo { unasked: false });
        }
    }

    #[test]
    fn bytes_that_reach_the_bound_are_quarantined_once() {
        let quarantined = Decision::Counted {
            quarantine: true,
            then: Then::Replace,
        };
        assert_eq!(decided(|e| e.blame = blamed(2, 3)), quarantined);
        assert_eq!(decided(|e| e.blame = blamed(0, 3)), counted(Then::Replace));
        // Already quarantined at the third.
        assert_eq!(decided(|e| e.blame = blamed(3, 3)), counted(Then::Replace));
        // `--quarantine-after 0`: never.
        assert_eq!(decided(|e| e.blame = blamed(0, 0)), counted(Then::Replace));
    }

    #[test]
    fn before_the_host_served_a_death_of_no_plugin_fails_the_start_up() {
        let first = |e: &mut Ending| (e.ready, e.announced) = (false, false);
        assert_eq!(decided(first), counted(Then::FailStart));
        // One that had served (the others had not yet) is replaced.
        let served = decided(|e| {
            first(e);
            e.ready = true;
        });
        assert_eq!(served, counted(Then::Replace));
    }

    #[test]
    fn before_the_host_served_a_plugin_s_death_is_retried_and_counted() {
        // A constructor that kills every worker at start-up: the start-up
        // goes on (started again after a pause) until it is quarantined.
        let blamed = decided(|e| (e.ready, e.announced, e.blame) = (false, false, blamed(2, 3)));
        let quarantined = Decision::Counted {
            quarantine: true,
            then: after_backoff(1, 200),
        };
        assert_eq!(blamed, quarantined);
    }

    #[test]
    fn a_replacement_that_dies_starting_is_tried_again_after_a_pause() {
        let next = |e: &mut Ending| (e.role, e.ready, e.failed_starts) = (Role::Next, false, 2);
        assert_eq!(decided(next), counted(retry(3, 800)));
        // From the running binary while an upgrade is under way (one
        // asked for at the generation cap): still the running binary's.
        let upgrading = decided(|e| {
            next(e);
            e.upgrading = true;
        });
        assert_eq!(upgrading, counted(retry(3, 800)));
    }

    #[test]
    fn a_worker_of_the_upgrade_s_binary_that_dies_gives_the_upgrade_up() {
        let candidate = |e: &mut Ending| {
            (e.role, e.ready) = (Role::Next, false);
            (e.from_candidate, e.upgrading) = (true, true);
        };
        assert_eq!(decided(candidate), counted(Then::AbandonUpgrade));
        // Once it took its place, its death is a serving worker's.
        let serving = decided(|e| {
            candidate(e);
            (e.role, e.ready) = (Role::Serving, true);
        });
        assert_eq!(serving, counted(Then::Replace));
        // The upgrade already given up: a replacement like any other.
        let late = decided(|e| {
            candidate(e);
            e.upgrading = false;
        });
        assert_eq!(late, counted(retry(1, 200)));
    }
}
