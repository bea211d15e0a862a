//! The loop's side of an HTTP/2 connection: its reads through the machine,
//! each stream's request to the dispatcher once whole (its body read
//! first), answers and streamed answers out through `StreamExchange`, and
//! the streams' ends. A stream the client resets before its answer runs
//! its app's `on_gone` task; a request reset in the same read is never
//! dispatched.

use super::body_feed::BodyLink;
use super::clock::Stamp;
use super::conn::OUTPUT_BOUND;
use super::exchange::{Incoming, Pending};
use super::h2conn::exchange::StreamExchange;
use super::h2conn::Waiting;
use super::Server;
use crate::budget::Refusal;
use crate::http::answer::HostAnswer;
use crate::http::h2::machine::stream::Request;
use crate::http::h2::machine::Event;
use crate::http::parse::BodyKind;
use crate::http::response::Fixed;
use crate::http::HttpError;
use crate::inbox::{Answer, StreamStart};
use crate::poller::Token;

/// What `--max-buffered` must have left for a new stream to be served:
/// a stream window's worth of its answer (at most half the budget).
const STREAM_ROOM: usize = 64 << 10;

impl Server {
    /// Serves an HTTP/2 connection: reads while its output is under the
    /// bound, hands the bytes to the machine, dispatches the requests
    /// that became whole, frames what the answers have, writes.
    pub(super) fn pump_h2(&mut self, token: Token) {
        loop {
            let Some(conn) = self.conns.get_mut(token.0) else {
                return;
            };
            let read = !conn.output_full() && conn.h2_read();
            conn.h2_recv(self.clock.now(), &mut self.bufs);
            self.h2_events(token);
            let Some(conn) = self.conns.get_mut(token.0) else {
                return;
            };
            let before = conn.output_mark();
            let more = self::send(conn, &mut self.bufs);
            if let Err(e) = conn.flush(&mut self.bufs) {
                log::debug!("write to {} failed: {e}", conn.peer());
                self.close(token);
                return;
            }
            // Round again while bytes come in, or go out with more behind
            // them; on a transport that sends at the loop's next wait, not
            // when nothing moved (full, only a turn frees it).
            let moved = before.is_none() || conn.output_mark() != before;
            if !(read || more && moved) || conn.output_full() || conn.finished() {
                break;
            }
        }
        if let Some((s, _)) = self.conns.get_mut(token.0).and_then(|c| c.h2_parts()) {
            if let Some((code, why)) = s.machine.failure() {
                log::debug!("HTTP/2 connection error {}: {why}", code.name());
            }
            s.account();
        }
        self.settle(token);
    }

    /// Acts on what the machine reported: requests to dispatch, streams
    /// gone.
    fn h2_events(&mut self, token: Token) {
        let Some((session, _)) = self.conns.get_mut(token.0).and_then(|c| c.h2_parts()) else {
            return;
        };
        for event in session.take_events() {
            match event {
                Event::Head(stream) => self.h2_head(token, stream),
                Event::End(stream) => self.h2_end(token, stream),
                Event::Gone(stream) => {
                    let Some((session, _)) = self.conns.get_mut(token.0).and_then(|c| c.h2_parts())
                    else {
                        return;
                    };
                    if let Some(gone) = session.drop_slot(stream) {
                        self.run_gone(gone);
                    }
                }
            }
        }
    }

    /// A stream's head is whole: a refused one is answered now; one with a
    /// body is routed now (its app's body limit applies to what comes),
    /// and waits for its end, unless its app reads the body as it comes:
    /// that one is dispatched now, as HTTP/1.1 does.
    fn h2_head(&mut self, token: Token, stream: u32) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        let (peer, via) = (conn.peer().clone(), conn.via_index());
        let Some((session, out)) = conn.h2_parts() else {
            return;
        };
        match session.machine.take_request(stream) {
            Some(Request::Ready(head, buf)) => {
                let (route, streams) = match head.body {
                    BodyKind::None => (None, false),
                    _ => {
                        let (plan, route) = self.dispatcher.body_plan(&head, &buf, &peer, via);
                        let conn = &self.handles.settings.conn;
                        let max = if plan.stream {
                            conn.max_stream_body
                        } else {
                            conn.max_body
                        };
                        session
                            .machine
                            .set_body_limit(stream, plan.limit.unwrap_or(max));
                        if plan.stream {
                            session.machine.hold_window(stream);
                        }
                        (Some(route), plan.stream)
                    }
                };
                let waiting = Waiting { head, buf, route };
                if streams {
                    session.slot(stream).streams_body = true;
                    self.h2_dispatch(token, stream, waiting, Vec::new());
                } else {
                    session.slot(stream).waiting = Some(waiting);
                }
            }
            Some(Request::Refused(_)) => {
                let answer = HostAnswer::Http(HttpError::HeadTooLarge);
                let date = self.date.get();
                host_answer(session, out, stream, answer, date, &mut self.bufs);
            }
            _ => {}
        }
    }

    /// A stream's request has ended: one waiting for its body is
    /// dispatched with it (a body over its limit is answered 413).
    fn h2_end(&mut self, token: Token, stream: u32) {
        let Some((session, out)) = self.conns.get_mut(token.0).and_then(|c| c.h2_parts()) else {
            return;
        };
        let Some(waiting) = session.take_waiting(stream) else {
            // Dispatched with its head (its body streams), or refused.
            session.drop_slot_if_done(stream);
            return;
        };
        let (body, over) = session.machine.take_body(stream).unwrap_or_default();
        if over {
            let answer = HostAnswer::Http(HttpError::BodyTooLarge);
            let date = self.date.get();
            host_answer(session, out, stream, answer, date, &mut self.bufs);
            session.drop_slot_if_done(stream);
            return;
        }
        self.h2_dispatch(token, stream, waiting, body);
    }

    /// Hands stream `stream`'s request, with `body`, to the dispatcher; an
    /// answer given at once is queued. While `--max-buffered` (where the
    /// answers held for clients' windows count) has less than a stream's
    /// room left, a new stream is answered 503 instead: no app works for
    /// it.
    fn h2_dispatch(&mut self, token: Token, stream: u32, waiting: Waiting, body: Vec<u8>) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        let (peer, via) = (conn.peer().clone(), conn.via_index());
        let tls = conn.tls_session();
        let Some((session, out)) = conn.h2_parts() else {
            return;
        };
        let budget = &self.handles.budget;
        if !budget.has_room(STREAM_ROOM.min(budget.limit() / 2)) {
            budget.note_refused(Refusal::Stream);
            let answer = HostAnswer::Http(HttpError::OverBudget(budget.limit()));
            host_answer(
                session,
                out,
                stream,
                answer,
                self.date.get(),
                &mut self.bufs,
            );
            session.machine.give_back(waiting.buf);
            session.drop_slot_if_done(stream);
            return;
        }
        let Waiting {
            mut head,
            buf,
            route,
        } = waiting;
        if head.body != BodyKind::None {
            head.body = BodyKind::Length(body.len());
        }
        let head_only = &buf[head.method.clone()] == b"HEAD";
        let req = Incoming {
            head: &head,
            buf: &buf,
            body: &body,
            route,
            tls,
            peer: &peer,
            via,
        };
        let outcome = self.dispatcher.dispatch(req, token, self.clock.now());
        self.clock.advance_to(outcome.after);
        let answered = outcome.answer.is_some();
        let pending = Pending::begun(outcome.begun, head_only, answered);
        let slot = session.slot(stream);
        slot.id = pending.id;
        slot.pending = Some(pending);
        session.machine.give_back(buf);
        if let Some(answer) = outcome.answer {
            self.h2_answer(token, stream, answer);
        }
    }

    /// The app of request `id` gave its body sink.
    pub(super) fn h2_attach_body(&mut self, token: Token, id: u64, link: BodyLink) {
        if let Some((session, _)) = self.conns.get_mut(token.0).and_then(|c| c.h2_parts()) {
            session.attach_body(id, link);
        }
        self.pump_h2(token);
    }

    /// Queues `answer` on `stream` (its request's answer, given at once or
    /// come back through the inbox).
    pub(super) fn h2_answer(&mut self, token: Token, stream: u32, answer: Answer) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        let via = conn.via_index();
        let Some((session, out)) = conn.h2_parts() else {
            return;
        };
        let mut ex = StreamExchange {
            session,
            out,
            stream,
            via,
        };
        let at = Stamp {
            now: self.clock.now(),
            date: self.date.get(),
        };
        let (response, fixed): (_, Fixed) = match answer {
            Answer::Response(response, fixed) => (response, fixed),
            // A WebSocket needs HTTP/1.1's upgrade, which HTTP/2 has not
            // (RFC 9113 §8.6): its app's acceptance is answered 500.
            Answer::Upgrade(_) => (HostAnswer::AppFailed.response(), &[]),
        };
        self.dispatcher
            .finish(&mut ex, response, fixed, false, at, &mut self.bufs);
    }

    /// A deferred answer for request `id` on an HTTP/2 connection.
    pub(super) fn h2_completion(&mut self, token: Token, id: u64, answer: Answer) {
        let stream = self
            .conns
            .get_mut(token.0)
            .and_then(|c| c.h2_parts())
            .and_then(|(s, _)| s.waits_for(id).then(|| s.stream_of(id)).flatten());
        let Some(stream) = stream else {
            log::debug!("dropping the answer to request {id}: its stream is gone");
            return;
        };
        self.h2_answer(token, stream, answer);
        self.pump_h2(token);
    }

    /// A streamed answer's start, or more of it, for request `id` on an
    /// HTTP/2 connection.
    pub(super) fn h2_stream(&mut self, token: Token, id: u64, start: Option<StreamStart>) {
        let open = self.handles.stats.worker(self.worker).streams.clone();
        let at = Stamp {
            now: self.clock.now(),
            date: self.date.get(),
        };
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        let via = conn.via_index();
        let Some((session, out)) = conn.h2_parts() else {
            return;
        };
        if let Some(start) = start {
            let Some(stream) = session
                .waits_for(id)
                .then(|| session.stream_of(id))
                .flatten()
            else {
                start.line.close();
                return;
            };
            let mut ex = StreamExchange {
                session,
                out,
                stream,
                via,
            };
            self.dispatcher
                .start_stream(&mut ex, start, open, at, &mut self.bufs);
        } else if !session.streams_for(id) {
            return;
        }
        self.pump_h2(token);
    }

    /// The oldest request of an HTTP/2 connection outlived its app's
    /// timeout: that stream is answered 504 (the others go on).
    pub(super) fn expire_h2_app(&mut self, token: Token) {
        let Some((session, _)) = self.conns.get_mut(token.0).and_then(|c| c.h2_parts()) else {
            return;
        };
        let Some((id, slot)) = session.oldest_pending().map(|p| (p.id, p.slot)) else {
            return;
        };
        let Some(stream) = session.stream_of(id) else {
            return;
        };
        let gone = session
            .slot(stream)
            .pending
            .as_mut()
            .and_then(|p| p.gone.take());
        let app = slot.map_or_else(|| "?".into(), |s| self.handles.stats.app_name(s));
        log::warn!("app {app} did not answer request {id} (HTTP/2 stream {stream}) within app_timeout; answering 504");
        if let Some(gone) = gone {
            self.run_gone(gone);
        }
        let timeout = HostAnswer::AppTimeout.response();
        self.h2_answer(token, stream, Answer::Response(timeout, &[]));
        self.pump_h2(token);
    }

    /// Sends GOAWAY on every HTTP/2 connection (a drain): the streams open
    /// finish, no new one is served.
    pub(super) fn h2_go_away(&mut self) {
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_h2())
            .map(|(k, _)| k)
            .collect();
        for key in keys {
            if let Some(conn) = self.conns.get_mut(key) {
                let Some((session, out)) = conn.h2_parts() else {
                    continue;
                };
                session.machine.go_away(out.buf_for(&mut self.bufs));
            }
            self.pump_h2(Token(key));
        }
    }
}

/// Frames what the streams have to send (streamed answers' new bytes
/// first), up to the output bound; true if more could go at once.
fn send(
    conn: &mut super::conn::Conn<crate::listen::Accepted>,
    pool: &mut crate::http::reader::BufPool,
) -> bool {
    let Some((session, out)) = conn.h2_parts() else {
        return false;
    };
    let buf = out.buf_for(pool);
    session.feed_bodies(buf);
    session.pull_streams(OUTPUT_BOUND, buf);
    let more = session.machine.send_data(buf, OUTPUT_BOUND);
    session.report_streams();
    more
}

/// The host's own answer (a refusal) on `stream`, with no app.
fn host_answer(
    session: &mut super::h2conn::Session,
    out: &mut crate::http::output::Output,
    stream: u32,
    answer: HostAnswer,
    date: &str,
    pool: &mut crate::http::reader::BufPool,
) {
    log::debug!("HTTP/2 stream {stream}: {}", answer.status());
    let mut response = answer.response();
    let buf = out.buf_for(pool);
    session.send_answer(stream, &mut response, &[], false, date, buf);
}
