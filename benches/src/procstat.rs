//! What /proc says about a server process: CPU time used (nanoseconds from
//! /proc/PID/task/*/schedstat, else clock ticks of utime + stime from
//! /proc/PID/stat) and resident memory (VmRSS, VmHWM from
//! /proc/PID/status), and resetting the peak so each point gets its own.

use std::time::Duration;

/// CPU time of all of `pid`'s live threads so far: the sum of their
/// schedstat run times (nanoseconds) where the kernel has schedstat, else
/// utime + stime (clock ticks, usually 10 ms). Use differences only: the
/// schedstat sum leaves out threads that have exited, the ticks do not.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    schedstat_time(pid).or_else(|| stat_time(pid))
}

/// Sum of the first field (time on CPU, ns) of /proc/PID/task/*/schedstat.
pub fn schedstat_time(pid: u32) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    let mut any = false;
    for task in tasks.flatten() {
        // A thread that exits between the listing and the read is skipped.
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        total = total.saturating_add(parse_schedstat(&text)?);
        any = true;
    }
    any.then(|| Duration::from_nanos(total))
}

/// The run time in nanoseconds from one schedstat line
/// (`run_ns wait_ns timeslices`).
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// User plus system CPU time of all of `pid`'s threads, from /proc/PID/stat
/// in clock ticks.
pub fn stat_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; the fields
    // after the last ')' are fixed: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    Some(Duration::from_nanos((utime + stime) * 1_000_000_000 / hz))
}

/// A `kB` field of /proc/PID/status (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        value.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// Current resident set size, KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS")
}

/// Peak resident set size since start or the last [`reset_peak`], KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM")
}

/// Resets VmHWM to the current RSS (proc(5): writing 5 to clear_refs);
/// false where the kernel or permissions do not allow it.
pub fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(cpu_time(me).is_some());
        assert!(stat_time(me).is_some());
        assert!(rss_kib(me).unwrap_or(0) > 0);
        assert!(peak_rss_kib(me).unwrap_or(0) >= rss_kib(me).unwrap_or(0) / 2);
    }

    #[test]
    fn parses_schedstat() {
        assert_eq!(parse_schedstat("1234567 89 10\n"), Some(1_234_567));
        assert_eq!(parse_schedstat("18446744073709551615 0 0"), Some(u64::MAX));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn schedstat_moves_in_nanoseconds() {
        let me = std::process::id();
        let Some(before) = schedstat_time(me) else {
            return; // a kernel without CONFIG_SCHEDSTATS
        };
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(3) {
            std::hint::black_box(start.elapsed());
        }
        // A running thread's total is brought up to date when it is
        // switched out (or at a tick, which may not come within 3 ms on a
        // quiet machine): sleep once so the spin is on the books.
        std::thread::sleep(Duration::from_millis(1));
        let after = schedstat_time(me).unwrap_or_default();
        // Ticks would move by 0 or 10 ms; the run time moves by about 3 ms.
        assert!(after > before, "{before:?} -> {after:?}");
    }
}
