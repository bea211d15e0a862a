//! Frames in: the preface, then each frame by its type's rules (RFC 9113
//! §5.1 stream states, §6 frames, §6.9 flow control). A connection error
//! ends the machine with GOAWAY; a stream error resets the stream.

use super::stream::{Request, Stream};
use super::{tally, Block, Event, Machine, Purpose, State};
use crate::http::h2::frame::{self, setting, Frame, FrameError, Head, HEAD_LEN, MAX_WINDOW};
use crate::http::h2::request::{check_trailer, Refused, RequestBuilder};
use crate::http::h2::{ErrorCode, PREFACE};
use std::time::Instant;

/// A header block's encoded size past which the connection is ended
/// (a CONTINUATION flood), as a multiple of the header list limit.
const BLOCK_FACTOR: usize = 4;

type Step = Result<(), FrameError>;

impl Machine {
    /// Takes the client's bytes: every whole frame in `input` is handled,
    /// and what the host answers at once (SETTINGS and PING
    /// acknowledgements, window updates, resets, GOAWAY) goes to `out`.
    /// Returns the bytes used; the rest (part of a frame) is for the next
    /// call, with more.
    pub fn recv(&mut self, input: &[u8], now: Instant, out: &mut Vec<u8>) -> usize {
        let mut used = 0;
        if self.state == State::Preface {
            let n = input.len().min(PREFACE.len());
            if input[..n] != PREFACE[..n] {
                self.fail(ErrorCode::Protocol, "not the HTTP/2 preface", out);
                return input.len();
            }
            if n < PREFACE.len() {
                return 0;
            }
            used = PREFACE.len();
            self.state = State::FirstSettings;
        }
        while self.state != State::Failed {
            let rest = &input[used..];
            let Some(head) = Head::parse(rest) else {
                break;
            };
            if head.len > self.params.max_frame_size as usize {
                self.fail(
                    ErrorCode::FrameSize,
                    "a frame over SETTINGS_MAX_FRAME_SIZE",
                    out,
                );
                return input.len();
            }
            let Some(payload) = rest.get(HEAD_LEN..HEAD_LEN + head.len) else {
                break;
            };
            used += HEAD_LEN + head.len;
            let step = match frame::decode(&head, payload) {
                Ok(f) => self.frame(f, now, out),
                Err(e) => Err(e),
            };
            match step {
                Ok(()) => {}
                Err(FrameError::Conn(code, why)) => {
                    self.fail(code, why, out);
                    return input.len();
                }
                Err(FrameError::Stream(id, code, _why)) => self.stream_error(id, code, now, out),
            }
        }
        if self.state == State::Failed {
            return input.len();
        }
        used
    }

    /// A stream error: the stream is reset (if the client has opened it);
    /// a reset the client provoked counts against its reset rate.
    fn stream_error(&mut self, id: u32, code: ErrorCode, now: Instant, out: &mut Vec<u8>) {
        if let Some(i) = self.streams.iter().position(|s| s.id == id) {
            self.streams.swap_remove(i);
            self.events.push(Event::Gone(id));
        }
        frame::put_rst(out, id, code);
        tally(&mut self.counts.resets_sent, code);
        if !self.guard.resets.take(now) {
            self.fail(ErrorCode::EnhanceYourCalm, "too many streams reset", out);
        }
    }

    /// A control frame: false when the client is over its rate.
    fn control(&mut self, now: Instant) -> Step {
        match self.guard.control.take(now) {
            true => Ok(()),
            false => Err(FrameError::Conn(
                ErrorCode::EnhanceYourCalm,
                "too many control frames",
            )),
        }
    }

    fn frame(&mut self, f: Frame<'_>, now: Instant, out: &mut Vec<u8>) -> Step {
        if let Some(b) = &self.block {
            // Nothing may come between a block's frames (RFC 9113 §6.10).
            let ok = matches!(f, Frame::Continuation { stream, .. } if stream == b.stream);
            if !ok {
                return conn(ErrorCode::Protocol, "a frame inside a header block");
            }
        }
        if self.state == State::FirstSettings && !matches!(f, Frame::Settings { ack: false, .. }) {
            return conn(ErrorCode::Protocol, "the preface not followed by SETTINGS");
        }
        match f {
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.data(stream, end_stream, data, flow_len, now, out),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
                ..
            } => self.headers(stream, end_stream, end_headers, block, now, out),
            Frame::Continuation {
                end_headers, block, ..
            } => self.continuation(end_headers, block, now, out),
            Frame::Priority { .. } => self.control(now),
            Frame::RstStream { stream, code } => self.rst(stream, code, now),
            Frame::Settings { ack, params } => self.settings(ack, params, now, out),
            Frame::PushPromise { .. } => conn(ErrorCode::Protocol, "PUSH_PROMISE from a client"),
            Frame::Ping { ack, data } => {
                self.control(now)?;
                if !ack {
                    frame::put_ping(out, true, data);
                }
                Ok(())
            }
            Frame::GoAway { code, .. } => {
                tally(
                    &mut self.counts.goaways_received,
                    ErrorCode::from_wire(code),
                );
                self.peer_goaway = true;
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.window_update(stream, increment, now),
            Frame::Unknown { .. } => self.control(now),
        }
    }

    fn data(
        &mut self,
        id: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Step {
        self.conn_recv -= i64::from(flow_len);
        if self.conn_recv < 0 {
            return conn(ErrorCode::FlowControl, "DATA past the connection's window");
        }
        // The connection's window opens again as the bytes come: each
        // stream's body is bounded by its own window and limit.
        self.conn_unacked += flow_len;
        if self.conn_unacked >= self.params.conn_window / 2 {
            frame::put_window_update(out, 0, self.conn_unacked);
            self.conn_recv += i64::from(self.conn_unacked);
            self.conn_unacked = 0;
        }
        if id > self.last_id {
            return conn(ErrorCode::Protocol, "DATA on an idle stream");
        }
        if flow_len == 0 && !end_stream {
            self.control(now)?;
        }
        let half = self.params.stream_window / 2;
        let Some(s) = self.stream_mut(id) else {
            return Err(FrameError::Stream(
                id,
                ErrorCode::StreamClosed,
                "DATA on a closed stream",
            ));
        };
        if s.recv_closed {
            return Err(FrameError::Stream(
                id,
                ErrorCode::StreamClosed,
                "DATA after END_STREAM",
            ));
        }
        s.recv_window -= i64::from(flow_len);
        if s.recv_window < 0 {
            return Err(FrameError::Stream(
                id,
                ErrorCode::FlowControl,
                "DATA past the stream's window",
            ));
        }
        s.received += data.len() as u64;
        if s.content_length.is_some_and(|n| s.received > n) {
            return Err(FrameError::Stream(
                id,
                ErrorCode::Protocol,
                "DATA past content-length",
            ));
        }
        if !s.discard && s.received > s.body_limit as u64 {
            s.discard = true;
            s.body = Vec::new();
        }
        if !s.discard {
            s.body.extend_from_slice(data);
        }
        s.recv_unacked += flow_len;
        if end_stream {
            return self.request_ended(id);
        } else if s.recv_unacked >= half && !s.held {
            frame::put_window_update(out, id, s.recv_unacked);
            s.recv_window += i64::from(s.recv_unacked);
            s.recv_unacked = 0;
        }
        Ok(())
    }

    fn headers(
        &mut self,
        id: u32,
        end_stream: bool,
        end_headers: bool,
        block: &[u8],
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Step {
        if id.is_multiple_of(2) {
            return conn(ErrorCode::Protocol, "HEADERS on an even stream id");
        }
        let purpose = match self.stream(id) {
            Some(s) if s.recv_closed => Purpose::Drop(Some(ErrorCode::StreamClosed)),
            Some(_) if !end_stream => Purpose::Drop(Some(ErrorCode::Protocol)),
            Some(_) => Purpose::Trailers,
            None if id <= self.last_id => {
                return conn(ErrorCode::StreamClosed, "HEADERS on a closed stream");
            }
            None => {
                self.last_id = id;
                if self.goaway.is_some() {
                    Purpose::Drop(None)
                } else if self.streams.len() >= self.params.max_concurrent_streams as usize {
                    self.counts.refused += 1;
                    Purpose::Drop(Some(ErrorCode::RefusedStream))
                } else {
                    let window = self.peer_window;
                    self.streams.push(Stream::new(
                        id,
                        self.params.stream_window,
                        window,
                        usize::MAX,
                    ));
                    self.counts.streams += 1;
                    Purpose::Request
                }
            }
        };
        let block = Block {
            stream: id,
            end_stream,
            purpose,
            bytes: block.to_vec(),
        };
        self.block = Some(block);
        if end_headers {
            return self.end_block(now, out);
        }
        self.check_block_size()
    }

    fn continuation(
        &mut self,
        end_headers: bool,
        bytes: &[u8],
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Step {
        let Some(b) = &mut self.block else {
            return conn(ErrorCode::Protocol, "CONTINUATION without HEADERS");
        };
        b.bytes.extend_from_slice(bytes);
        if bytes.is_empty() && !end_headers {
            self.control(now)?;
        }
        if end_headers {
            return self.end_block(now, out);
        }
        self.check_block_size()
    }

    /// A block over `BLOCK_FACTOR` header lists ends the connection: its
    /// bytes are held until it ends, so it must not grow without bound.
    fn check_block_size(&self) -> Step {
        let cap = (self.params.max_header_list as usize).max(16 * 1024) * BLOCK_FACTOR;
        match &self.block {
            Some(b) if b.bytes.len() > cap => {
                conn(ErrorCode::EnhanceYourCalm, "a header block too large")
            }
            _ => Ok(()),
        }
    }

    /// A whole header block: decoded (whatever it is for, to keep the
    /// decoder in step with the client's encoder), then applied.
    fn end_block(&mut self, now: Instant, out: &mut Vec<u8>) -> Step {
        let Some(block) = self.block.take() else {
            return Ok(());
        };
        let id = block.stream;
        let max_list = self.params.max_header_list as usize;
        let spare = self.spare.pop().unwrap_or_default();
        let mut builder = RequestBuilder::new(spare, self.params.max_headers);
        let mut trailer_error = None;
        let decoded = match block.purpose {
            Purpose::Request => self
                .decoder
                .decode(&block.bytes, max_list, &mut |n, v| builder.field(n, v)),
            Purpose::Trailers => self.decoder.decode(&block.bytes, max_list, &mut |n, v| {
                if let Err(e) = check_trailer(n, v) {
                    trailer_error.get_or_insert(e);
                }
            }),
            Purpose::Drop(_) => self.decoder.decode(&block.bytes, max_list, &mut |_, _| {}),
        };
        let decoded = match decoded {
            Ok(d) => d,
            Err(_) => {
                return conn(
                    ErrorCode::Compression,
                    "a header block that does not decode",
                )
            }
        };
        match block.purpose {
            Purpose::Drop(None) => Ok(()),
            Purpose::Drop(Some(code)) => {
                self.stream_error(id, code, now, out);
                Ok(())
            }
            Purpose::Trailers => {
                if let Some(why) = trailer_error {
                    return Err(FrameError::Stream(id, ErrorCode::Protocol, why));
                }
                self.request_ended(id)
            }
            Purpose::Request => {
                if decoded.over_limit {
                    builder.too_large();
                }
                self.request(id, builder.finish(block.end_stream), block.end_stream)
            }
        }
    }

    fn request(
        &mut self,
        id: u32,
        built: Result<(crate::http::parse::Head, Vec<u8>, Option<u64>), Refused>,
        end_stream: bool,
    ) -> Step {
        let request = match built {
            Ok((head, buf, length)) => {
                if let Some(s) = self.stream_mut(id) {
                    s.content_length = length;
                }
                Request::Ready(head, buf)
            }
            Err(Refused::Malformed(why)) => {
                return Err(FrameError::Stream(id, ErrorCode::Protocol, why))
            }
            Err(Refused::TooManyHeaders | Refused::TooLarge) => Request::Refused(431),
        };
        let Some(s) = self.stream_mut(id) else {
            return Ok(());
        };
        s.request = request;
        s.recv_closed = end_stream;
        self.events.push(Event::Head(id));
        if end_stream {
            self.events.push(Event::End(id));
        }
        Ok(())
    }

    fn rst(&mut self, id: u32, code: u32, now: Instant) -> Step {
        if id > self.last_id {
            return conn(ErrorCode::Protocol, "RST_STREAM on an idle stream");
        }
        tally(&mut self.counts.resets_received, ErrorCode::from_wire(code));
        self.control(now)?;
        let Some(i) = self.streams.iter().position(|s| s.id == id) else {
            return Ok(());
        };
        let s = self.streams.swap_remove(i);
        self.events.push(Event::Gone(id));
        // A stream reset before its answer ended cost the host work for
        // nothing: Rapid Reset is many of these.
        if !s.sent_end && !self.guard.resets.take(now) {
            return conn(ErrorCode::EnhanceYourCalm, "too many streams reset");
        }
        Ok(())
    }

    fn settings(&mut self, ack: bool, params: &[u8], now: Instant, out: &mut Vec<u8>) -> Step {
        if self.state == State::FirstSettings {
            self.state = State::Open;
        } else {
            self.control(now)?;
        }
        if ack {
            return Ok(());
        }
        for (id, value) in frame::settings(params) {
            match id {
                setting::HEADER_TABLE_SIZE => self.encoder.set_peer_max_size(value as usize),
                setting::ENABLE_PUSH if value > 1 => {
                    return conn(ErrorCode::Protocol, "SETTINGS_ENABLE_PUSH not 0 or 1");
                }
                setting::INITIAL_WINDOW_SIZE => {
                    if value > MAX_WINDOW {
                        return conn(
                            ErrorCode::FlowControl,
                            "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1",
                        );
                    }
                    let delta = i64::from(value) - self.peer_window;
                    self.peer_window = i64::from(value);
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > i64::from(MAX_WINDOW) {
                            return conn(ErrorCode::FlowControl, "a stream window over 2^31-1");
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    let v = value as usize;
                    if !(frame::MIN_MAX_FRAME..=frame::MAX_MAX_FRAME).contains(&v) {
                        return conn(ErrorCode::Protocol, "SETTINGS_MAX_FRAME_SIZE out of range");
                    }
                    self.peer_max_frame = v;
                }
                _ => {}
            }
        }
        frame::put_settings_ack(out);
        Ok(())
    }

    fn window_update(&mut self, id: u32, increment: u32, now: Instant) -> Step {
        if increment < 1024 {
            // A trickle of tiny updates makes the host frame tiny DATA.
            self.control(now)?;
        }
        if id == 0 {
            self.conn_send += i64::from(increment);
            if self.conn_send > i64::from(MAX_WINDOW) {
                return conn(ErrorCode::FlowControl, "the connection window over 2^31-1");
            }
            return Ok(());
        }
        if id > self.last_id {
            return conn(ErrorCode::Protocol, "WINDOW_UPDATE on an idle stream");
        }
        let Some(s) = self.stream_mut(id) else {
            return Ok(());
        };
        s.send_window += i64::from(increment);
        if s.send_window > i64::from(MAX_WINDOW) {
            return Err(FrameError::Stream(
                id,
                ErrorCode::FlowControl,
                "a stream window over 2^31-1",
            ));
        }
        Ok(())
    }

    /// The client ended stream `id` (END_STREAM on DATA or trailers): its
    /// body must be as long as it said.
    fn request_ended(&mut self, id: u32) -> Step {
        let Some(s) = self.stream_mut(id) else {
            return Ok(());
        };
        s.recv_closed = true;
        if s.content_length.is_some_and(|n| s.received != n) {
            let why = "DATA short of content-length";
            return Err(FrameError::Stream(id, ErrorCode::Protocol, why));
        }
        self.events.push(Event::End(id));
        self.finish_if_done(id);
        Ok(())
    }

    /// Lets a stream go once both sides ended it.
    pub(super) fn finish_if_done(&mut self, id: u32) {
        if let Some(i) = self.streams.iter().position(|s| s.id == id && s.is_done()) {
            self.streams.swap_remove(i);
        }
    }
}

fn conn(code: ErrorCode, why: &'static str) -> Step {
    Err(FrameError::Conn(code, why))
}
