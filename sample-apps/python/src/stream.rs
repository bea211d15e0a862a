//! The streaming sink: a response iterable's chunks go to the client as the
//! application produces them, through the host's streamed responses.
//!
//! Collected instead (one response, as [`Buffered`] does) when streaming
//! gains nothing: the application returned a list of at most one item
//! (and declared no longer `Content-Length` than [`COLLECT_LIMIT`]), or
//! declared a `Content-Length` of at most [`COLLECT_LIMIT`] (a framework's
//! rendered page: Django's `HttpResponse`). Otherwise the head goes out at
//! the first body bytes and each chunk follows as it comes: with the
//! declared `Content-Length` when there is one, chunked otherwise
//! (close-delimited on HTTP/1.0). Either way a declared length is held to
//! ([`Declared`]): collecting stops at it, so it is bounded too.

use crate::declared::Declared;
use crate::sink::{head_response, server_error, Buffered, Head, Sink};
use stoa_app_api::{log, Responder, Sent, Stream};

/// A declared body at most this long is collected and answered whole.
pub const COLLECT_LIMIT: u64 = 64 * 1024;

/// Where the response stands.
enum State {
    /// Before the head.
    Waiting(Responder),
    /// Collected, answered at `finish`; `over` once the application went
    /// past its declared length.
    Whole {
        buffered: Box<Buffered>,
        declared: Option<Declared>,
        over: bool,
    },
    /// Streaming.
    Open {
        stream: Stream,
        declared: Option<Declared>,
    },
    /// Over (the client is gone, or a step failed).
    Gone,
}

/// The streaming sink of one response.
pub struct Streaming {
    state: State,
    /// The request is a HEAD: a body short of its declared length is
    /// normal (the host sends none anyway).
    head_only: bool,
}

impl Streaming {
    pub fn new(responder: Responder, head_only: bool) -> Self {
        Streaming {
            state: State::Waiting(responder),
            head_only,
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

/// True for statuses whose response never carries a body (RFC 9110).
fn bodiless(status: u16) -> bool {
    status < 200 || status == 204 || status == 304
}

/// Sends `buffered`'s head and body under the declared length, as a sized
/// stream: finished (`finish`, which ends the connection when the body is
/// short), or dropped unfinished, which closes the connection after the
/// bytes queued.
fn send_declared(buffered: Buffered, declared: Declared, finish: bool) {
    let (responder, head, body) = buffered.into_parts();
    let Some(head) = head else {
        return responder.respond(server_error("the application sent no status"));
    };
    let stream = responder.stream_sized(head_response(head).with_body(body), declared.length);
    if finish {
        let _ = stream.finish();
    }
}

impl Sink for Streaming {
    fn start(&mut self, head: Head, whole: bool) {
        let State::Waiting(responder) = std::mem::replace(&mut self.state, State::Gone) else {
            return;
        };
        // A 1xx, 204 or 304 has no body whatever its Content-Length says
        // (a 304's is the selected representation's): nothing to hold to.
        let length = declared_length(&head).filter(|_| !bodiless(head.status));
        let small = length.map_or(whole, |l| l <= COLLECT_LIMIT);
        let declared = length.map(Declared::new);
        self.state = if small {
            let mut buffered = Box::new(Buffered::new(responder));
            buffered.start(head, whole);
            State::Whole {
                buffered,
                declared,
                over: false,
            }
        } else {
            let response = head_response(head);
            State::Open {
                stream: match length {
                    Some(length) => responder.stream_sized(response, length),
                    None => responder.stream(response),
                },
                declared,
            }
        };
    }

    fn write(&mut self, chunk: &[u8]) -> bool {
        match &mut self.state {
            State::Whole {
                buffered,
                declared,
                over,
            } => {
                let Some(declared) = declared else {
                    return buffered.write(chunk);
                };
                let (fits, past) = declared.take(chunk);
                buffered.write(fits);
                // Answered at `finish` (without the interpreter's lock).
                *over |= past;
                !past
            }
            // On a pool thread: waits while the connection's queue is full
            // (bounded by the host's --send-timeout).
            State::Open { stream, declared } => {
                let (fits, past) = match declared {
                    Some(declared) => declared.take(chunk),
                    None => (chunk, false),
                };
                let sent = fits.is_empty() || stream.send_blocking(fits) == Sent::Ok;
                if sent && !past {
                    return true;
                }
                match (sent, declared) {
                    (true, Some(declared)) => declared.log_overrun(),
                    _ => log::debug!("the client stopped taking the streamed response"),
                }
                // Dropped unfinished: the connection closes after what was
                // queued.
                self.state = State::Gone;
                false
            }
            State::Waiting(_) | State::Gone => false,
        }
    }

    fn calls_host(&self) -> bool {
        matches!(self.state, State::Open { .. })
    }

    fn finish(self: Box<Self>) {
        let head_only = self.head_only;
        match self.state {
            State::Waiting(responder) => {
                responder.respond(server_error("the application sent no status"))
            }
            State::Whole {
                buffered,
                declared: Some(declared),
                over,
            } if over || (declared.short() && !head_only) => {
                if over {
                    declared.log_overrun();
                } else {
                    declared.log_short();
                }
                send_declared(*buffered, declared, !over);
            }
            State::Whole { buffered, .. } => buffered.finish(),
            State::Open { stream, declared } => {
                if declared.is_some_and(|d| d.short() && !head_only) {
                    declared.inspect(Declared::log_short);
                }
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
            State::Whole { buffered, .. } => buffered.abort(why),
            // The head has gone: dropping the stream unfinished ends the
            // response abnormally, so the client sees a truncated body.
            State::Open { stream, .. } => drop(stream),
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
            let mut sink = Box::new(Streaming::new(responder, false));
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
    fn a_bodiless_status_is_not_held_to_its_content_length() {
        assert!(bodiless(304) && bodiless(204) && bodiless(101) && !bodiless(200));
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
