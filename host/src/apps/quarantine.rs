//! What a worker process's apps thread tells its supervisor, and asks it:
//! which plugin it is loading or constructing now (a worker that dies then
//! died of that plugin), and which plugin files' bytes are quarantined
//! (they killed worker processes too often: refused, and taken out of
//! service where mounted, until a file with other bytes replaces them).
//! It also keeps a copy of every plugin file a worker loads, and which
//! bytes each replaced, so a quarantined generation rolls back to the one
//! before it, in every worker, fresh ones included. Thread mode has no
//! guard.

/// The supervisor's side, as the apps thread sees it.
pub trait Guard: Send + Sync {
    /// The apps thread is about to run plugin code: `what` (its app, or
    /// its file while it loads) from bytes `digest`.
    fn entering(&self, what: &str, digest: &str);
    /// That plugin code returned.
    fn left(&self);
    /// The app and why, if bytes `digest` are quarantined.
    fn quarantined(&self, digest: &str) -> Option<(String, String)>;
    /// The apps mounted changed: `names` has a line per counters slot,
    /// `name\tdigest` (`-` for none mounted), for the supervisor to name
    /// the app (and bytes) a dead worker's loop was in.
    fn names(&self, names: &str);
    /// Keeps a copy of bytes `digest` (the vetted private copy at `copy`)
    /// for a later rollback.
    fn keep(&self, digest: &str, copy: &std::path::Path);
    /// Bytes `digest` hold an app mounted at `mount`.
    fn mounted(&self, digest: &str, mount: &str);
    /// The mount bytes `digest` held, as `mounted` told it.
    fn mount_of(&self, digest: &str) -> Option<String>;
    /// Holds the host's vetting turn (one worker copies and probes a
    /// plugin at a time) until the value is dropped.
    fn vetting(&self) -> Option<std::fs::File>;
    /// True if bytes `digest` passed the load probe in some worker.
    fn vetted(&self, digest: &str) -> bool;
    /// Bytes `digest` passed the load probe.
    fn vet(&self, digest: &str);
    /// The sealed copy another worker took of `file` when it had `stamp`
    /// (what to load instead of the file itself), with its bytes' digest.
    fn sealed(&self, file: &std::path::Path, stamp: &str) -> Option<(std::path::PathBuf, String)>;
    /// Bytes `digest` are what `file` held at `stamp`.
    fn seal(&self, file: &std::path::Path, stamp: &str, digest: &str);
    /// Bytes `digest` replaced bytes `previous` at their file.
    fn replaced(&self, digest: &str, previous: &str);
    /// The kept copy of the bytes quarantined bytes `digest` replaced, if
    /// there is one and it is not quarantined itself.
    fn rollback(&self, digest: &str) -> Option<std::path::PathBuf>;
}
