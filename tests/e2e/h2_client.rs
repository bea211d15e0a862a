//! The steered HTTP/2 client (`h2_client.py`) the HTTP/2 tests drive line
//! by line: requests, resets and pings on one h2c connection, and what the
//! host sent, as it came.

use crate::harness::{Captured, Group, Server, WAIT};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e/h2_client.py");

/// The steered client (`h2_client.py`) on `server`, with `extra` flags:
/// its process, its input, and its output as it comes.
pub struct Steered {
    _process: Group,
    pub input: std::process::ChildStdin,
    pub lines: Arc<Captured>,
}

impl Steered {
    pub fn start(server: &Server, extra: &[&str]) -> Steered {
        let mut process = Group::spawn(
            Command::new("python3")
                .arg(CLIENT)
                .args(extra)
                .arg(server.port.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )
        .expect("python3 is needed for the HTTP/2 tests");
        let input = process.0.stdin.take().expect("stdin");
        let lines = Captured::collect(process.0.stdout.take().expect("stdout"));
        Steered {
            _process: process,
            input,
            lines,
        }
    }

    pub fn say(&mut self, command: &str) {
        writeln!(self.input, "{command}").expect("write to the client");
    }

    /// Waits until the client has printed `line`.
    pub fn saw(&self, line: &str) -> bool {
        let line = format!("{line}\n");
        self.lines.wait(WAIT, |t| t.contains(&line))
    }

    pub fn text(&self) -> String {
        self.lines.text()
    }
}
