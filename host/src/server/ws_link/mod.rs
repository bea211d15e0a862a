//! An open WebSocket on a connection: the framing (`http::websocket::codec`), the
//! app's session, and the line its sender posts through (`line`). The
//! connection stays on its worker's loop and poller; the loop reads frames
//! into the codec, hands whole messages to the session (on the loop, in
//! order), and writes what the codec and the app queue.
//!
//! Endings: the peer's close is echoed, a broken protocol gets its close
//! code (1002, 1007, 1009), the app's close or a drain's 1001 waits for the
//! peer's answer at most `CLOSE_GRACE`. Once no more frames are to be
//! read or sent the connection closes as every connection with bytes
//! unread does (`Conn::linger`, at most `CLOSE_GRACE` here), so that bytes
//! still in flight from the peer do not turn the close into a reset that
//! would lose the close frame. A peer silent for `ws_ping_interval` gets a ping; one still
//! silent after another interval is dropped.
//!
//! A message not yet whole holds its bytes of the host's budget
//! (`--max-buffered`; past it the connection closes with 1013) and must
//! come at `--body-min-rate` once `--body-timeout` has passed since its
//! first byte (else 1008).

pub mod line;

use crate::budget::{size_text, Budget, Refusal, Reservation};
use crate::http::websocket::codec::{code, Codec, Limits, Message, Step};
use crate::ops::watchdog::Board;
use crate::settings::{Settings, WsParams};
use crate::stats::{bump, Stats};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RSlice, RStr};
use line::{HostSender, Line, Outgoing};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_app_api::abi::{RawWsSender_TO, TaskBox, WsSessionBox, WS_BINARY, WS_TEXT};

/// How long a close handshake the host started waits for the peer's
/// answer, and how long a half-closed connection waits for the peer's EOF.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// What the loop should do with a WebSocket whose deadline passed.
#[derive(Debug, PartialEq, Eq)]
pub enum Expired {
    /// A ping went out: write it.
    Pinged,
    /// A message came too slowly: the close frame (1008) went out; write
    /// it, then the connection lingers.
    TooSlow,
    /// Close the connection now.
    Drop,
}

/// What a WebSocket reads of its worker: the counters it opens and closes
/// in, the heartbeat its callbacks run under, and the settings (its limits,
/// the blocked-loop warning).
pub struct LinkWatch {
    pub stats: Arc<Stats>,
    pub board: Arc<Board>,
    pub worker: usize,
    pub settings: Arc<Settings>,
}

/// One open (or closing) WebSocket.
pub struct Link {
    codec: Codec,
    /// The app's session until `on_close` has run.
    session: Option<WsSessionBox>,
    line: Arc<Line>,
    /// The app's counters slot, and its name for logs.
    slot: usize,
    app: Arc<str>,
    /// Keeps the app's generation counted as busy while open.
    _generation: Arc<dyn Send + Sync>,
    watch: LinkWatch,
    params: WsParams,
    /// When the peer last sent a byte.
    heard: Instant,
    pinged: bool,
    /// When the host sent a close frame of its own, waiting for the answer.
    closing_since: Option<Instant>,
    /// What the message not yet whole holds of the budget: the bytes read
    /// since the last whole message, control frames aside (tungstenite
    /// keeps its fragments).
    message: Reservation,
    /// When the message not yet whole began.
    message_began: Option<Instant>,
}

impl Link {
    /// A WebSocket just switched to: `leftover` are bytes the client sent
    /// right after its handshake.
    pub fn new(
        upgrade: crate::inbox::Upgrade,
        line: Arc<Line>,
        watch: LinkWatch,
        leftover: Vec<u8>,
        budget: Budget,
        now: Instant,
    ) -> Self {
        let params = watch.settings.ws;
        bump(&watch.stats.worker(watch.worker).ws_opened, 1);
        Link {
            codec: Codec::new(
                leftover,
                Limits {
                    max_message: params.max_message,
                },
            ),
            session: Some(upgrade.session),
            line,
            slot: upgrade.slot,
            app: watch.stats.app_name(upgrade.slot),
            _generation: upgrade.generation,
            watch,
            params,
            heard: now,
            pinged: false,
            closing_since: None,
            message: budget.reservation(),
            message_began: None,
        }
    }

    /// The id the line's notices carry.
    pub fn id(&self) -> u64 {
        self.line.id()
    }

    /// Asks the loop to pump this WebSocket again next turn.
    pub fn nudge(&self) {
        self.line.nudge();
    }

    /// Gives the app its sender (`on_open`).
    pub fn open(&mut self) {
        let sender = RawWsSender_TO::from_value(HostSender(self.line.clone()), TD_Opaque);
        self.in_app(|session| session.on_open(sender));
    }

    /// Calls the app's session, if it is still open, as the loop calls a
    /// handler: under the watchdog's eye (named for stuck-loop reports and
    /// the app's timers) and with the blocked-loop warning.
    fn in_app(&mut self, f: impl FnOnce(&mut WsSessionBox)) {
        let Some(session) = &mut self.session else {
            return;
        };
        let beat = self.watch.board.beat(self.watch.worker);
        beat.enter(
            self.slot,
            &crate::ops::spot::Running::callback("(a WebSocket callback)"),
        );
        let started = Instant::now();
        f(session);
        beat.leave();
        super::clock::warn_if_blocked(
            self.watch.settings.loop_block_warn,
            started.elapsed(),
            format_args!("app {} (a WebSocket callback)", self.app),
            "hand slow work to Host::spawn_blocking with a clone of the sender",
        );
    }

    /// The codec, for the connection's reads and writes.
    pub fn codec(&mut self) -> &mut Codec {
        &mut self.codec
    }

    /// The peer sent bytes at `now`.
    pub fn heard(&mut self, now: Instant) {
        self.heard = now;
        self.pinged = false;
    }

    /// Counts `read` bytes from the peer at `now`; `whole`: they ended a
    /// message. False if the budget has no room for the message not yet
    /// whole (see `over_budget`).
    pub fn count_read(&mut self, read: usize, whole: bool, now: Instant) -> bool {
        let control = self.codec.take_control_read();
        if whole {
            self.message_began = None;
            self.message.force(0);
            return true;
        }
        let bytes = (self.message.bytes() + read).saturating_sub(control);
        // Bytes of a control frame not yet parsed start no message.
        match bytes {
            0 => self.message_began = None,
            _ => self.message_began = self.message_began.or(Some(now)),
        }
        self.message.set(bytes)
    }

    /// The budget had no room for the message not yet whole: the
    /// connection closes with 1013 (try again later), counted.
    pub fn over_budget(&mut self) {
        if self.codec.done() {
            return;
        }
        let budget = self.message.budget();
        budget.note_refused(Refusal::Message);
        let why = format!(
            "the host holds its whole max_buffered ({})",
            size_text(budget.limit())
        );
        log::debug!("WebSocket closed with 1013: {why}");
        self.codec.fail(code::TRY_AGAIN_LATER, &why);
        self.end(code::TRY_AGAIN_LATER, &why);
    }

    /// When the message not yet whole falls below the minimum rate.
    fn rate_deadline(&self) -> Option<Instant> {
        let began = self.message_began?;
        let rate = self.params.min_rate;
        if rate == 0 {
            return None;
        }
        let earned = Duration::try_from_secs_f64(self.message.bytes() as f64 / rate as f64).ok()?;
        began.checked_add(self.params.rate_grace.saturating_add(earned))
    }

    /// Acts on what the peer's bytes came to.
    pub fn on_step(&mut self, step: Step) {
        match step {
            Step::Idle | Step::Paused | Step::Control => {}
            Step::Message(message) => {
                let (kind, data): (u8, &[u8]) = match &message {
                    Message::Text(t) => (WS_TEXT, t.as_bytes()),
                    Message::Binary(b) => (WS_BINARY, b),
                    _ => return,
                };
                self.in_app(|session| session.on_message(kind, RSlice::from_slice(data)));
            }
            Step::Closed { code, reason } => self.end(code, &reason),
            Step::Failed { code, why } => {
                log::debug!("WebSocket failed with {code}: {why}");
                self.end(code, &why);
            }
            Step::Gone { why } => {
                log::debug!("WebSocket gone: {why}");
                self.end(code::ABNORMAL, &why);
            }
        }
    }

    /// Tells the app the WebSocket ended (once) and shuts its line.
    fn end(&mut self, code: u16, reason: &str) {
        if self.session.is_some() {
            bump(&self.watch.stats.worker(self.watch.worker).ws_closed, 1);
            self.in_app(|session| session.on_close(code, RStr::from_str(reason)));
            self.session = None;
        }
        run(self.line.shut());
    }

    /// Frames what the app queued (messages, a close).
    pub fn take_outgoing(&mut self, now: Instant) {
        for message in self.line.take() {
            match message {
                Outgoing::Text(t) => {
                    let _ = self.codec.send(Message::text(t));
                }
                Outgoing::Binary(b) => {
                    let _ = self.codec.send(Message::binary(b));
                }
                Outgoing::Close(c, reason) => self.close(c, &reason, now),
            }
        }
    }

    /// Starts the close handshake from the host's side (the app's close,
    /// a drain's 1001).
    pub fn close(&mut self, code: u16, reason: &str, now: Instant) {
        if !self.codec.closing() {
            self.codec.close(code, reason);
            self.closing_since = Some(now);
        }
    }

    /// `pending` bytes wait for the socket: the app's drain task runs if
    /// there is room.
    pub fn set_pending(&self, pending: usize) {
        run(self.line.set_pending(pending));
    }

    /// True once no frame will be read or sent: the connection lingers
    /// (`Conn::linger`).
    pub fn done(&self) -> bool {
        self.codec.done()
    }

    /// When the next timeout of this WebSocket falls.
    pub fn deadline(&self) -> Instant {
        if let Some(since) = self.closing_since {
            return since + CLOSE_GRACE;
        }
        let silence = if self.pinged { 2 } else { 1 };
        let ping = self.heard + self.params.ping_interval * silence;
        self.rate_deadline().map_or(ping, |at| at.min(ping))
    }

    /// The deadline passed: ping a silent peer, or give up on it.
    pub fn expire(&mut self, now: Instant) -> Expired {
        if now < self.deadline() {
            return Expired::Pinged;
        }
        if self.rate_deadline().is_some_and(|at| at <= now) {
            let why = format!(
                "message slower than body_min_rate ({} bytes/s after body_timeout)",
                self.params.min_rate
            );
            log::debug!("WebSocket closed with 1008: {why}");
            self.message_began = None;
            self.codec.fail(code::POLICY, &why);
            self.end(code::POLICY, &why);
            return Expired::TooSlow;
        }
        let why = if self.closing_since.is_some() {
            "no close answer within the close grace"
        } else if self.pinged {
            "no answer to a ping within ws_ping_interval"
        } else {
            self.pinged = true;
            self.codec.ping();
            return Expired::Pinged;
        };
        log::debug!("WebSocket closed: {why}");
        self.end(code::ABNORMAL, why);
        Expired::Drop
    }

    /// The app's name, for logs.
    pub fn app(&self) -> &str {
        &self.app
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.end(code::ABNORMAL, "the connection closed");
    }
}

/// Runs an app's drain task on the loop.
fn run(task: Option<TaskBox>) {
    if let Some(task) = task {
        task.run();
    }
}
