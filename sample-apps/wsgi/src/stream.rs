//! The streaming sink: a response iterable's chunks go to the client as the
//! application produces them, through the host's streamed responses.
//!
//! Collected instead (one response, as [`Buffered`] does) when streaming
//! gains nothing: the application returned a list of at most one item, or
//! declared a `Content-Length` of at most [`COLLECT_LIMIT`] (a framework's
//! rendered page: Django's `HttpResponse`). Otherwise the head goes out at
//! the first body bytes and each chunk follows as it comes: with the
//! declared `Content-Length` when there is one (the host holds the
//! application to it), chunked otherwise (close-delimited on HTTP/1.0).

use crate::sink::{head_response, server_error, Buffered, Head, Sink};
use stoa_app_api::{log, Responder, Sent, Stream};

/// A declared body at most this long is collected and answered whole.
pub const COLLECT_LIMIT: u64 = 64 * 1024;

/// Where the response stands.
enum State {
    /// Before the head.
    Waiting(Responder),
    /// Collected, answered at `finish`.
    Whole(Box<Buffered>),
    /// Streaming.
    Open(Stream),
    /// Over (the client is gone, or a step failed).
    Gone,
}

/// The streaming sink of one response.
pub struct Streaming {
    state: State,
}

impl Streaming {
    pub fn new(responder: Responder) -> Self {
        Streaming {
            state: State::Waiting(responder),
        }
    }
}

/// The `Content-Length` the application declared, if it is a number.
fn declared_length(head: &Head) -> Option<u64> {
    head.headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
}

impl Sink for Streaming {
    fn start(&mut self, head: Head, whole: bool) {
        let State::Waiting(responder) = std::mem::replace(&mut self.state, State::Gone) else {
            return;
        };
        let length = declared_length(&head);
        self.state = if whole || length.is_some_and(|l| l <= COLLECT_LIMIT) {
            let mut buffered = Box::new(Buffered::new(responder));
            buffered.start(head, whole);
            State::Whole(buffered)
        } else {
            let response = head_response(head);
            State::Open(match length {
                Some(length) => responder.stream_sized(response, length),
                None => responder.stream(response),
            })
        };
    }

    fn write(&mut self, chunk: &[u8]) -> bool {
        match &mut self.state {
            State::Whole(buffered) => buffered.write(chunk),
            // On a pool thread: waits while the connection's queue is full
            // (bounded by the host's --send-timeout).
            State::Open(stream) => match stream.send_blocking(chunk) {
                Sent::Ok => true,
                Sent::WouldBlock | Sent::Closed => {
                    log::debug!("the client stopped taking the streamed response");
                    self.state = State::Gone;
                    false
                }
            },
            State::Waiting(_) | State::Gone => false,
        }
    }

    fn calls_host(&self) -> bool {
        matches!(self.state, State::Open(_))
    }

    fn finish(self: Box<Self>) {
        match self.state {
            State::Waiting(responder) => {
                responder.respond(server_error("the application sent no status"))
            }
            State::Whole(buffered) => buffered.finish(),
            State::Open(stream) => {
                if stream.finish().is_err() {
                    log::debug!("a streamed response ended short (client gone, or under its Content-Length)");
                }
            }
            State::Gone => {}
        }
    }

    fn abort(self: Box<Self>, why: &str) {
        match self.state {
            State::Waiting(responder) => responder.respond(server_error(why)),
            State::Whole(buffered) => buffered.abort(why),
            // The head has gone: dropping the stream unfinished ends the
            // response abnormally, so the client sees a truncated body.
            State::Open(stream) => drop(stream),
            State::Gone => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use stoa_app_api::testing::{outcome, Outcome};
    use stoa_app_api::{App, Request, Response};

    /// An app that drives a `Streaming` sink with a head and chunks.
    struct Script {
        headers: &'static [(&'static str, &'static str)],
        whole: bool,
        fail: bool,
    }

    impl App for Script {
        fn handle(&self, _request: &Request<'_>, responder: stoa_app_api::Responder) {
            let mut sink = Box::new(Streaming::new(responder));
            let headers = self
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()));
            sink.start(
                Head {
                    status: 200,
                    headers: headers.collect(),
                },
                self.whole,
            );
            assert!(sink.write(b"ab") && sink.write(b"cd"));
            if self.fail {
                sink.abort("failed");
            } else {
                sink.finish();
            }
        }
    }

    fn run(script: Script) -> Response {
        match outcome(
            &script,
            &Request::sample("GET", "", "/", ""),
            Duration::from_secs(5),
        ) {
            Outcome::Answered(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn streamed_collected_or_sized_the_body_is_whole() {
        for (headers, whole) in [
            (&[][..], false),
            (&[][..], true),
            (&[("Content-Length", "4")][..], false),
            (&[("Content-Length", "100000")][..], false),
        ] {
            let r = run(Script {
                headers,
                whole,
                fail: false,
            });
            assert_eq!(
                (r.status, r.body.as_slice()),
                (200, &b"abcd"[..]),
                "{headers:?} {whole}"
            );
        }
    }

    #[test]
    fn a_failure_before_streaming_is_a_500() {
        let r = run(Script {
            headers: &[],
            whole: true,
            fail: true,
        });
        assert_eq!(r.status, 500);
        assert_eq!(
            declared_length(&Head {
                status: 200,
                headers: vec![("content-length".into(), " 12 ".into())]
            }),
            Some(12)
        );
    }
}
