//! Streamed responses, the plain-Rust side: [`Responder::stream`](crate::Responder::stream)
//! starts one and hands back a [`Stream`] to send the body through, from
//! the event loop (a timer) or from any thread.
//!
//! The host frames the body (chunked on HTTP/1.1, close-delimited on
//! HTTP/1.0, nothing for HEAD, or the declared `Content-Length`) and keeps
//! a bounded queue per connection: [`Stream::send`] answers
//! [`Sent::WouldBlock`] (the chunk not taken) while the queue is full, and
//! [`Stream::on_drain`] runs a callback on the loop once it has room.

use crate::abi::{
    BodySinkBox, RawBodySink, RawBodySink_TO, ResponderBox, StreamBox, BODY_COMPLETE,
    BODY_TOO_LARGE, SEND_SENT, SEND_WOULD_BLOCK,
};
use crate::app::Responder;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RSlice;
use std::sync::{Arc, Mutex};

/// What became of a chunk handed to [`Stream::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Queued for the client.
    Ok,
    /// The connection's queue is full: the chunk was not taken. Send it
    /// again once the [`Stream::on_drain`] callback has run.
    WouldBlock,
    /// The client is gone or the stream was ended by the host (a stalled
    /// client past `--send-timeout`, a shutdown, a declared length
    /// overrun): stop producing.
    Closed,
}

impl Sent {
    pub(crate) fn from_wire(code: u8) -> Sent {
        match code {
            SEND_SENT => Sent::Ok,
            SEND_WOULD_BLOCK => Sent::WouldBlock,
            // SEND_CLOSED, and anything a newer host might answer.
            _ => Sent::Closed,
        }
    }
}

/// The body of a streamed response. Dropping it without [`finish`](Stream::finish)
/// ends the response abnormally (no terminating chunk; the connection is
/// closed), so a client can tell a truncated body from a complete one.
pub struct Stream {
    inner: Option<StreamBox>,
}

impl Stream {
    /// Wraps the host's stream (used by `Responder::stream`).
    pub(crate) fn from_raw(inner: StreamBox) -> Self {
        Stream { inner: Some(inner) }
    }

    /// Queues `chunk` without blocking (see [`Sent`]). An empty chunk is
    /// taken and sends nothing.
    pub fn send(&mut self, chunk: &[u8]) -> Sent {
        match &mut self.inner {
            Some(inner) => Sent::from_wire(inner.send(RSlice::from_slice(chunk))),
            None => Sent::Closed,
        }
    }

    /// Queues `chunk`, waiting while the queue is full: for producers on a
    /// pool thread (a blocking generator). The wait is bounded by the
    /// host's `--send-timeout` ([`Sent::WouldBlock`] after it). On an
    /// event loop thread it does not wait (it would stall the loop that
    /// drains the queue) and acts as [`send`](Stream::send).
    pub fn send_blocking(&mut self, chunk: &[u8]) -> Sent {
        match &mut self.inner {
            Some(inner) => Sent::from_wire(inner.send_blocking(RSlice::from_slice(chunk))),
            None => Sent::Closed,
        }
    }

    /// Runs `f` once on the connection's event loop when the queue has
    /// room (at once if it has room now), or when the stream closes (the
    /// next `send` then answers [`Sent::Closed`]). It must not block. A
    /// later call replaces a callback that has not run yet.
    pub fn on_drain(&mut self, f: impl FnOnce() + Send + 'static) {
        if let Some(inner) = &mut self.inner {
            inner.on_drain(crate::host::task(f));
        }
    }

    /// Hands the stream to `f` on the event loop once the queue has room
    /// (or the stream closed): [`on_drain`](Stream::on_drain) for a
    /// producer that moves the stream along, as after a
    /// [`Sent::WouldBlock`].
    pub fn resume_on_drain(self, f: impl FnOnce(Stream) + Send + 'static) {
        let parked = Arc::new(Mutex::new(None::<Stream>));
        let resume = parked.clone();
        // The lock is held until the stream is parked, so a callback run
        // at once on another thread waits for it.
        let mut slot = parked.lock().unwrap_or_else(|p| p.into_inner());
        let stream = slot.insert(self);
        stream.on_drain(move || {
            let stream = resume.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(stream) = stream {
                f(stream);
            }
        });
    }

    /// Ends the body; `Err(())` when it could not end well (the client is
    /// gone, or fewer bytes were sent than the declared length: the host
    /// then closes the connection).
    #[allow(clippy::result_unit_err)] // public API (COMPATIBILITY.md): the caller learns only whether it ended well
    pub fn finish(mut self) -> Result<(), ()> {
        match self.inner.take().map(|inner| inner.finish()) {
            Some(SEND_SENT) => Ok(()),
            _ => Err(()),
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("open", &self.inner.is_some())
            .finish()
    }
}

/// How a request body read as it arrives ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEnd {
    /// Whole: every byte was handed to `data`.
    Complete,
    /// Past the app's streamed-body limit (`max_stream_body`); answer 413, say.
    TooLarge,
    /// Cut short (the client left or stalled, or broke the chunked
    /// framing); an answer reaches the client only if it is still there.
    Broken,
}

/// Takes a request body as it arrives (see [`App::reads_body`](crate::App::reads_body)
/// and [`Responder::read_body`](crate::Responder::read_body)). Called on
/// the connection's event loop: `data` must not block; while it runs the
/// host reads nothing more from the client (the backpressure). A sink
/// whose `data` is heavy goes through
/// [`Responder::read_body_on_pool`](crate::Responder::read_body_on_pool)
/// instead, and is called on a blocking-pool thread, with the same
/// backpressure.
pub trait BodySink: Send + 'static {
    /// The next piece of the body, de-chunked, in order.
    fn data(&mut self, chunk: &[u8]);

    /// The body ended; answer the request with `responder`.
    fn end(self, end: BodyEnd, responder: Responder);
}

/// The plugin-side wrapper: panics stay in the plugin. A panic in `data`
/// drops the rest of the body and the responder (the host answers 500).
struct Sink<S> {
    sink: Option<S>,
}

impl<S: BodySink> RawBodySink for Sink<S> {
    fn data(&mut self, chunk: RSlice<'_, u8>) {
        if let Some(sink) = &mut self.sink {
            if !crate::export::guard(|| sink.data(chunk.as_slice())) {
                self.sink = None;
            }
        }
    }

    fn end(mut self, outcome: u8, responder: ResponderBox) {
        let Some(sink) = self.sink.take() else {
            return;
        };
        let end = match outcome {
            BODY_COMPLETE => BodyEnd::Complete,
            BODY_TOO_LARGE => BodyEnd::TooLarge,
            _ => BodyEnd::Broken,
        };
        let responder = Responder::from_raw(responder);
        // A panic drops the responder while unwinding: the host answers 500.
        let _ = crate::export::guard(move || sink.end(end, responder));
    }
}

/// Boxes an app's sink for the ABI.
pub(crate) fn sink_box(sink: impl BodySink) -> BodySinkBox {
    RawBodySink_TO::from_value(Sink { sink: Some(sink) }, TD_Opaque)
}
