//! The memory the host runs under, and the share of it clients may make it
//! hold (`--max-buffered`): its default and the checks on a given value.

use crate::budget::size_text;
use crate::cli::Cli;

/// The share of the memory limit buffered bodies and messages may take by
/// default: a quarter, leaving the rest to the apps, the host's own
/// buffers and the page cache.
const DEFAULT_SHARE: usize = 4;

/// The memory limit the host runs under, and where it was read: the
/// cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) when it is
/// set and below the machine's memory, else the machine's memory
/// (`MemTotal`); `None` when neither can be read.
pub fn memory_limit() -> Option<(usize, &'static str)> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text))
        .map(|n| (n, "MemTotal in /proc/meminfo"));
    let cgroup = [
        ("/sys/fs/cgroup/memory.max", "the cgroup's memory.max"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "the cgroup's memory.limit_in_bytes",
        ),
    ]
    .into_iter()
    .find_map(|(path, name)| {
        let text = std::fs::read_to_string(path).ok()?;
        Some((text.trim().parse::<usize>().ok()?, name))
    });
    match (cgroup, total) {
        (Some(c), Some(t)) if c.0 < t.0 => Some(c),
        (_, Some(t)) => Some(t),
        (c, None) => c,
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
fn floor(cli: &Cli) -> (usize, &'static str) {
    let body = cli
        .app_sections
        .values()
        .filter_map(|s| s.limits.max_body)
        .fold(cli.max_body, usize::max);
    if body >= cli.ws_max_message {
        (body, "--max-body")
    } else {
        (cli.ws_max_message, "--ws-max-message")
    }
}

/// The budget of buffered bodies and messages: `--max-buffered`, or a
/// quarter of the memory limit (at least the floor), with the rule that
/// gave it for the start-up log. A given value below the floor is refused.
pub fn max_buffered(cli: &Cli) -> Result<(usize, String), String> {
    let (least, by) = floor(cli);
    if let Some(given) = cli.max_buffered {
        if given < least {
            return Err(format!(
                "--max-buffered {} is below {by} {}: such a body or message could never be held; \
                 give --max-buffered {} (or lower {by})",
                size_text(given),
                size_text(least),
                size_text(least)
            ));
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
}
