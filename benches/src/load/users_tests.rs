//! The think-time mode: its range parsing, how failures are classified, and
//! sessions against the in-test server (one connection per session, its
//! requests on it; a refusing address counts refusals).

use super::tests::{TestServer, FOREVER};
use super::*;
use crate::target::Target;
use std::net::TcpListener;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn think_ranges_parse() {
    let r = ThinkRange::parse("500ms..2s").unwrap();
    assert_eq!((r.min, r.max), (ms(500), ms(2000)));
    let fixed = ThinkRange::parse("1s").unwrap();
    assert_eq!((fixed.min, fixed.max), (ms(1000), ms(1000)));
    assert!(
        ThinkRange::parse("2s..1s").is_err(),
        "ends before it starts"
    );
    assert!(ThinkRange::parse("x..1s").is_err());
    assert!(ThinkRange::parse("1s..").is_err());
    assert_eq!(r.pick(0.0), ms(500));
    assert_eq!(r.pick(0.5), ms(1250));
    assert_eq!(r.pick(1.0), ms(2000));
    assert_eq!(r.pick(7.0), ms(2000), "draws are clamped to the range");
}

#[test]
fn failures_classify_by_status_and_transport() {
    assert_eq!(Failure::of_status(200), None);
    assert_eq!(Failure::of_status(204), None);
    assert_eq!(Failure::of_status(502), Some(Failure::BadGateway));
    assert_eq!(Failure::of_status(504), Some(Failure::GatewayTimeout));
    for other in [301, 404, 500, 503] {
        assert_eq!(Failure::of_status(other), Some(Failure::OtherStatus));
    }
    assert_eq!(Failure::of_transport(ErrorKind::Refused), Failure::Refused);
    assert_eq!(Failure::of_transport(ErrorKind::Reset), Failure::Reset);
    assert_eq!(Failure::of_transport(ErrorKind::Timeout), Failure::Timeout);
    assert_eq!(Failure::of_transport(ErrorKind::Other), Failure::Other);
    assert_eq!(FAILURE_NAMES[Failure::BadGateway as usize], "502");
    assert_eq!(FAILURE_NAMES[Failure::GatewayTimeout as usize], "504");
    assert_eq!(FAILURE_NAMES[Failure::Other as usize], "other");
}

fn config(addr: std::net::SocketAddr, users: usize, duration: Duration) -> UsersConfig {
    UsersConfig {
        target: Target::parse(&format!("http://{addr}/x")).unwrap(),
        users,
        think: ThinkRange {
            min: ms(5),
            max: ms(15),
        },
        session_requests: 3,
        duration,
        threads: 1,
        timeout: Duration::from_secs(5),
    }
}

#[test]
fn each_session_makes_its_requests_on_one_connection() {
    let server = TestServer::start(FOREVER);
    let r = run_users(&config(server.addr, 4, ms(600))).unwrap();
    assert_eq!(r.failures, [0; FAILURES], "{r:?}");
    assert!(r.sessions >= 4, "{r:?}");
    assert_eq!(r.ok, r.requests());
    assert!(r.requests() >= 3 * r.sessions);
    let conns = server.seen(|s| &s.connections) as u64;
    // Every whole session, plus at most one unfinished per user.
    assert!(
        conns >= r.sessions && conns <= r.sessions + 4,
        "{conns} {r:?}"
    );
    assert!(r.percentile_ms(99.0) > 0.0);
}

#[test]
fn a_refusing_address_counts_refusals() {
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = run_users(&config(addr, 2, ms(300))).unwrap();
    assert_eq!(r.ok, 0);
    assert!(r.failures[Failure::Refused as usize] > 0, "{r:?}");
    assert_eq!(r.requests(), r.failures.iter().sum::<u64>());
}
