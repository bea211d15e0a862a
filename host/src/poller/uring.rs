//! io_uring(7) in readiness mode, through the `io-uring` crate: every source
//! is an `IORING_OP_POLL_ADD`. Registrations, interest changes and re-arms
//! of a loop turn are queued in the submission ring and handed to the kernel
//! with the wait, in one `io_uring_enter` per turn; only `deregister` enters
//! at once, so the poll's hold on the socket is gone before the caller
//! closes it (or the FIN would wait for the next turn).
//!
//! Two modes, chosen at start by a probe on the waker's eventfd:
//! - multishot (5.13+): one `POLL_ADD` per source for both directions,
//!   reporting every wakeup until removed. Edge-triggered like the epoll
//!   backend: interest changes cost nothing (only the token is updated).
//! - one-shot: each completion ends the poll, and it is re-armed with the
//!   current interest at the next submit. Level-triggered, like poll(2).
//!
//! Each submission's user data is `generation << 32 | fd`; a completion
//! whose generation is not the fd's current one (a poll removed, or an fd
//! closed and reused since) is ignored.

use super::sys::{check_fd, not_registered, syscall};
use super::{Event, Features, Interest, Poller, Token, Wake};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// User data of the waker's poll.
pub(super) const WAKER_DATA: u64 = u64::MAX;
/// User data of `POLL_REMOVE`s, whose completions say nothing we need.
const REMOVE_DATA: u64 = u64::MAX - 1;
/// Generations stay below this, so no source's user data is a tag above.
const GEN_LIMIT: u32 = u32::MAX - 1;

/// The longest `deregister` waits for a poll's end.
const AWAIT_END: Duration = Duration::from_secs(1);
/// Submission ring size; a turn with more changes enters early to make room.
const SQ_ENTRIES: u32 = 1024;
/// Completion ring size: room for a few wakeups of thousands of sources.
const CQ_ENTRIES: u32 = 8192;

const IN: u32 = libc::POLLIN as u32;
const OUT: u32 = libc::POLLOUT as u32;
const RDHUP: u32 = libc::POLLRDHUP as u32;
const HANGUP: u32 = (libc::POLLHUP | libc::POLLERR) as u32 | RDHUP;

/// One watched fd.
#[derive(Clone, Copy, Debug)]
struct Slot {
    token: Token,
    gen: u32,
    interest: Interest,
    /// The mask of the poll in the ring (queued or in the kernel), if any.
    armed: Option<u32>,
    /// The wait that last reported this fd, and where in its events: a
    /// multishot poll posts one completion per wakeup, merged here into
    /// one event per fd and wait (as epoll reports them).
    seen: (u64, usize),
}

/// The io_uring backend.
pub struct UringPoller {
    ring: IoUring,
    /// Indexed by fd.
    slots: Vec<Option<Slot>>,
    next_gen: u32,
    multishot: bool,
    waker: Arc<EventFd>,
    waker_armed: bool,
    /// Fds whose poll ended and must be re-armed (reused between turns).
    rearm: Vec<RawFd>,
    /// Counts waits, for `Slot::seen`.
    turn: u64,
    /// Completions reaped while `deregister` waited, for the next wait:
    /// (user data, result, flags).
    stash: Vec<(u64, i32, u32)>,
}

impl UringPoller {
    /// Starts a ring, multishot if the kernel has it.
    pub fn new() -> io::Result<Self> {
        Self::start(true)
    }

    /// Starts a ring; `allow_multishot: false` forces the one-shot mode
    /// (what kernels before 5.13 get), so tests can check it here too.
    pub(crate) fn start(allow_multishot: bool) -> io::Result<Self> {
        let ring = setup()?;
        let mut p = UringPoller {
            ring,
            slots: Vec::new(),
            next_gen: 0,
            multishot: false,
            waker: Arc::new(EventFd::new()?),
            waker_armed: false,
            rearm: Vec::new(),
            turn: 1,
            stash: Vec::new(),
        };
        p.multishot = allow_multishot && p.probe_multishot()?;
        if !p.waker_armed {
            p.arm_waker()?;
        }
        Ok(p)
    }

    /// Arms the waker's poll as multishot on a signalled eventfd and reads
    /// its first completion: `IORING_CQE_F_MORE` says the kernel keeps it.
    fn probe_multishot(&mut self) -> io::Result<bool> {
        self.waker.wake()?;
        let poll = opcode::PollAdd::new(types::Fd(self.waker.fd()), IN)
            .multi(true)
            .build()
            .user_data(WAKER_DATA);
        self.push(&poll)?;
        self.ring.submit_and_wait(1)?;
        let cqe = self.ring.completion().next();
        self.waker.drain();
        let kept = cqe.is_some_and(|c| c.result() > 0 && cqueue::more(c.flags()));
        self.waker_armed = kept;
        Ok(kept)
    }

    fn arm_waker(&mut self) -> io::Result<()> {
        let poll = self.waker.poll(self.multishot);
        self.push(&poll)?;
        self.waker_armed = true;
        Ok(())
    }

    /// Queues `entry`, entering the kernel first if the ring is full.
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // SAFETY: the entries queued here are POLL_ADDs and POLL_REMOVEs,
        // which carry an fd and a mask but no pointer to user memory, so
        // nothing they refer to can be freed before the kernel reads them.
        unsafe { push(&mut self.ring, entry) }
    }

    /// The poll mask for `interest`: both directions in multishot mode
    /// (edge-triggered), only what is wanted in one-shot mode. Hang-ups
    /// are always asked for.
    fn mask(&self, interest: Interest) -> u32 {
        if self.multishot {
            return IN | OUT | RDHUP;
        }
        let mut mask = RDHUP;
        if interest.is_readable() {
            mask |= IN;
        }
        if interest.is_writable() {
            mask |= OUT;
        }
        mask
    }

    /// Queues the poll for `fd` with a fresh generation.
    fn arm(&mut self, fd: RawFd) -> io::Result<()> {
        let gen = self.next_gen;
        self.next_gen = if gen + 1 >= GEN_LIMIT { 0 } else { gen + 1 };
        let Some(Some(slot)) = self.slots.get(fd as usize).copied() else {
            return Err(not_registered(fd));
        };
        let mask = self.mask(slot.interest);
        let poll = opcode::PollAdd::new(types::Fd(fd), mask)
            .multi(self.multishot)
            .build()
            .user_data(user_data(gen, fd));
        self.push(&poll)?;
        if let Some(Some(s)) = self.slots.get_mut(fd as usize) {
            s.gen = gen;
            s.armed = Some(mask);
        }
        Ok(())
    }

    /// Queues the removal of `slot`'s poll, if it has one in the ring.
    fn disarm(&mut self, fd: RawFd, slot: Slot) -> io::Result<()> {
        if slot.armed.is_none() {
            return Ok(());
        }
        let remove = opcode::PollRemove::new(user_data(slot.gen, fd))
            .build()
            .user_data(REMOVE_DATA);
        self.push(&remove)
    }

    /// One `io_uring_enter` (see `enter`).
    fn enter(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        enter(&mut self.ring, timeout, false)
    }

    /// Turns the waiting completions into `events` and notes the polls
    /// that ended for `rearm`.
    fn reap(&mut self, events: &mut Vec<Event>) {
        let UringPoller {
            ring,
            slots,
            multishot,
            waker,
            waker_armed,
            rearm,
            turn,
            stash,
            ..
        } = self;
        *turn += 1;
        let mut woken = false;
        let reaped = ring
            .completion()
            .map(|c| (c.user_data(), c.result(), c.flags()));
        for (data, res, flags) in stash.drain(..).chain(reaped) {
            let more = cqueue::more(flags);
            if data == WAKER_DATA {
                woken |= res > 0;
                *waker_armed &= more;
                continue;
            }
            if data == REMOVE_DATA {
                continue;
            }
            let fd = (data & 0xffff_ffff) as RawFd;
            let Some(Some(slot)) = slots.get_mut(fd as usize) else {
                continue; // deregistered since
            };
            if user_data(slot.gen, fd) != data {
                continue; // a removed poll, or an earlier owner of the fd
            }
            if !more {
                slot.armed = None;
            }
            let mask = if res < 0 {
                IN | OUT | HANGUP
            } else {
                res as u32
            };
            let hup = mask & HANGUP != 0;
            let ev = Event {
                token: slot.token,
                readable: mask & (IN | HANGUP) != 0,
                writable: mask & (OUT | libc::POLLERR as u32) != 0,
                hup,
            };
            match events.get_mut(slot.seen.1) {
                Some(e) if slot.seen.0 == *turn => {
                    e.readable |= ev.readable;
                    e.writable |= ev.writable;
                    e.hup |= ev.hup;
                }
                _ => {
                    slot.seen = (*turn, events.len());
                    events.push(ev);
                }
            }
            // A poll that failed is not re-armed (the caller reads the
            // error); nor, in one-shot mode, a hang-up on a source that
            // wants nothing else, which would be reported every turn.
            let idle_hup = !*multishot && hup && slot.interest == Interest::NONE;
            if !more && res >= 0 && !idle_hup {
                rearm.push(fd);
            }
        }
        if woken {
            waker.drain();
            events.push(Event::woken());
        }
    }

    /// Enters until the poll `data` has posted its last completion: the
    /// poll holds the socket open until then, and the caller closes the fd
    /// next (its FIN, or the reset for unread bytes, must go now, not
    /// whenever the ring is next entered). Other completions are kept for
    /// the next wait. Gives up after a second (a kernel that never ends
    /// the poll: the socket closes with the ring's next turn).
    fn await_end(&mut self, data: u64) -> io::Result<()> {
        let deadline = Instant::now() + AWAIT_END;
        let last = |&(d, _, flags): &(u64, i32, u32)| d == data && !cqueue::more(flags);
        // Ended already, in an earlier wait of this loop (not reaped yet).
        let mut ended = self.stash.iter().any(last);
        while !ended && Instant::now() < deadline {
            enter(&mut self.ring, Some(AWAIT_END / 10), false)?;
            let from = self.stash.len();
            self.stash.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            ended = self.stash[from..].iter().any(last);
            if !ended {
                // The removal came before the poll was armed (it found
                // nothing): remove again.
                let remove = opcode::PollRemove::new(data).build().user_data(REMOVE_DATA);
                self.push(&remove)?;
            }
        }
        Ok(())
    }

    /// Queues the polls that ended in the last reap.
    fn rearm_ended(&mut self) -> io::Result<()> {
        let mut fds = std::mem::take(&mut self.rearm);
        for &fd in &fds {
            if matches!(self.slots.get(fd as usize), Some(Some(s)) if s.armed.is_none()) {
                self.arm(fd)?;
            }
        }
        fds.clear();
        self.rearm = fds;
        if !self.waker_armed {
            self.arm_waker()?;
        }
        Ok(())
    }
}

/// Runs `turn` (one entering of the kernel for up to the time it is
/// given, and the reaping: true when the wait is over) first for `first`,
/// then until `timeout` has passed: a turn that reaped only completions
/// to ignore waits on for the time left.
pub(super) fn wait_for(
    timeout: Option<Duration>,
    first: Option<Duration>,
    mut turn: impl FnMut(Option<Duration>) -> io::Result<bool>,
) -> io::Result<()> {
    let deadline = timeout
        .filter(|t| !t.is_zero())
        .and_then(|t| Instant::now().checked_add(t));
    let mut left = first;
    loop {
        if turn(left)? || left.is_some_and(|t| t.is_zero()) {
            return Ok(());
        }
        if let Some(d) = deadline {
            let rest = d.saturating_duration_since(Instant::now());
            if rest.is_zero() {
                return Ok(());
            }
            left = Some(rest);
        }
    }
}

/// Queues `entry` in `ring`, entering the kernel first if the ring is full.
///
/// # Safety
/// What the entry points to (memory, and the fd it names) must stay valid
/// until its completion.
pub(super) unsafe fn push(ring: &mut IoUring, entry: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: the caller's promise, as above.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// One `io_uring_enter`: submits what is queued and waits up to `timeout`
/// for a completion. False if the wait timed out or was interrupted.
///
/// `deferred`: the ring runs its completions' work only when asked for
/// events (`DEFER_TASKRUN`), so a turn that does not wait still asks,
/// with a wait of zero.
pub(super) fn enter(
    ring: &mut IoUring,
    timeout: Option<Duration>,
    deferred: bool,
) -> io::Result<bool> {
    let res = match timeout {
        Some(t) if t.is_zero() && !deferred => ring.submit(),
        None => ring.submit_and_wait(1),
        Some(t) => {
            let ts = types::Timespec::from(t);
            let args = types::SubmitArgs::new().timespec(&ts);
            ring.submitter().submit_with_args(1, &args)
        }
    };
    match res {
        Ok(_) => Ok(true),
        Err(e) => match e.raw_os_error() {
            Some(libc::ETIME) | Some(libc::EINTR) => Ok(false),
            // Completions are waiting to be reaped (CQ overflow).
            Some(libc::EBUSY) => Ok(true),
            _ => Err(e),
        },
    }
}

/// A ring (`build_ring`), with an error that says why there is none, and
/// the kernel's `IORING_FEAT_EXT_ARG` (a wait with a timeout) checked.
pub(super) fn setup() -> io::Result<IoUring> {
    let ring = build_ring().map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) => {
                " (refused: see /proc/sys/kernel/io_uring_disabled, or a seccomp filter)"
            }
            Some(libc::ENOSYS) => " (the kernel has no io_uring)",
            _ => "",
        };
        io::Error::new(e.kind(), format!("io_uring_setup: {e}{hint}"))
    })?;
    if !ring.params().is_feature_ext_arg() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_uring without IORING_FEAT_EXT_ARG (kernel older than 5.11)",
        ));
    }
    Ok(ring)
}

/// A ring for one loop's thread alone (`SINGLE_ISSUER`) whose
/// completions' work runs only when that thread asks for events
/// (`DEFER_TASKRUN`, 6.1), not when the network interrupts it; made
/// disabled, so the loop's thread enables it (`register_enable_rings`)
/// and becomes its issuer. `None` on a kernel without them.
pub(super) fn setup_deferred() -> Option<IoUring> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_r_disabled()
        .setup_cqsize(CQ_ENTRIES)
        .build(SQ_ENTRIES)
        .ok()?;
    ring.params().is_feature_ext_arg().then_some(ring)
}

/// A ring with room for `CQ_ENTRIES` completions, the loop's only thread
/// submitting (COOP_TASKRUN where the kernel has it).
fn build_ring() -> io::Result<IoUring> {
    // COOP_TASKRUN (5.19): completions from other threads wait for the
    // loop's next enter instead of interrupting it.
    let coop = IoUring::builder()
        .setup_coop_taskrun()
        .setup_cqsize(CQ_ENTRIES)
        .build(SQ_ENTRIES);
    match coop {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::builder()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES),
        other => other,
    }
}

fn user_data(gen: u32, fd: RawFd) -> u64 {
    (u64::from(gen) << 32) | u64::from(fd as u32)
}

impl Poller for UringPoller {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn features(&self) -> Features {
        Features {
            edge_triggered: self.multishot,
            hup_flag: true,
            // POLLRDHUP is in every mask, and POLLHUP/POLLERR always count.
            hup_without_interest: true,
            fd_limit: None,
        }
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        check_fd(fd)?;
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, None);
        }
        if self.slots[i].is_some() {
            return Err(super::sys::already_registered(fd));
        }
        self.slots[i] = Some(Slot {
            token,
            gen: 0,
            interest,
            armed: None,
            seen: (0, 0),
        });
        self.arm(fd)
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        check_fd(fd)?;
        let Some(Some(slot)) = self.slots.get_mut(fd as usize) else {
            return Err(not_registered(fd));
        };
        slot.token = token;
        slot.interest = interest;
        let slot = *slot;
        let mask = self.mask(interest);
        match slot.armed {
            Some(armed) if armed == mask => Ok(()),
            // Ended and not re-armed yet (or an idle hang-up): arm anew.
            None => self.arm(fd),
            Some(_) => {
                self.disarm(fd, slot)?;
                self.arm(fd)
            }
        }
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        check_fd(fd)?;
        let Some(slot) = self.slots.get_mut(fd as usize).and_then(Option::take) else {
            return Err(not_registered(fd));
        };
        self.disarm(fd, slot)?;
        if slot.armed.is_some() {
            self.await_end(user_data(slot.gen, fd))?;
        }
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        // Completions kept by `deregister` are reaped before any blocking.
        let first = match self.stash.is_empty() {
            true => timeout,
            false => Some(Duration::ZERO),
        };
        wait_for(timeout, first, |left| {
            let completed = self.enter(left)?;
            self.reap(events);
            self.rearm_ended()?;
            Ok(!events.is_empty() || !completed)
        })
    }

    fn waker(&self) -> Arc<dyn Wake> {
        self.waker.clone()
    }
}

/// The waker: an eventfd whose readability a poll in the ring watches (a
/// registered eventfd would signal completions out of the ring instead).
pub(super) struct EventFd(OwnedFd);

impl EventFd {
    pub(super) fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; the flags are valid for it.
        let fd = syscall!(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: eventfd succeeded, so `fd` is a fresh fd nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(super) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// The poll that reports its wakeups (`WAKER_DATA`), multishot or not.
    pub(super) fn poll(&self, multi: bool) -> squeue::Entry {
        opcode::PollAdd::new(types::Fd(self.fd()), IN)
            .multi(multi)
            .build()
            .user_data(WAKER_DATA)
    }

    /// Resets the counter, so the next `wake` is a new wakeup.
    pub(super) fn drain(&self) {
        let mut n = 0u64;
        // SAFETY: `n` is valid for writes of 8 bytes, the size an eventfd
        // read takes; the fd is open and owned by `self`. EAGAIN (already
        // drained) is fine.
        let _ = unsafe { libc::read(self.fd(), (&mut n as *mut u64).cast(), 8) };
    }
}

impl Wake for EventFd {
    fn wake(&self) -> io::Result<()> {
        let one = 1u64;
        loop {
            // SAFETY: `one` is valid for reads of 8 bytes, the size an
            // eventfd write takes; the fd is open and owned by `self`.
            match syscall!(unsafe { libc::write(self.fd(), (&one as *const u64).cast(), 8) }) {
                Ok(_) => return Ok(()),
                // The counter is at its maximum: a wakeup is pending anyway.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poller::sys::tests::pair;
    use crate::poller::tests::skip_io_uring;

    fn start(multishot: bool) -> Option<UringPoller> {
        match UringPoller::start(multishot) {
            Ok(p) => Some(p),
            Err(e) if skip_io_uring(&e) => None,
            Err(e) => panic!("cannot start io_uring: {e}"),
        }
    }

    #[test]
    fn modes_declare_their_triggering() {
        let Some(multi) = start(true) else { return };
        // Multishot poll is in every kernel since 5.13.
        assert!(multi.multishot && multi.features().edge_triggered);
        let Some(one) = start(false) else { return };
        assert!(!one.multishot && !one.features().edge_triggered);
    }

    #[test]
    fn a_late_completion_for_a_reused_fd_is_ignored() {
        for multishot in [true, false] {
            let Some(mut p) = start(multishot) else {
                return;
            };
            let (a, _a_peer) = pair();
            let fd = a.as_raw_fd();
            p.register(fd, Token(1), Interest::READABLE).unwrap();
            // Removed and closed before its poll ever reached the kernel:
            // the removal's and the poll's completions come later.
            p.deregister(fd).unwrap();
            drop(a);
            let (b, _b_peer) = pair();
            assert_eq!(b.as_raw_fd(), fd, "the lowest free fd is reused");
            p.register(fd, Token(2), Interest::READABLE).unwrap();
            let mut events = Vec::new();
            p.wait(&mut events, Some(Duration::from_millis(20)))
                .unwrap();
            // Token 1 is gone; token 2's socket is quiet (multishot mode
            // reports its writable edge, and nothing else).
            assert!(
                events
                    .iter()
                    .all(|e| e.token == Token(2) && !e.readable && !e.hup),
                "multishot={multishot}: {events:?}"
            );
            p.deregister(fd).unwrap();
        }
    }

    #[test]
    fn wakeups_between_two_waits_make_one_event() {
        use std::io::Write;
        let Some(mut p) = start(true) else { return };
        let (a, mut b) = pair();
        p.register(a.as_raw_fd(), Token(6), Interest::READABLE)
            .unwrap();
        let mut events = Vec::new();
        p.wait(&mut events, Some(Duration::ZERO)).unwrap();
        for _ in 0..3 {
            b.write_all(b"x").unwrap();
        }
        p.wait(&mut events, Some(Duration::from_millis(100)))
            .unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(events[0].readable && events[0].token == Token(6));
        p.deregister(a.as_raw_fd()).unwrap();
    }

    #[test]
    fn user_data_keeps_the_generation_apart_from_the_fd() {
        assert_eq!(user_data(3, 7), (3 << 32) | 7);
        assert_ne!(user_data(GEN_LIMIT - 1, -1i32 as u32 as RawFd), REMOVE_DATA);
        assert_ne!(user_data(GEN_LIMIT - 1, -1i32 as u32 as RawFd), WAKER_DATA);
    }
}
