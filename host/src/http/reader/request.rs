//! The next request: its head parsed, then its body read whole (by
//! Content-Length, or chunked and decoded), or handed to its app as it
//! comes (`body.rs`); and what is left once it is dispatched.

use super::body::BodyFeed;
use super::hold::hold_for;
use super::{RequestReader, READ_CHUNK};
use crate::budget::Budget;
use crate::http::chunked::ChunkedDecoder;
use crate::http::parse::{parse_head_reusing, BodyKind, Head};
use crate::http::HttpError;
use crate::settings::ConnParams;

/// What the caller decides for a request once its head is parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BodyPlan {
    /// The body limit, if not `max_body` (or `max_stream_body` for a
    /// streamed body): an app's own.
    pub limit: Option<usize>,
    /// The app reads the body as it arrives: the request is ready with its
    /// head, and the body comes through `body_piece`.
    pub stream: bool,
}

impl RequestReader {
    /// Parses the next request. `Ok(true)`: a whole request is ready (see
    /// `parts`); `Ok(false)`: more bytes are needed.
    pub fn next_request(&mut self, params: &ConnParams) -> Result<bool, HttpError> {
        static UNLIMITED: std::sync::OnceLock<Budget> = std::sync::OnceLock::new();
        let budget = UNLIMITED.get_or_init(Budget::unlimited);
        self.next_request_with(params, budget, &|_, _| BodyPlan::default())
    }

    /// `next_request`, with `body_plan` deciding, once a head is parsed, a
    /// body limit for this request in place of `params.max_body` (or
    /// `params.max_stream_body`): an app's own `max_body` (or `max_stream_body`);
    /// and whether the body is streamed to the app (the request is then
    /// ready with its head; see `body_piece`). A body the `budget` has no
    /// room for is refused (`OverBudget`).
    pub fn next_request_with(
        &mut self,
        params: &ConnParams,
        budget: &Budget,
        body_plan: &dyn Fn(&Head, &[u8]) -> BodyPlan,
    ) -> Result<bool, HttpError> {
        if self.over_budget {
            budget.note_refused(crate::budget::Refusal::Body);
            return Err(HttpError::OverBudget(budget.limit()));
        }
        if self.head.is_none() {
            if self.start == self.end {
                return Ok(false);
            }
            let bytes = &self.buf[self.start..self.end];
            let Some(head) = parse_head_reusing(bytes, params, &mut self.spare_headers)? else {
                return Ok(false);
            };
            // A request without a body has nothing to plan.
            let plan = match head.body {
                BodyKind::None => BodyPlan::default(),
                _ => body_plan(&head, bytes),
            };
            self.begin_body(head, plan, params)?;
        }
        let Some(head) = &self.head else {
            return Ok(false);
        };
        if self.stream_body {
            // Ready with its head; 100 Continue as its app will read.
            self.continue_due = head.expect_continue;
            return Ok(true);
        }
        let body_start = self.start + head.len;
        let complete = match (head.body, &mut self.decoder) {
            (BodyKind::None, _) => true,
            (BodyKind::Length(n), _) => self.end - body_start >= n,
            (BodyKind::Chunked, Some(decoder)) => {
                let limit = self.body_limit.unwrap_or(params.max_body);
                // The decoded body is never longer than its framing: room
                // for all of it is reserved before it is decoded.
                let need = (self.body.len() + self.end - body_start).min(limit);
                if need > self.body.capacity() {
                    let cap = need.max(self.body.capacity() * 2).min(limit.max(need));
                    if !hold_for(&mut self.hold, self.buf.len(), cap, budget) {
                        budget.note_refused(crate::budget::Refusal::Body);
                        return Err(HttpError::OverBudget(budget.limit()));
                    }
                    self.body.reserve_exact(cap - self.body.len());
                }
                let used =
                    decoder.decode(&self.buf[body_start..self.end], &mut self.body, limit)?;
                // Drop the consumed chunk framing so it never piles up.
                self.buf
                    .copy_within(body_start + used..self.end, body_start);
                self.end -= used;
                decoder.is_done()
            }
            (BodyKind::Chunked, None) => return Err(HttpError::Framing("chunked decoder missing")),
        };
        if !complete && head.expect_continue && !self.continue_sent {
            self.continue_sent = true;
            self.continue_due = true;
        }
        Ok(complete)
    }

    /// Takes a parsed head and its body's plan: the body's limit (an app's
    /// own, or `max_body`, or `max_stream_body` for a body streamed to its
    /// app) is checked against a declared length before any of it is read,
    /// and a chunked body's decoder readied.
    fn begin_body(
        &mut self,
        head: Head,
        plan: BodyPlan,
        params: &ConnParams,
    ) -> Result<(), HttpError> {
        self.body_limit = plan.limit;
        self.stream_body = plan.stream;
        let (limit, too_large) = if plan.stream {
            let limit = plan.limit.unwrap_or(params.max_stream_body);
            (limit, HttpError::StreamBodyTooLarge)
        } else {
            (
                plan.limit.unwrap_or(params.max_body),
                HttpError::BodyTooLarge,
            )
        };
        self.stream_limit = limit;
        if let BodyKind::Length(n) = head.body {
            if n > limit {
                self.spare_headers = head.into_spare();
                return Err(too_large);
            }
        }
        self.decoder = (head.body == BodyKind::Chunked).then(ChunkedDecoder::default);
        self.body.clear();
        self.continue_sent = false;
        self.head = Some(head);
        Ok(())
    }

    /// True once per request that asked `Expect: 100-continue` and whose
    /// body is now awaited: the caller sends `100 Continue`.
    pub fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_due)
    }

    /// The ready request's head, its bytes (head offsets are relative to
    /// them) and its body.
    pub fn parts(&self) -> Option<(&Head, &[u8], &[u8])> {
        let head = self.head.as_ref()?;
        let buf = &self.buf[self.start..self.end];
        let body = match head.body {
            _ if self.stream_body => &[][..],
            BodyKind::None => &[][..],
            BodyKind::Length(n) => buf.get(head.len..head.len + n)?,
            BodyKind::Chunked => &self.body,
        };
        Some((head, buf, body))
    }

    /// Drops the dispatched request's bytes.
    pub fn consume(&mut self) {
        if let Some(head) = self.head.take() {
            let body = match head.body {
                _ if self.stream_body => 0,
                BodyKind::Length(n) => n,
                _ => 0,
            };
            if std::mem::take(&mut self.stream_body) {
                self.feed = Some(BodyFeed::new(head.body, self.stream_limit));
            }
            self.start = (self.start + head.len + body).min(self.end);
            self.spare_headers = head.into_spare();
        }
        self.decoder = None;
        if self.body.capacity() > READ_CHUNK {
            self.body = Vec::new();
            self.rehold();
        } else {
            self.body.clear();
        }
    }
}
