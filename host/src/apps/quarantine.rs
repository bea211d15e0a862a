//! What a worker process's apps thread tells its supervisor, and asks it:
//! which plugin it is loading or constructing now (a worker that dies then
//! died of that plugin), and which plugin files' bytes are quarantined
//! (they killed worker processes too often: refused, and taken out of
//! service where mounted, until a file with other bytes replaces them).
//! Thread mode has no guard.

/// The supervisor's side, as the apps thread sees it.
pub trait Guard: Send + Sync {
    /// The apps thread is about to run plugin code: `what` (its app, or
    /// its file while it loads) from bytes `digest`.
    fn entering(&self, what: &str, digest: &str);
    /// That plugin code returned.
    fn left(&self);
    /// The app and why, if bytes `digest` are quarantined.
    fn quarantined(&self, digest: &str) -> Option<(String, String)>;
}
