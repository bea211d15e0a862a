//! Every answer the host gives itself, in one place: its status, its body
//! text (which names the limit or setting behind it) and its headers.
//! Apps' answers never pass through here.

use super::response::reason;
use super::websocket::handshake::Refusal;
use super::HttpError;
use std::borrow::Cow;
use stoa_app_api::Response;

/// True for a final status (200-599), the only kind an app may answer
/// with: 1xx are the host's to send (a 100 or 101 sent as the answer
/// would make the client read the next response as this one's), and
/// anything else is no HTTP status at all. An answer with another status
/// becomes `InvalidStatus`. The one place finality is decided.
pub fn is_final(status: u16) -> bool {
    (200..=599).contains(&status)
}

/// An answer from the host, not from an app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostAnswer {
    /// No mount matches the path (404).
    NoMount,
    /// `/.well-known/stoa/<x>` that is not an endpoint (404).
    NoEndpoint,
    /// Status or metrics asked for from outside `--status-allow` (403).
    StatusForbidden,
    /// The app dropped its responder unanswered (500).
    AppFailed,
    /// The app panicked while it held the request's responder (500), by
    /// name.
    AppPanicked(String),
    /// The app answered a status outside 200-599 (500).
    InvalidStatus,
    /// The blocking pool's queue is full (503).
    PoolFull,
    /// The app is past its share of the blocking pool's queue and no free
    /// room is left (503).
    AppShareFull,
    /// The request waited in queue room past its app's share, and another
    /// app within its share took the room back (503).
    ShareReclaimed,
    /// The connection cap is reached and a connection could not be watched
    /// (503).
    AtCapacity,
    /// Readiness while draining (503).
    Draining,
    /// Readiness with no app loaded (503).
    NoApps,
    /// Readiness or health while workers are stuck (503), with the reason.
    Stuck(String),
    /// Readiness while start-up waits for these apps' constructors (503).
    Starting(Vec<String>),
    /// A mount held out of service (its app's bytes are quarantined and
    /// no earlier generation can serve), with the reason (503).
    OutOfService(std::sync::Arc<str>),
    /// The app did not answer within `app_timeout` (504).
    AppTimeout,
    /// A WebSocket handshake the host refuses (400, or 426 with
    /// `Sec-WebSocket-Version: 13`), or an accept of a request that asked
    /// for none (426).
    WebSocket(Refusal),
    /// A request that could not be read (400, 408, 413, 414, 417, 431, 501,
    /// 505).
    Http(HttpError),
    /// Plain HTTP sent to a TLS port, answered in plaintext (400, as
    /// nginx words it).
    PlainHttpToTls,
}

impl HostAnswer {
    /// The status code.
    pub fn status(&self) -> u16 {
        match self {
            HostAnswer::NoMount | HostAnswer::NoEndpoint => 404,
            HostAnswer::StatusForbidden => 403,
            HostAnswer::PlainHttpToTls => 400,
            HostAnswer::AppFailed | HostAnswer::AppPanicked(_) | HostAnswer::InvalidStatus => 500,
            HostAnswer::PoolFull
            | HostAnswer::AppShareFull
            | HostAnswer::ShareReclaimed
            | HostAnswer::AtCapacity
            | HostAnswer::Draining
            | HostAnswer::NoApps
            | HostAnswer::Stuck(_)
            | HostAnswer::Starting(_)
            | HostAnswer::OutOfService(_) => 503,
            HostAnswer::AppTimeout => 504,
            HostAnswer::WebSocket(r) => r.status(),
            HostAnswer::Http(e) => e.status(),
        }
    }

    /// What the body says, after the status line's words.
    pub fn text(&self) -> Cow<'_, str> {
        Cow::Borrowed(match self {
            HostAnswer::NoMount => "no app is mounted at this path",
            HostAnswer::NoEndpoint => "no such host endpoint",
            HostAnswer::StatusForbidden => "status is not open to this address (status_allow)",
            HostAnswer::AppFailed => "the app did not answer",
            HostAnswer::InvalidStatus => "the app answered an invalid status",
            HostAnswer::PoolFull => "the blocking pool is full (blocking_queue)",
            HostAnswer::AppShareFull => {
                "this app's share of the blocking pool is full (blocking_queue x blocking_share)"
            }
            HostAnswer::ShareReclaimed => {
                "this app waited past its share of the blocking queue (blocking_queue x \
                 blocking_share) and another app took the room back"
            }
            HostAnswer::AtCapacity => "connection limit reached (max_connections)",
            HostAnswer::Draining => "draining",
            HostAnswer::NoApps => "no app is loaded",
            HostAnswer::AppTimeout => "the app did not answer within app_timeout",
            HostAnswer::PlainHttpToTls => "The plain HTTP request was sent to HTTPS port",
            HostAnswer::Stuck(why) => return Cow::Borrowed(why.as_str()),
            HostAnswer::OutOfService(why) => return Cow::Borrowed(why),
            HostAnswer::Starting(apps) => {
                return Cow::Owned(format!(
                    "starting: the constructor of app(s) {} still runs (--init-timeout)",
                    apps.join(", ")
                ))
            }
            HostAnswer::AppPanicked(app) => return Cow::Owned(format!("app {app} panicked")),
            HostAnswer::Http(e) => return Cow::Owned(e.to_string()),
            HostAnswer::WebSocket(r) => return Cow::Owned(r.to_string()),
        })
    }

    /// The response: `STATUS Reason: text` as plain text, with
    /// `Retry-After` where waiting helps (the 503s of a full pool or cap).
    pub fn response(&self) -> Response {
        let status = self.status();
        let body = format!("{status} {}: {}\n", reason(status), self.text());
        let response = Response::text(status, &body);
        match self {
            HostAnswer::PoolFull
            | HostAnswer::AppShareFull
            | HostAnswer::ShareReclaimed
            | HostAnswer::AtCapacity
            | HostAnswer::Http(HttpError::OverBudget(_)) => {
                response.with_header("Retry-After", "1")
            }
            HostAnswer::WebSocket(r) if r.status() == 426 => {
                response.with_header("Upgrade", "websocket").with_header(
                    "Sec-WebSocket-Version",
                    super::websocket::handshake::VERSION,
                )
            }
            _ => response,
        }
    }
}

impl From<HttpError> for HostAnswer {
    fn from(e: HttpError) -> Self {
        HostAnswer::Http(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_names_its_status_and_reason() {
        let r = HostAnswer::PoolFull.response();
        assert_eq!(r.status, 503);
        assert_eq!(
            std::str::from_utf8(&r.body).unwrap(),
            "503 Service Unavailable: the blocking pool is full (blocking_queue)\n"
        );
        assert!(r.headers.iter().any(|h| h.name.as_str() == "Retry-After"));
        let r = HostAnswer::Http(HttpError::UriTooLong).response();
        assert_eq!(r.status, 414);
        assert!(std::str::from_utf8(&r.body)
            .unwrap()
            .contains("max_request_line"));
        assert_eq!(HostAnswer::NoMount.response().headers.len(), 1);
    }

    #[test]
    fn only_200_to_599_are_final() {
        for status in [0, 1, 100, 101, 103, 199, 600, 999, u16::MAX] {
            assert!(!is_final(status), "{status}");
        }
        for status in [200, 204, 301, 404, 500, 599] {
            assert!(is_final(status), "{status}");
        }
    }
}
