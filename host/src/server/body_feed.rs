//! A request body streamed to its app: the app's sink and the responder
//! handed back to it with the end. Fed on the loop, in order, from the
//! connection's read buffer; the connection reads no more while the sink
//! runs and while its buffer holds a window of body bytes (the
//! backpressure on the socket).

use crate::http::reader::RequestReader;
use crate::http::HttpError;
use stoa_app_api::abi::{BodySinkBox, ResponderBox, BODY_BROKEN, BODY_COMPLETE, BODY_TOO_LARGE};

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

    /// Hands what `reader` holds of the body to the sink: whether any byte
    /// went, and the end (`BODY_*`) once the body has all come, broke, or
    /// the client closed (`read_closed`) before its end.
    pub fn feed(
        &mut self,
        reader: &mut RequestReader,
        read_closed: bool,
        peer: &str,
    ) -> (bool, Option<u8>) {
        let mut piece = Vec::new();
        let mut fed = false;
        loop {
            piece.clear();
            match reader.body_piece(&mut piece) {
                Ok(done) => {
                    fed |= !piece.is_empty();
                    self.data(&piece);
                    if done {
                        return (fed, Some(BODY_COMPLETE));
                    }
                    if piece.is_empty() {
                        return (fed, read_closed.then_some(BODY_BROKEN));
                    }
                }
                Err(e) => {
                    log::debug!("{peer}: streamed body: {e}");
                    let outcome = match e {
                        HttpError::BodyTooLarge => BODY_TOO_LARGE,
                        _ => BODY_BROKEN,
                    };
                    return (fed, Some(outcome));
                }
            }
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
