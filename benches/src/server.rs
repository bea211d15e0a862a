//! Starting and stopping the `stoa` server under test: an apps directory
//! prepared from the sample plugins, the child pinned to its CPUs, its
//! `listening on` line read for the port, its log kept in a file.

use crate::affinity;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The sample plugins a comparison serves.
pub const SAMPLE_PLUGINS: [&str; 4] = [
    "libhello_project.so",
    "libarticle.so",
    "libenviron.so",
    "libdemo.so",
];

/// Copies the sample plugins from `from`, and the `extra` plugin files
/// (`compare --app`), into a fresh `dir`.
pub fn prepare_apps(from: &Path, extra: &[PathBuf], dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for name in SAMPLE_PLUGINS {
        let src = from.join(name);
        if !src.is_file() {
            return Err(format!(
                "{} is missing; build the sample apps first (cargo build --release)",
                src.display()
            ));
        }
        std::fs::copy(&src, dir.join(name)).map_err(|e| format!("{}: {e}", src.display()))?;
    }
    for src in extra {
        let name = src
            .file_name()
            .ok_or_else(|| format!("--app {}: not a file name", src.display()))?;
        std::fs::copy(src, dir.join(name)).map_err(|e| format!("--app {}: {e}", src.display()))?;
    }
    Ok(())
}

/// Whether `stoa --help` lists `flag` (flags differ between host versions).
pub fn supports_flag(stoa: &Path, flag: &str) -> bool {
    Command::new(stoa)
        .arg("--help")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(flag))
}

/// A running `stoa` that this process started; stopped (by its PID) on drop.
pub struct Server {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// Its log (stderr).
    pub log: PathBuf,
}

impl Server {
    /// Starts `stoa --poller POLLER` on 127.0.0.1:0 serving `apps`, pinned
    /// to `cpus` if given; returns once it printed its address.
    pub fn start(
        stoa: &Path,
        apps: &Path,
        poller: &str,
        cpus: Option<&[usize]>,
        extra_args: &[String],
        log: PathBuf,
    ) -> Result<Server, String> {
        let log_file =
            std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = Command::new(stoa);
        cmd.args([
            "--bind",
            "127.0.0.1:0",
            "--poller",
            poller,
            "--log-level",
            "info",
        ])
        .arg("--apps")
        .arg(apps)
        .args(extra_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file);
        if let Some(cpus) = cpus {
            let set = affinity::cpu_set(cpus);
            // SAFETY: the closure only makes one async-signal-safe system
            // call (sched_setaffinity) on a set prepared before the fork.
            unsafe {
                cmd.pre_exec(move || affinity::pin_current(&set));
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", stoa.display()))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, rx) = mpsc::channel();
        // Reads the address line, then drains stdout so the server never
        // blocks on a full pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line
                    .strip_prefix("listening on http://")
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, p)| p.trim().parse::<u16>().ok())
                {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(port);
                    }
                }
            }
        });
        let mut server = Server {
            child,
            port: 0,
            log,
        };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(port) => {
                server.port = port;
                Ok(server)
            }
            Err(_) => {
                let tail = server.log_tail();
                Err(format!(
                    "{} --poller {poller} did not print its address; its log ends:\n{tail}",
                    stoa.display()
                ))
            }
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The connection cap it logged (`fd_cap=N`), if it did.
    pub fn connection_cap(&self) -> Option<usize> {
        let text = std::fs::read_to_string(&self.log).ok()?;
        let at = text.find("fd_cap=")? + "fd_cap=".len();
        let digits: String = text[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Stops the server: SIGTERM (graceful drain), SIGKILL after 5 s.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on the PID of a child we spawned and have not
            // reaped, so the PID cannot have been reused.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.terminate();
    }
}
