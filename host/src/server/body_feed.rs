//! A request body streamed to its app: the app's sink and the responder
//! handed back to it with the end. Fed on the loop, in order, from the
//! connection's read buffer; the connection reads no more while the sink
//! runs and while its buffer holds a window of body bytes (the
//! backpressure on the socket).

use stoa_app_api::abi::{BodySinkBox, ResponderBox, BODY_BROKEN, BODY_COMPLETE};

/// The app's end of a streamed body. Dropped before the end (the
/// connection went, a timeout), it tells the app the body broke.
pub struct BodyLink {
    sink: Option<(BodySinkBox, ResponderBox)>,
}

impl BodyLink {
    pub fn new(sink: BodySinkBox, responder: ResponderBox) -> Self {
        BodyLink {
            sink: Some((sink, responder)),
        }
    }

    /// Hands `chunk` to the app (not when empty).
    pub fn data(&mut self, chunk: &[u8]) {
        if let (Some((sink, _)), false) = (&mut self.sink, chunk.is_empty()) {
            sink.data(abi_stable::std_types::RSlice::from_slice(chunk));
        }
    }

    /// Ends the body (`BODY_*`); the app answers with the responder.
    pub fn end(mut self, outcome: u8) {
        if let Some((sink, responder)) = self.sink.take() {
            sink.end(outcome, responder);
        }
    }

    /// Ends a body that had all come before the sink was given (a request
    /// the app did not declare, or one without a body).
    pub fn complete_now(self) {
        self.end(BODY_COMPLETE);
    }
}

impl Drop for BodyLink {
    fn drop(&mut self) {
        if let Some((sink, responder)) = self.sink.take() {
            sink.end(BODY_BROKEN, responder);
        }
    }
}
