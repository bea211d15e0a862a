//! What one worker's loop is given besides its poller and listeners: the
//! fixed settings and the live handles it reads and writes.

use super::spares::Spares;
use crate::apps::pool::Pool;
use crate::apps::registry::AppTable;
use crate::budget::Budget;
use crate::control::Control;
use crate::open_count::OpenCount;
use crate::ops::access_log::AccessLog;
use crate::ops::admin::Sources;
use crate::ops::peers::Peers;
use crate::ops::watchdog::Board;
use crate::settings::Settings;
use crate::stats::Stats;
use std::sync::Arc;

/// The handles every worker's loop holds (each a clone of the host's).
pub struct Handles {
    pub settings: Arc<Settings>,
    /// The mounted apps.
    pub apps: AppTable,
    /// Runs handlers that declare they block; `None` runs them on the loop
    /// (`--blocking-on-loop`, Tornado's behaviour).
    pub pool: Option<Arc<Pool>>,
    pub access_log: Option<Arc<AccessLog>>,
    /// Draining and the forced stop.
    pub control: Arc<Control>,
    /// The workers' heartbeats, read by the watchdog and the endpoints.
    pub board: Arc<Board>,
    /// Every worker's counters (this one writes its own block only).
    pub stats: Arc<Stats>,
    /// The host-wide budget of buffered bodies and messages.
    pub budget: Budget,
    /// Process mode: the other worker processes' counters.
    pub peers: Option<Arc<Peers>>,
    /// The host-wide count of open connections, against
    /// `settings.max_connections`.
    pub open: OpenCount,
    /// The process's spare descriptors, one per loop under `--overload
    /// shed` (`spares`).
    pub spares: Spares,
    /// The TLS sites this process serves (status and metrics show their
    /// certificates).
    pub tls: Option<Arc<crate::listen::tls::TlsSites>>,
}

impl Handles {
    /// What the host's endpoints read.
    pub fn sources(&self) -> Sources<'_> {
        Sources {
            settings: &self.settings,
            apps: &self.apps,
            pool: self.pool.as_deref(),
            access_log: self.access_log.as_deref(),
            peers: self.peers.as_deref(),
            control: &self.control,
            board: &self.board,
            stats: &self.stats,
            budget: &self.budget,
            tls: self.tls.as_deref(),
        }
    }
}
