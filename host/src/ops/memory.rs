//! The memory the host runs under, and the share of it clients may make it
//! hold (`--max-buffered`): its default and the checks on a given value.

use crate::budget::size_text;
use crate::error::BootError;
use crate::settings::Settings;

/// The share of the memory limit buffered bodies and messages may take by
/// default: a quarter, leaving the rest to the apps, the host's own
/// buffers and the page cache.
const DEFAULT_SHARE: usize = 4;

/// The memory limit the host runs under, and where it was read: the
/// cgroup's limit when it is set and below the machine's memory, else the
/// machine's memory (`MemTotal`); `None` when neither can be read. The
/// cgroup v2 limit is the least `memory.max` from the process's own cgroup
/// (`/proc/self/cgroup`: a systemd unit's `MemoryMax=`, a container's
/// limit) up to the root; v1's is the root `memory.limit_in_bytes`.
pub fn memory_limit() -> Option<(usize, &'static str)> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text))
        .map(|n| (n, "MemTotal in /proc/meminfo"));
    let read = |path: &std::path::Path| std::fs::read_to_string(path).ok();
    let v2 = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|own| cgroup_v2_limit(&own, read))
        .map(|n| (n, "the cgroup's memory.max"));
    let cgroup = v2.or_else(|| {
        let text = read("/sys/fs/cgroup/memory/memory.limit_in_bytes".as_ref())?;
        Some((
            text.trim().parse::<usize>().ok()?,
            "the cgroup's memory.limit_in_bytes",
        ))
    });
    match (cgroup, total) {
        (Some(c), Some(t)) if c.0 < t.0 => Some(c),
        (_, Some(t)) => Some(t),
        (c, None) => c,
    }
}

/// The least `memory.max` on the way from the cgroup v2 path named in
/// `own` (the `0::PATH` line of /proc/self/cgroup) up to the root of
/// /sys/fs/cgroup; `None` where no level sets one (`max`, or no file).
fn cgroup_v2_limit(own: &str, read: impl Fn(&std::path::Path) -> Option<String>) -> Option<usize> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mut dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let mut least: Option<usize> = None;
    loop {
        if let Some(n) = read(&dir.join("memory.max")).and_then(|t| t.trim().parse().ok()) {
            least = Some(least.map_or(n, |l: usize| l.min(n)));
        }
        if dir == std::path::Path::new("/sys/fs/cgroup") || !dir.pop() {
            return least;
        }
    }
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn mem_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The largest body any app may take and the largest WebSocket message:
/// the least `--max-buffered` can be (one of each must fit).
fn floor(settings: &Settings) -> (usize, &'static str) {
    let body = settings.conn.max_body;
    if body >= settings.ws.max_message {
        (body, "--max-body")
    } else {
        (settings.ws.max_message, "--ws-max-message")
    }
}

/// The budget of buffered bodies and messages: `--max-buffered`, or a
/// quarter of the memory limit (at least the floor), with the rule that
/// gave it for the start-up log. A given value below the floor is refused.
pub fn max_buffered(
    given: Option<usize>,
    settings: &Settings,
) -> Result<(usize, String), BootError> {
    let (least, by) = floor(settings);
    if let Some(given) = given {
        if given < least {
            return Err(BootError::BelowFloor {
                setting: "--max-buffered",
                given: size_text(given),
                floor: by,
                least: size_text(least),
            });
        }
        return Ok((given, "--max-buffered".to_string()));
    }
    Ok(match memory_limit() {
        Some((limit, from)) => {
            let share = (limit / DEFAULT_SHARE).max(least);
            let rule = format!("a quarter of {} MiB ({from}), at least {by}", limit >> 20);
            (share, rule)
        }
        None => (
            least.max(1 << 30),
            format!("1G (no memory limit readable), at least {by}"),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_bytes() {
        let text = "MemTotal:       24683584 kB\nMemFree:  1 kB\n";
        assert_eq!(mem_total(text), Some(24_683_584 * 1024));
        assert_eq!(mem_total("nothing"), None);
    }

    #[test]
    fn the_cgroup_limit_is_the_least_from_the_own_cgroup_up() {
        let files = |path: &std::path::Path| match path.to_str()? {
            "/sys/fs/cgroup/system.slice/stoa.service/memory.max" => Some("1073741824\n".into()),
            "/sys/fs/cgroup/system.slice/memory.max" => Some("max\n".into()),
            "/sys/fs/cgroup/memory.max" => Some("4294967296\n".into()),
            _ => None,
        };
        let own = "0::/system.slice/stoa.service\n";
        assert_eq!(cgroup_v2_limit(own, files), Some(1 << 30));
        // A container's namespace shows its own cgroup as the root.
        assert_eq!(cgroup_v2_limit("0::/\n", files), Some(4 << 30));
        // No limit on the way up, or no v2 line (cgroup v1 only).
        assert_eq!(cgroup_v2_limit("0::/user.slice\n", |_| None), None);
        assert_eq!(cgroup_v2_limit("4:memory:/x\n", files), None);
    }
}
