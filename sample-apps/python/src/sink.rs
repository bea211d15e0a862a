//! Where a WSGI response goes: a small trait between the PEP 3333 driver
//! and the host's responder, so the driver does not care whether the body
//! is collected and answered in one piece or sent as it is produced.

use stoa_app_api::{Responder, Response};

/// The status line's code and the headers, as `start_response` checked them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

/// The receiving end of one response. `start` comes once, before any
/// `write`; then `finish` (the body is complete) or `abort` (the
/// application failed: answer 500 if nothing was sent, else cut the
/// response short).
pub trait Sink: Send {
    /// The status and headers (the host adds `Content-Length`, `Date`,
    /// `Server` and `Connection` itself). `whole` says the body is known
    /// to come in one piece (the application returned a list of at most
    /// one item), so there is nothing to gain from streaming it.
    fn start(&mut self, head: Head, whole: bool);
    /// A piece of the body; `false` once the client is gone (the
    /// application is then asked to stop: its iterable is closed).
    fn write(&mut self, chunk: &[u8]) -> bool;
    /// True if `write` calls the host (and may block): the driver then
    /// releases the interpreter around it.
    fn calls_host(&self) -> bool {
        false
    }
    /// The body is complete.
    fn finish(self: Box<Self>);
    /// The application failed; `why` is a short text for the 500 body.
    fn abort(self: Box<Self>, why: &str);
}

/// The body collected and answered in one response when the application
/// is done (the streaming sink's way for a body that comes in one piece).
pub struct Buffered {
    responder: Responder,
    head: Option<Head>,
    body: Vec<u8>,
}

impl Buffered {
    pub fn new(responder: Responder) -> Self {
        Buffered {
            responder,
            head: None,
            body: Vec::new(),
        }
    }
}

impl Buffered {
    /// The responder, the head (if `start` came) and the body so far.
    pub fn into_parts(self) -> (Responder, Option<Head>, Vec<u8>) {
        let Buffered {
            responder,
            head,
            body,
        } = self;
        (responder, head, body)
    }
}

impl Sink for Buffered {
    fn start(&mut self, head: Head, _whole: bool) {
        self.head = Some(head);
    }

    fn write(&mut self, chunk: &[u8]) -> bool {
        self.body.extend_from_slice(chunk);
        true
    }

    fn finish(self: Box<Self>) {
        let Buffered {
            responder,
            head,
            body,
        } = *self;
        let Some(head) = head else {
            return responder.respond(server_error("the application sent no status"));
        };
        responder.respond(head_response(head).with_body(body));
    }

    fn abort(self: Box<Self>, why: &str) {
        self.responder.respond(server_error(why));
    }
}

/// A response with the head's status and headers and no body.
pub fn head_response(head: Head) -> Response {
    let mut response = Response::new(head.status);
    response.headers = head
        .headers
        .into_iter()
        .map(|(name, value)| stoa_app_api::Header {
            name: name.into(),
            value: latin1(&value).into(),
        })
        .collect();
    response
}

/// The 500 answered for a failed application (details are in the log).
pub fn server_error(why: &str) -> Response {
    Response::text(500, &format!("Internal Server Error: {why}\n"))
}

/// A header value as PEP 3333 has it: each character one latin-1 byte
/// (`start_response` has refused characters past U+00FF).
pub fn latin1(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use stoa_app_api::testing::{outcome, Outcome};
    use stoa_app_api::{App, Request};

    /// An app whose handler drives a `Buffered` sink by a script.
    struct Script(fn(&mut Box<Buffered>) -> bool);

    impl App for Script {
        fn handle(&self, _request: &Request<'_>, responder: Responder) {
            let mut sink = Box::new(Buffered::new(responder));
            if (self.0)(&mut sink) {
                sink.finish();
            } else {
                sink.abort("it failed");
            }
        }
    }

    fn run(script: fn(&mut Box<Buffered>) -> bool) -> Response {
        let request = Request::sample("GET", "", "/", "");
        match outcome(&Script(script), &request, Duration::from_secs(5)) {
            Outcome::Answered(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_buffered_response_is_the_head_and_every_chunk() {
        let r = run(|sink| {
            let headers = vec![("X-Name".to_string(), "caf\u{e9}".to_string())];
            sink.start(
                Head {
                    status: 201,
                    headers,
                },
                false,
            );
            sink.write(b"one ") && sink.write(b"two")
        });
        assert_eq!(r.status, 201);
        assert_eq!(r.header("x-name"), Some(&b"caf\xe9"[..]));
        assert_eq!(r.body.as_slice(), b"one two");
    }

    #[test]
    fn no_status_or_an_abort_is_a_500() {
        assert_eq!(run(|_| true).status, 500);
        let r = run(|sink| {
            sink.start(
                Head {
                    status: 200,
                    headers: Vec::new(),
                },
                true,
            );
            let _ = sink.write(b"half");
            false
        });
        assert_eq!(r.status, 500);
        assert_eq!(r.body.as_slice(), b"Internal Server Error: it failed\n");
    }
}
