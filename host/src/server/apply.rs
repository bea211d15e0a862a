//! What the loop does with each kind of item other threads leave in its
//! inbox (`crate::inbox`): timers set, `on_gone` tasks, answers, streamed
//! answers' notices, request-body sinks and their notices, WebSocket
//! notices. Each kind has one method; an item for a connection or request
//! that has gone is dropped (or, for an `on_gone` task, run now).

use super::body_feed::{BodyLink, LoopAddr};
use super::clock::Stamp;
use super::exchange::Gone;
use super::Server;
use crate::inbox::{BodyAttach, Completion, GoneTask, StreamNotice};
use crate::poller::Token;

impl Server {
    /// Applies what the inbox holds, kind by kind: timers, then `on_gone`
    /// tasks before the answers (a task is registered before its request's
    /// answer is given, so one for a request no longer pending is for a
    /// request abandoned already, and runs now), then answers, streams,
    /// bodies and WebSockets.
    pub(super) fn apply_inbox(&mut self) {
        if !self.queue.drain(&mut self.inbox) {
            return;
        }
        let mut inbox = std::mem::take(&mut self.inbox);
        for (at, app, task) in inbox.timers.drain(..) {
            self.timers.add(at, app, task);
        }
        for task in inbox.gone.drain(..) {
            self.on_gone_task(task);
        }
        for completion in inbox.completions.drain(..) {
            self.on_completion(completion);
        }
        for notice in inbox.streams.drain(..) {
            self.on_stream(notice);
        }
        for attach in inbox.bodies.drain(..) {
            self.on_body_sink(attach);
        }
        for (token, id) in inbox.body_notices.drain(..) {
            self.on_body_notice(token, id);
        }
        for (token, id) in inbox.ws_notices.drain(..) {
            self.on_ws_notice(token, id);
        }
        self.inbox = inbox;
    }

    /// An app's `on_gone` task for a request: kept with it while it is
    /// pending, run now if it is not.
    fn on_gone_task(&mut self, g: GoneTask) {
        let gone = Gone {
            task: g.task,
            slot: g.slot,
        };
        let refused = match self.conns.get_mut(g.token.0) {
            Some(conn) => conn.set_gone(g.id, gone).err(),
            None => Some(gone),
        };
        if let Some(gone) = refused {
            self.run_gone(gone);
        }
    }

    /// A deferred answer: queued on its request's connection and written,
    /// or dropped if that request is no longer waiting.
    fn on_completion(&mut self, c: Completion) {
        if self.conns.get(c.token.0).is_some_and(|conn| conn.is_h2()) {
            return self.h2_completion(c.token, c.id, c.answer);
        }
        let Some(conn) = self
            .conns
            .get_mut(c.token.0)
            .filter(|conn| conn.waits_for(c.id))
        else {
            log::debug!(
                "dropping the answer to request {}: its connection is gone",
                c.id
            );
            return;
        };
        let at = Stamp {
            now: self.clock.now(),
            date: self.date.get(),
        };
        self.dispatcher
            .answer(conn, c.token, c.answer, at, &mut self.bufs);
        // Bytes that came while the app worked were reported (readiness
        // is kept until a read drains it, and a connection that stopped
        // watching is told again when its interest comes back): no read
        // on the chance, which on a keep-alive connection is one
        // `WouldBlock` per request.
        self.pump(c.token);
    }

    /// A streamed answer started, or its app sent more or ended it: the
    /// chunks go to the connection's output and out. A notice for a
    /// connection that has gone closes the line (the app's next send
    /// answers closed).
    fn on_stream(&mut self, notice: StreamNotice) {
        let StreamNotice { token, id, start } = notice;
        if self.conns.get(token.0).is_some_and(|conn| conn.is_h2()) {
            return self.h2_stream(token, id, start);
        }
        let draining = self.handles.control.draining();
        let Some(conn) = self.conns.get_mut(token.0) else {
            if let Some(start) = start {
                start.line.close();
            }
            return;
        };
        if let Some(start) = start {
            if !conn.waits_for(id) {
                start.line.close();
                return;
            }
            let open = self.handles.stats.worker(self.worker).streams.clone();
            let at = Stamp {
                now: self.clock.now(),
                date: self.date.get(),
            };
            self.dispatcher
                .start_stream(conn, start, open, at, &mut self.bufs);
        } else if !conn.streams_for(id) {
            return;
        }
        conn.pull_stream(&mut self.bufs, draining);
        // Pipelined bytes may wait behind a stream that just ended.
        conn.note_ready(true, false);
        self.pump(token);
    }

    /// An app's sink for its request's streamed body: attached to the
    /// connection (fed on the pool when the app asked for it and there is
    /// one), which reads the body on; dropped (the sink hears the body
    /// broke) if the request has gone.
    fn on_body_sink(&mut self, attach: BodyAttach) {
        let link = match (&self.handles.pool, attach.on_pool) {
            (Some(pool), true) => {
                let addr = LoopAddr {
                    inbox: self.queue.clone(),
                    token: attach.token,
                    id: attach.id,
                };
                BodyLink::on_pool(attach.sink, attach.responder, pool.clone(), addr)
            }
            // No pool (`--blocking-on-loop`): on the loop.
            _ => BodyLink::new(attach.sink, attach.responder),
        };
        if self
            .conns
            .get(attach.token.0)
            .is_some_and(|conn| conn.is_h2())
        {
            return self.h2_attach_body(attach.token, attach.id, link);
        }
        match self.conns.get_mut(attach.token.0) {
            Some(conn) if conn.waits_for(attach.id) => {
                conn.attach_body(link);
                self.pump(attach.token);
            }
            _ => drop(link),
        }
    }

    /// A pool sink finished its piece of request `id`'s body: the body is
    /// read on.
    fn on_body_notice(&mut self, token: Token, id: u64) {
        if self.conns.get(token.0).is_some_and(|conn| conn.is_h2()) {
            return self.pump_h2(token);
        }
        if let Some(conn) = self.conns.get_mut(token.0).filter(|c| c.waits_for(id)) {
            conn.note_ready(true, false);
            self.pump(token);
        }
    }

    /// A WebSocket's app queued messages: they go out.
    fn on_ws_notice(&mut self, token: Token, id: u64) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        if conn.link().is_some_and(|link| link.id() == id) {
            conn.take_outgoing(self.clock.now(), &mut self.bufs);
            self.pump_ws(token);
        }
    }
}
