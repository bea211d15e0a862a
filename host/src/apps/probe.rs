//! The load probe: before the host maps a new or changed plugin into its
//! own process, a short-lived child — the `stoa` binary itself, exec'ed
//! with the hidden `__probe-plugin` subcommand — maps the same bytes and
//! runs the ABI check (not the app's constructor). A library whose
//! initialisers crash (abort, SIGBUS on a cut file) or hang kills or stalls
//! only the child; the host refuses it with one line and keeps serving.
//!
//! Child protocol: exit 0 when the library loaded and passed the ABI check;
//! exit 3 with the refusal (a `LibraryRefusal` as JSON) on the first line
//! of stdout (details after it) when it is refused like any bad plugin;
//! anything else (a signal, another status, an unreadable refusal, no exit
//! within the time limit) is a crash.

use crate::apps::error::{LibraryRefusal, LoadError};
use crate::apps::loader::{describe, open_module};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The hidden subcommand (handled in main.rs before the flags are parsed).
pub const SUBCOMMAND: &str = "__probe-plugin";

/// How long a probe may take before it is killed and the plugin refused.
const TIME_LIMIT: Duration = Duration::from_secs(10);

/// The exit status of a probe that refused the library in the ordinary way.
const REFUSED: u8 = 3;

/// Most bytes of the child's report kept.
const REPORT_LIMIT: u64 = 1 << 20;

/// What the child opens: a path, and the descriptor to hand it as its
/// stdin (a memfd copy is opened through `/proc/self/fd/0`).
pub struct ProbeTarget {
    pub path: PathBuf,
    pub stdin: Option<OwnedFd>,
}

/// Runs the probe on `target`; `shown` names the plugin in messages. The
/// library is refused as any bad plugin is (`LoadError::Library`), or as a
/// crash, a hang or a probe that could not run.
pub fn probe(target: ProbeTarget, shown: &Path) -> Result<(), LoadError> {
    let started = Instant::now();
    let exe = probe_binary();
    let stdin = target.stdin.map_or_else(Stdio::null, Stdio::from);
    let mut child = Command::new(&exe)
        .arg(SUBCOMMAND)
        .arg(&target.path)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| LoadError::ProbeFailed {
            exe: exe.clone(),
            source,
        })?;
    let reader = child.stdout.take().map(|out| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.take(REPORT_LIMIT).read_to_string(&mut text);
            text
        })
    });
    let status = wait(&mut child);
    let report = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    log::debug!(
        "load probe of {} took {} ms: {status:?}",
        shown.display(),
        started.elapsed().as_millis()
    );
    let Some(status) = status else {
        return Err(LoadError::ProbeTimeout {
            secs: TIME_LIMIT.as_secs(),
        });
    };
    verdict(status, &report, &target.path, shown)
}

/// The probe's outcome from its exit status and report (which names the
/// library as `opened`).
fn verdict(status: ExitStatus, report: &str, opened: &Path, shown: &Path) -> Result<(), LoadError> {
    if status.success() {
        return Ok(());
    }
    if let Some(signal) = status.signal() {
        let name = signal_hook::low_level::signal_name(signal).unwrap_or("unknown signal");
        return Err(LoadError::Crashed { signal, name });
    }
    let (first, details) = report.split_once('\n').unwrap_or((report, ""));
    let refusal = serde_json::from_str::<LibraryRefusal>(first.trim());
    match (status.code(), refusal) {
        (Some(code), Ok(refusal)) if code == i32::from(REFUSED) => {
            if !details.trim().is_empty() {
                let details = details.replace(&*opened.to_string_lossy(), &shown.to_string_lossy());
                log::debug!("load error for {}:\n{details}", shown.display());
            }
            Err(refusal.naming(opened, shown).into())
        }
        (code, _) => Err(LoadError::ProbeExited {
            status: code.map_or_else(|| "unknown".to_string(), |c| c.to_string()),
        }),
    }
}

/// Waits for the child up to the time limit; kills it past that (None).
fn wait(child: &mut std::process::Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + TIME_LIMIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// This very binary: `/proc/self/exe` where it exists (the running image,
/// even if the file was replaced by an upgrade since), else `current_exe`,
/// else the path it was started by.
fn probe_binary() -> PathBuf {
    let own = Path::new("/proc/self/exe");
    if own.exists() {
        return own.to_path_buf();
    }
    std::env::current_exe()
        .ok()
        .or_else(|| std::env::args_os().next().map(PathBuf::from))
        .unwrap_or_else(|| own.to_path_buf())
}

/// The child's side: loads the library at `path` and checks its ABI.
pub fn child_main(path: Option<OsString>) -> ExitCode {
    // A crash here is an expected answer, not something to dump core for.
    let _ = rlimit::setrlimit(rlimit::Resource::CORE, 0, 0);
    let Some(path) = path else {
        eprintln!("usage: stoa {SUBCOMMAND} LIBRARY");
        return ExitCode::from(2);
    };
    let path = PathBuf::from(path);
    match open_module(&path) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            let refusal = describe(&path, &e);
            let line = serde_json::to_string(&refusal).unwrap_or_else(|_| "null".to_string());
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{line}\n{}", e.error);
            let _ = out.flush();
            ExitCode::from(REFUSED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::error::LibraryRefusal;

    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn the_childs_refusal_becomes_the_hosts() {
        let answer = serde_json::to_string(&LibraryRefusal::NotStoaApp).unwrap();
        let report = format!("{answer}\nsymbol not found");
        let (opened, shown) = (Path::new("/proc/self/fd/0"), Path::new("/apps/x.so"));
        match verdict(exited(3), &report, opened, shown) {
            Err(LoadError::Library(LibraryRefusal::NotStoaApp)) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unreadable_answer_is_a_crash() {
        let (opened, shown) = (Path::new("/proc/self/fd/0"), Path::new("/apps/x.so"));
        let text = verdict(exited(3), "not json\n", opened, shown)
            .unwrap_err()
            .to_string();
        assert_eq!(
            text,
            "crashed while loading: the load probe exited with status 3"
        );
        assert!(verdict(exited(0), "", opened, shown).is_ok());
    }
}
