//! Process mode's view of the whole host from inside one worker process:
//! every worker publishes its counters into its row of the shared area a
//! few times a second (`publish`), so whichever worker answers status or
//! metrics adds up every live worker's counters (its own read live), the
//! counters of the workers that have ended (the retired cell, which the
//! supervisor keeps), and the crashes the supervisor counted.

use crate::apps::pool::Pool;
use crate::apps::quarantine::Guard;
use crate::ops::access_log::AccessLog;
use crate::ops::stuck::{monotonic_millis, stuck_for, StuckWorker};
use crate::ops::worker_row::{retired_cell, supervisor_cell, Phase, Row, TextCell};
use crate::stats::{Counts, Stats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// What the supervisor writes for the workers to show.
#[derive(Serialize, Deserialize, Default, Debug, PartialEq)]
pub struct SupervisorNotes {
    pub pid: u32,
    /// Worker processes that died, by the app they were running then
    /// (`(none)` when the loop was in host code).
    pub crashes_by_app: BTreeMap<String, u64>,
    /// Deaths by place (`--workers` index).
    pub crashes_by_place: Vec<u64>,
    /// Worker processes started since the supervisor started.
    pub started: u64,
    /// The same by place: the first worker of a place is its generation
    /// 1, each replacement the next.
    #[serde(default)]
    pub started_by_place: Vec<u64>,
    /// Plugin bytes taken out of service for killing workers.
    #[serde(default)]
    pub quarantined: Vec<Quarantined>,
}

/// One quarantined plugin: its app, its bytes, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Quarantined {
    pub app: String,
    pub digest: String,
    /// The deaths counted against it within the window.
    pub crashes: u32,
    pub window_secs: u64,
}

impl Quarantined {
    pub fn why(&self) -> String {
        format!(
            "app {} (plugin bytes {}) killed {} worker process(es) within {} s \
             (--quarantine-after, --quarantine-window); a file with other bytes clears it",
            self.app, self.digest, self.crashes, self.window_secs
        )
    }
}

/// The apps thread's guard in a worker process: what plugin code runs goes
/// into the row's hazard cell, and the quarantine is the supervisor's.
pub struct RowGuard {
    pub row: Row,
    pub peers: std::sync::Arc<Peers>,
    /// The supervisor's store of plugin copies (`STORE_ENV`).
    pub store: Option<PathBuf>,
    /// The row's names cell has one writer at a time.
    pub names: std::sync::Mutex<()>,
}

/// Where the supervisor's store of plugin copies is, for its workers: a
/// 0700 directory it made, removed when it exits.
pub const STORE_ENV: &str = "STOA_GENERATIONS";

/// Writes `contents` to `path` whole or not at all (a temporary file in
/// the same directory, renamed over it).
fn write_whole(path: &Path, contents: impl FnOnce(&Path) -> std::io::Result<()>) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let done = contents(&tmp).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        log::warn!("cannot keep {} for a rollback: {e}", path.display());
    }
}

/// The store's note naming the sealed copy of plugin file `file`.
fn sealed_note(file: &Path) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(file.as_os_str().as_encoded_bytes());
    let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("file-{hex}.sealed")
}

impl Guard for RowGuard {
    fn entering(&self, what: &str, digest: &str) {
        self.row.hazard().write(&format!("{what}\t{digest}"));
    }

    fn left(&self) {
        self.row.hazard().write("");
    }

    fn names(&self, names: &str) {
        let _one = self.names.lock().unwrap_or_else(|p| p.into_inner());
        self.row.names().write(names);
    }

    fn keep(&self, digest: &str, copy: &Path) {
        let Some(store) = &self.store else { return };
        let kept = store.join(format!("{digest}.so"));
        if !kept.exists() {
            write_whole(&kept, |tmp| std::fs::copy(copy, tmp).map(|_| ()));
        }
    }

    fn mounted(&self, digest: &str, mount: &str) {
        let Some(store) = &self.store else { return };
        let file = store.join(format!("{digest}.mount"));
        if std::fs::read_to_string(&file).ok().as_deref() != Some(mount) {
            write_whole(&file, |tmp| std::fs::write(tmp, mount));
        }
    }

    fn mount_of(&self, digest: &str) -> Option<String> {
        let store = self.store.as_ref()?;
        std::fs::read_to_string(store.join(format!("{digest}.mount"))).ok()
    }

    fn vetting(&self) -> Option<std::fs::File> {
        let store = self.store.as_ref()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(store.join("vetting.lock"))
            .ok()?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
        Some(file)
    }

    fn vetted(&self, digest: &str) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        store.join(format!("{digest}.vetted")).exists()
            && store.join(format!("{digest}.so")).exists()
    }

    fn vet(&self, digest: &str) {
        let Some(store) = &self.store else { return };
        write_whole(&store.join(format!("{digest}.vetted")), |tmp| {
            std::fs::write(tmp, "")
        });
    }

    fn sealed(&self, file: &Path, stamp: &str) -> Option<(PathBuf, String)> {
        let store = self.store.as_ref()?;
        let note = std::fs::read_to_string(store.join(sealed_note(file))).ok()?;
        let (at, digest) = note.split_once('\t')?;
        let copy = store.join(format!("{digest}.so"));
        (at == stamp && copy.exists()).then(|| (copy, digest.to_string()))
    }

    fn seal(&self, file: &Path, stamp: &str, digest: &str) {
        let Some(store) = &self.store else { return };
        write_whole(&store.join(sealed_note(file)), |tmp| {
            std::fs::write(tmp, format!("{stamp}\t{digest}"))
        });
    }

    fn replaced(&self, digest: &str, previous: &str) {
        let Some(store) = &self.store else { return };
        write_whole(&store.join(format!("{digest}.previous")), |tmp| {
            std::fs::write(tmp, previous)
        });
    }

    fn rollback(&self, digest: &str) -> Option<PathBuf> {
        let store = self.store.as_ref()?;
        let previous = std::fs::read_to_string(store.join(format!("{digest}.previous"))).ok()?;
        let previous = previous.trim();
        if self.quarantined(previous).is_some() {
            return None;
        }
        let kept = store.join(format!("{previous}.so"));
        kept.exists().then_some(kept)
    }

    fn quarantined(&self, digest: &str) -> Option<(String, String)> {
        let notes = self.peers.supervisor();
        notes
            .quarantined
            .iter()
            .find(|q| q.digest == digest)
            .map(|q| (q.app.clone(), q.why()))
    }
}

/// One live worker as status shows it.
pub struct Peer {
    pub place: usize,
    pub pid: u32,
    pub counts: Counts,
    /// Resident memory, bytes.
    pub rss: u64,
}

/// The shared area as a worker reads it.
pub struct Peers {
    area: &'static [AtomicU64],
    rows: usize,
    own: usize,
}

impl Peers {
    pub fn new(area: &'static [AtomicU64], rows: usize, own: usize) -> Self {
        Peers { area, rows, own }
    }

    /// Writes this worker's counters into its row.
    pub fn publish(&self, counts: &Counts) {
        if let (Some(row), Ok(text)) = (Row::of(self.area, self.own), serde_json::to_string(counts))
        {
            row.snapshot().write(&text);
        }
    }

    /// Every worker serving or draining now, by place; this one's counters
    /// are `own_now`.
    pub fn workers(&self, own_now: &Counts) -> Vec<Peer> {
        let mut peers: Vec<Peer> = (0..self.rows)
            .filter_map(|i| {
                let row = Row::of(self.area, i)?;
                if !matches!(row.phase(), Some(Phase::Ready | Phase::Draining)) || row.pid() == 0 {
                    return None;
                }
                let counts = if i == self.own {
                    own_now.clone()
                } else {
                    read_cell(Some(row.snapshot()))
                };
                Some(Peer {
                    place: row.place(),
                    pid: row.pid(),
                    counts,
                    rss: rss_bytes(row.pid()),
                })
            })
            .collect();
        peers.sort_by_key(|p| (p.place, p.pid));
        peers
    }

    /// The worker processes in service (serving, not draining), and the
    /// ones of them the watchdog found stuck, with where (its note).
    pub fn stuck(&self) -> (Vec<StuckWorker>, usize) {
        let now = monotonic_millis();
        let mut serving = 0;
        let mut stuck = Vec::new();
        for i in 0..self.rows {
            let Some(row) = Row::of(self.area, i) else {
                continue;
            };
            if row.phase() != Some(Phase::Ready) || row.pid() == 0 {
                continue;
            }
            serving += 1;
            if let Some(stuck_for) = stuck_for(row.pulse(), now) {
                stuck.push(StuckWorker {
                    worker: row.place(),
                    pid: Some(row.pid()),
                    stuck_for,
                    place: row.note().read_settled(),
                });
            }
        }
        stuck.sort_by_key(|s| s.worker);
        (stuck, serving)
    }

    /// The counters of every worker that has ended.
    pub fn retired(&self) -> Counts {
        read_cell(retired_cell(self.area))
    }

    /// What the supervisor counted.
    pub fn supervisor(&self) -> SupervisorNotes {
        read_cell(supervisor_cell(self.area))
    }
}

/// What a cell of the area holds (its JSON), or the default when it holds
/// nothing readable yet.
pub fn read_cell<T: serde::de::DeserializeOwned + Default>(cell: Option<TextCell>) -> T {
    cell.and_then(|c| serde_json::from_str(&c.read_settled()).ok())
        .unwrap_or_default()
}

/// A worker process's counters (it has one loop) with what it alone has:
/// its logs' line counts and its blocking pool.
pub fn process_counts(
    stats: &Stats,
    access_log: Option<&AccessLog>,
    pool: Option<&Pool>,
) -> Counts {
    let mut counts = Counts::of(stats, 0);
    let error = crate::ops::error_log::counts().map(|c| ("error", c));
    let access = access_log.map(|l| ("access", l.counts()));
    for (name, c) in error.into_iter().chain(access) {
        counts.logs.insert(name.to_string(), c.numbers());
    }
    counts.pool = pool.map(crate::ops::survival::pool_json);
    counts
}

/// A process's resident memory, in bytes (0 if unreadable).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}
