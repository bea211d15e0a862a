//! One WebSocket connection's framing (RFC 6455 §5), server side, free of
//! sockets: tungstenite's protocol layer (`WebSocketContext`) reads frames
//! from whatever source it is given, never past its blocking, checks
//! them (masking, reserved bits, opcodes, control frame rules, continuation
//! order, the size limit, UTF-8 of text) and reassembles fragments; the
//! frames it writes (messages, pongs, close) land in `out`, which the
//! connection queues for its socket. The connection never blocks on it.
//!
//! One read stops at the first whole message or control frame (a ping's
//! pong is in `out` by then, so the connection counts each pong against
//! its output bound and stops reading while that is full), and takes at
//! most the bytes it is allowed, so that one connection's flood (pongs,
//! endless fragments) yields to the loop.
//!
//! Every way the peer can break the protocol ends in a close frame whose
//! code says why (§7.4.1): 1002 for a protocol error (an unmasked frame
//! among them, §5.1), 1007 for text that is not UTF-8 (§8.1), 1009 for a
//! message over the limit; after it the connection is failed (§7.1.7): the
//! host sends nothing more and closes once its close frame is out.

use std::io::{self, Read, Write};
use tungstenite::error::{CapacityError, Error, ProtocolError};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::{Role, WebSocketConfig, WebSocketContext};
pub use tungstenite::{Bytes, Message, Utf8Bytes};

/// Close codes the host sends itself (RFC 6455 §7.4.1).
pub mod code {
    pub const NORMAL: u16 = 1000;
    pub const GOING_AWAY: u16 = 1001;
    pub const PROTOCOL: u16 = 1002;
    /// Reported to an app when the peer's close frame carried no code.
    pub const NO_STATUS: u16 = 1005;
    /// Reported to an app when the TCP connection ended without a close
    /// frame; never sent.
    pub const ABNORMAL: u16 = 1006;
    pub const INVALID_DATA: u16 = 1007;
    pub const POLICY: u16 = 1008;
    pub const TOO_BIG: u16 = 1009;
    pub const INTERNAL: u16 = 1011;
    /// The host holds all the messages its budget allows (`max_buffered`).
    pub const TRY_AGAIN_LATER: u16 = 1013;
}

/// What the peer's bytes came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A whole text or binary message (fragments reassembled).
    Message(Message),
    /// A ping, its pong now in `out`, or a pong (dropped).
    Control,
    /// Nothing complete yet: the source would block.
    Idle,
    /// Nothing complete yet, the bytes allowed are read: the source may
    /// hold more, for a later turn.
    Paused,
    /// The peer sent a close frame. If the host had not sent one, the echo
    /// is queued in `out`; the TCP connection closes once it is written.
    Closed { code: u16, reason: String },
    /// The peer broke the protocol: a close frame with `code` is queued
    /// and nothing more is read or sent (`why` is for the log).
    Failed { code: u16, why: String },
    /// The TCP connection ended (EOF or an error) without a close frame.
    Gone { why: String },
}

/// Why a message cannot be sent.
#[derive(Debug, PartialEq, Eq)]
pub enum SendError {
    /// A close frame was sent or received: no data may follow (§5.5.1).
    Closing,
}

/// The codec's limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest message, fragments added up (and so largest frame).
    pub max_message: usize,
}

/// A `Read + Write` over the connection's source and the codec's output:
/// reads go to the socket (or a test's bytes), at most `left` bytes more
/// (then `WouldBlock`, with `spent` set); writes append to `out`.
struct Io<'a, R> {
    src: R,
    out: &'a mut Vec<u8>,
    left: usize,
    spent: bool,
}

impl<'a, R> Io<'a, R> {
    fn new(src: R, out: &'a mut Vec<u8>, left: usize) -> Self {
        Io {
            src,
            out,
            left,
            spent: false,
        }
    }
}

impl<R: Read> Read for Io<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            self.spent = true;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let most = buf.len().min(self.left);
        let n = self.src.read(&mut buf[..most])?;
        self.left -= n;
        Ok(n)
    }
}

impl<R> Write for Io<'_, R> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A source with nothing in it, for the writes that read nothing.
struct Empty;

impl Read for Empty {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

/// One connection's WebSocket framing.
pub struct Codec {
    ctx: WebSocketContext,
    /// Frame bytes for the socket, in order.
    out: Vec<u8>,
    /// Set once the connection failed or the close handshake ended:
    /// nothing more is read.
    done: bool,
    /// Bytes of control frames read since last taken (they are no part of
    /// a message the host holds).
    control_read: usize,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("out", &self.out.len())
            .field("done", &self.done)
            .finish()
    }
}

/// The size of each read from the socket into the codec (tungstenite
/// keeps one buffer of it per connection: a thousand idle WebSockets cost
/// four MiB).
const READ_CHUNK: usize = 4096;

/// The head of a masked control frame from a client: two bytes, and the
/// four of its mask (its payload is under 126 bytes).
const CONTROL_HEAD: usize = 6;

impl Codec {
    /// A codec for a connection just switched to WebSocket; `leftover` are
    /// bytes the client sent right after its handshake.
    pub fn new(leftover: Vec<u8>, limits: Limits) -> Self {
        let mut config = WebSocketConfig::default();
        config.read_buffer_size = READ_CHUNK;
        // Frames go to `out` at once; the connection's output bound
        // (not tungstenite's buffer) is the backpressure.
        config.write_buffer_size = 0;
        config.max_message_size = Some(limits.max_message);
        // A frame over the limit is refused from its header, before its
        // payload is buffered.
        config.max_frame_size = Some(limits.max_message);
        Codec {
            ctx: WebSocketContext::from_partially_read(leftover, Role::Server, Some(config)),
            out: Vec::new(),
            done: false,
            control_read: 0,
        }
    }

    /// Reads from `src`, at most `most` bytes, until a message or a
    /// control frame is complete, `src` would block, the bytes allowed
    /// are read, or the connection ends. A ping's pong is queued in `out`
    /// before the ping is reported; a pong is dropped.
    pub fn read(&mut self, src: &mut impl Read, most: usize) -> Step {
        if self.done {
            return Step::Idle;
        }
        let mut io = Io::new(src, &mut self.out, most);
        let message = match self.ctx.read(&mut io) {
            Ok(message) => message,
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock && io.spent => {
                return Step::Paused
            }
            Err(e) => return self.on_error(e),
        };
        match message {
            Message::Text(_) | Message::Binary(_) => Step::Message(message),
            Message::Ping(p) | Message::Pong(p) => {
                self.control_read += CONTROL_HEAD + p.len();
                // The pong tungstenite holds back goes out now, so that
                // it counts against the output bound before more is read.
                self.flush();
                Step::Control
            }
            Message::Frame(_) => {
                self.flush();
                Step::Control
            }
            Message::Close(frame) => {
                // The echo (if this side had not closed first) goes to
                // `out`; the handshake is then over both ways, and the
                // server closes the TCP connection first (§7.1.1).
                self.flush();
                self.done = true;
                match frame {
                    Some(f) => Step::Closed {
                        code: f.code.into(),
                        reason: f.reason.as_str().to_string(),
                    },
                    None => Step::Closed {
                        code: code::NO_STATUS,
                        reason: String::new(),
                    },
                }
            }
        }
    }

    /// Bytes of control frames read since the last call.
    pub fn take_control_read(&mut self) -> usize {
        std::mem::take(&mut self.control_read)
    }

    fn on_error(&mut self, e: Error) -> Step {
        let (code, why) = match e {
            Error::Io(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Idle,
            Error::ConnectionClosed | Error::AlreadyClosed => {
                self.done = true;
                return Step::Gone {
                    why: "closed after the close handshake".into(),
                };
            }
            Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
                self.done = true;
                return Step::Gone {
                    why: "the peer closed without a close frame".into(),
                };
            }
            Error::Io(e) => {
                self.done = true;
                return Step::Gone { why: e.to_string() };
            }
            Error::Capacity(CapacityError::MessageTooLong { size, max_size }) => (
                code::TOO_BIG,
                format!("message of {size} bytes over ws_max_message ({max_size})"),
            ),
            Error::Capacity(e) => (code::TOO_BIG, e.to_string()),
            Error::Utf8(e) => (code::INVALID_DATA, format!("text is not UTF-8: {e}")),
            Error::Protocol(e) => (code::PROTOCOL, e.to_string()),
            e => (code::INTERNAL, e.to_string()),
        };
        self.fail(code, &why);
        Step::Failed { code, why }
    }

    /// Fails the connection with `code` (§7.1.7): queues a close frame
    /// (unless one was sent already) and stops reading.
    pub fn fail(&mut self, code: u16, reason: &str) {
        self.close(code, reason);
        self.done = true;
    }

    /// Starts the close handshake from this side (an app's close, a
    /// drain's 1001): queues the close frame; the peer's answer ends the
    /// connection (`Step::Closed`, then `Step::Gone`). A no-op once a
    /// close frame was sent.
    pub fn close(&mut self, code: u16, reason: &str) {
        // A control frame's payload is at most 125 bytes (§5.5): two for
        // the code, the reason cut at a character boundary.
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: Utf8Bytes::from(&reason[..end]),
        };
        let mut io = Io::new(Empty, &mut self.out, 0);
        // Errors say a close frame went out already, or the handshake is
        // over: nothing to add either way.
        let _ = self.ctx.close(&mut io, Some(frame));
    }

    /// Queues a text or binary message.
    pub fn send(&mut self, message: Message) -> Result<(), SendError> {
        if !self.ctx.can_write() {
            return Err(SendError::Closing);
        }
        let mut io = Io::new(Empty, &mut self.out, 0);
        self.ctx
            .write(&mut io, message)
            .map_err(|_| SendError::Closing)?;
        self.flush();
        Ok(())
    }

    /// Queues a ping (the host's keep-alive probe of a silent peer).
    pub fn ping(&mut self) {
        if self.ctx.can_write() {
            let mut io = Io::new(Empty, &mut self.out, 0);
            let _ = self.ctx.write(&mut io, Message::Ping(Bytes::new()));
            self.flush();
        }
    }

    /// Moves what tungstenite holds back (a pong, a close echo) to `out`.
    fn flush(&mut self) {
        let mut io = Io::new(Empty, &mut self.out, 0);
        let _ = self.ctx.flush(&mut io);
    }

    /// True once a close frame went either way: no data may be sent.
    pub fn closing(&self) -> bool {
        !self.ctx.can_write()
    }

    /// True once nothing more will be read (failed, or closed both ways).
    pub fn done(&self) -> bool {
        self.done
    }

    /// The frame bytes for the socket; the caller takes what it queues.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }
}

#[cfg(test)]
mod tests;
