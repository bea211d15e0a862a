//! The completion backend's own checks: a connection's I/O through its
//! link, its bounds, its end and its fd's close. (The shared checks in
//! `poller::tests` run on it too, through `register`.)

use super::book::{lock, INPUT_BOUND, OUTPUT_BOUND};
use super::*;
use crate::poller::tests::skip_io_uring;
use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};

const PATIENCE: Duration = Duration::from_secs(5);

fn start() -> Option<CompletionPoller> {
    match CompletionPoller::new() {
        Ok(p) => Some(p),
        Err(StartError::Ring(e)) if skip_io_uring(&e) => None,
        Err(e) => panic!("cannot start the completion backend: {e:?}"),
    }
}

/// A connected pair: the client (blocking, with a timeout) and the
/// server's end, non-blocking as the host's are.
fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    client.set_read_timeout(Some(PATIENCE)).unwrap();
    (client, server)
}

/// Waits until an event for `token` passes `pred`.
fn wait_for(p: &mut CompletionPoller, token: Token, pred: impl Fn(&Event) -> bool) -> Event {
    let deadline = Instant::now() + PATIENCE;
    let mut events = Vec::new();
    while Instant::now() < deadline {
        p.wait(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        if let Some(e) = events.iter().find(|e| e.token == token && pred(e)) {
            return *e;
        }
    }
    panic!("no event for {token:?} in {PATIENCE:?}");
}

fn read_all(link: &Link) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match link.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return out,
            Err(e) => panic!("read: {e}"),
        }
    }
}

#[test]
fn a_connection_reads_and_writes_through_its_link() {
    let Some(mut p) = start() else { return };
    let (mut client, server) = pair();
    let link = p.attach(server.as_raw_fd(), Token(3)).unwrap().unwrap();
    client.write_all(b"ping").unwrap();
    let ev = wait_for(&mut p, Token(3), |e| e.readable);
    assert!(!ev.hup);
    assert_eq!(read_all(&link), b"ping");
    assert_eq!(
        link.write_vectored(&[IoSlice::new(b"po"), IoSlice::new(b"ng")])
            .unwrap(),
        4
    );
    assert!(link.has_output(), "queued until the next wait");
    wait_for(&mut p, Token(3), |e| e.writable);
    assert!(!link.has_output());
    let mut got = [0u8; 4];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"pong");
}

#[test]
fn a_released_fd_closes_after_its_receive_is_cancelled() {
    let Some(mut p) = start() else { return };
    let (mut client, server) = pair();
    let fd = server.as_raw_fd();
    let link = p.attach(fd, Token(4)).unwrap().unwrap();
    // Armed: the receive holds the socket in the ring.
    p.wait(&mut Vec::new(), Some(Duration::ZERO)).unwrap();
    link.write_vectored(&[IoSlice::new(b"bye")]).unwrap();
    p.deregister(fd).unwrap();
    link.release(OwnedFd::from(server));
    let deadline = Instant::now() + PATIENCE;
    while lock(&p.book)
        .pipes
        .get(fd as usize)
        .is_some_and(Option::is_some)
    {
        assert!(Instant::now() < deadline, "the pipe never went");
        p.wait(&mut Vec::new(), Some(Duration::from_millis(20)))
            .unwrap();
    }
    // What was written before goes out, then the end of stream.
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"bye");
}

#[test]
fn the_peers_end_is_readable_and_a_shutdown_follows_the_output() {
    let Some(mut p) = start() else { return };
    let (mut client, server) = pair();
    let link = p.attach(server.as_raw_fd(), Token(5)).unwrap().unwrap();
    client.write_all(b"last").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let ev = wait_for(&mut p, Token(5), |e| e.hup);
    assert!(ev.readable);
    assert_eq!(read_all(&link), b"last");
    assert_eq!(link.read(&mut [0u8; 8]).unwrap(), 0, "the end, again");
    link.write_vectored(&[IoSlice::new(b"answer")]).unwrap();
    link.shutdown_write().unwrap();
    assert!(link.write_vectored(&[IoSlice::new(b"more")]).is_err());
    assert!(link.has_output(), "the FIN is due");
    wait_for(&mut p, Token(5), |e| e.writable);
    while link.has_output() {
        wait_for(&mut p, Token(5), |e| e.writable);
    }
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"answer");
}

/// How far past its input bound a pipe may be filled: one buffer where
/// the kernel caps a multishot receive, else as many as the ring has (the
/// completions already in the ring when the loop sees the bound).
fn slack(p: &CompletionPoller) -> usize {
    match p.recv_cap {
        true => bufring::SIZE,
        false => usize::from(bufring::COUNT) * bufring::SIZE,
    }
}

/// The bytes in `fd`'s pipe not yet read through its link.
fn unread(p: &CompletionPoller, fd: RawFd) -> usize {
    lock(&p.book).pipes[fd as usize].as_ref().unwrap().unread()
}

/// A loop that reaps late (a busy machine) finds no more in a pipe than
/// its bound and one buffer: the receive was capped at the room under it.
#[test]
fn a_late_reap_finds_no_more_than_the_bound_in_a_pipe() {
    let Some(mut p) = start() else { return };
    let (mut client, server) = pair();
    let fd = server.as_raw_fd();
    let link = p.attach(fd, Token(9)).unwrap().unwrap();
    // The receive goes to the kernel with this wait.
    p.wait(&mut Vec::new(), Some(Duration::ZERO)).unwrap();
    let writer = std::thread::spawn(move || {
        let _ = client.write_all(&vec![7u8; 4 * 1024 * 1024]);
        client
    });
    std::thread::sleep(Duration::from_millis(300));
    p.wait(&mut Vec::new(), Some(Duration::ZERO)).unwrap();
    let unread = unread(&p, fd);
    assert!(unread <= INPUT_BOUND + slack(&p), "{unread} bytes");
    drop(server);
    drop(link);
    let _ = writer.join().map(|c| c.shutdown(Shutdown::Both));
}

#[test]
fn input_over_its_bound_waits_in_the_kernel_until_read() {
    let Some(mut p) = start() else { return };
    let (mut client, server) = pair();
    let fd = server.as_raw_fd();
    let link = p.attach(fd, Token(6)).unwrap().unwrap();
    let sent: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let body = sent.clone();
    let writer = std::thread::spawn(move || client.write_all(&body).map(|()| client));
    wait_for(&mut p, Token(6), |e| e.readable);
    // Not read: the pipe stops taking bytes near its bound.
    for _ in 0..20 {
        p.wait(&mut Vec::new(), Some(Duration::from_millis(10)))
            .unwrap();
    }
    let unread = unread(&p, fd);
    let slack = slack(&p);
    assert!(
        unread >= INPUT_BOUND && unread <= INPUT_BOUND + slack,
        "{unread}"
    );
    // Read as it comes: every byte, in order.
    let mut got = Vec::new();
    let deadline = Instant::now() + PATIENCE * 4;
    while got.len() < sent.len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} bytes",
            got.len(),
            sent.len()
        );
        got.extend(read_all(&link));
        p.wait(&mut Vec::new(), Some(Duration::from_millis(10)))
            .unwrap();
    }
    assert!(got == sent, "the bytes came changed");
    drop(writer.join().unwrap().unwrap());
}

#[test]
fn output_over_its_bound_would_block_until_the_peer_reads() {
    let Some(mut p) = start() else { return };
    let (mut client, server) = pair();
    let link = p.attach(server.as_raw_fd(), Token(7)).unwrap().unwrap();
    let chunk = vec![7u8; 64 * 1024];
    let mut queued = 0;
    // The socket's buffers fill too; then the pipe's bound is met.
    let deadline = Instant::now() + PATIENCE;
    loop {
        assert!(
            Instant::now() < deadline,
            "never blocked after {queued} bytes"
        );
        match link.write_vectored(&[IoSlice::new(&chunk)]) {
            Ok(n) => queued += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("write: {e}"),
        }
        p.wait(&mut Vec::new(), Some(Duration::from_millis(10)))
            .unwrap();
    }
    assert!(queued >= OUTPUT_BOUND, "{queued}");
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; queued];
        client.read_exact(&mut buf).map(|()| buf)
    });
    wait_for(&mut p, Token(7), |e| e.writable);
    while link.has_output() {
        p.wait(&mut Vec::new(), Some(Duration::from_millis(10)))
            .unwrap();
    }
    let buf = reader.join().unwrap().unwrap();
    assert!(buf.iter().all(|&b| b == 7));
}

#[test]
fn a_kernel_without_multishot_receives_gets_the_readiness_backend() {
    match CompletionPoller::start(true) {
        Err(StartError::Missing(what)) => {
            assert_eq!(what.to_string(), "multishot receives (6.0)");
            let p = crate::poller::completion_or_readiness(Err(StartError::Missing(what))).unwrap();
            assert_eq!(p.name(), "io_uring");
        }
        Err(StartError::Ring(e)) if skip_io_uring(&e) => {}
        other => panic!("expected the missing feature, got {:?}", other.err()),
    }
}

#[test]
fn user_data_keeps_kind_generation_and_fd_apart() {
    let data = user_data(KIND_SEND, 0x12_3456, 77);
    assert_eq!(parts(data), (KIND_SEND, 0x12_3456, 77));
    assert_eq!(parts(user_data(KIND_RECV, u32::MAX, 0)).1, GEN_MASK);
    assert_ne!(user_data(KIND_CANCEL, GEN_MASK, -1), WAKER_DATA);
}
