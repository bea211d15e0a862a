//! What /proc says about a server process: CPU time used (nanoseconds from
//! /proc/PID/task/*/schedstat, else clock ticks of utime + stime from
//! /proc/PID/stat) and resident memory (VmRSS, VmHWM from
//! /proc/PID/status), and resetting the peak so each point gets its own;
//! each for one process or summed over a process and its descendants (a
//! supervisor and its worker processes, a master and its workers).

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

/// `pid` and every live process descended from it (a supervisor's worker
/// processes and theirs), `pid` first: the parent field of each
/// /proc/*/stat. Just `[pid]` when it has no children (or is gone).
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut links = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            // A process that exits between the listing and the read is skipped.
            if let Some(parent) = std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| parse_ppid(&stat))
            {
                links.push((child, parent));
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for &(child, p) in &links {
            if p == parent && child != pid && !tree.contains(&child) {
                tree.push(child);
            }
        }
        i += 1;
    }
    tree
}

/// The parent PID (field 4) of a /proc/PID/stat line.
pub fn parse_ppid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// [`cpu_time`] summed over [`process_tree`]: a process-mode server's
/// supervisor and workers. None when `pid` itself is gone. A process that
/// ends between two readings takes its time with it: use differences over
/// spans in which the tree stays the same.
pub fn tree_cpu_time(pid: u32) -> Option<Duration> {
    let mut total = cpu_time(pid)?;
    for p in process_tree(pid).into_iter().skip(1) {
        total += cpu_time(p).unwrap_or_default();
    }
    Some(total)
}

/// A `kB` field of /proc/PID/status summed over [`process_tree`]; None when
/// `pid` itself has no such field.
pub fn tree_status_kib(pid: u32, field: &str) -> Option<u64> {
    let mut total = status_kib(pid, field)?;
    for p in process_tree(pid).into_iter().skip(1) {
        total += status_kib(p, field).unwrap_or(0);
    }
    Some(total)
}

/// Resident set size of the whole tree, KiB (shared pages count once per
/// process, as VmRSS counts them).
pub fn tree_rss_kib(pid: u32) -> Option<u64> {
    tree_status_kib(pid, "VmRSS")
}

/// The sum of each process's peak RSS since start or the last
/// [`tree_reset_peak`], KiB (the peaks need not have come at once).
pub fn tree_peak_rss_kib(pid: u32) -> Option<u64> {
    tree_status_kib(pid, "VmHWM")
}

/// [`reset_peak`] on every process of the tree; false if any refused.
pub fn tree_reset_peak(pid: u32) -> bool {
    let refused = process_tree(pid)
        .into_iter()
        .map(reset_peak)
        .filter(|&done| !done)
        .count();
    refused == 0
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

    #[test]
    fn parses_ppid() {
        assert_eq!(parse_ppid("42 (a) b) (c) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parse_ppid("1 (init) S 0 1 1"), Some(0));
        assert_eq!(parse_ppid("garbage"), None);
    }

    #[test]
    fn the_tree_holds_children_and_grandchildren() {
        let me = std::process::id();
        // sh starts a sleep of its own: a child and a grandchild.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .expect("start sh");
        let child_pid = child.id();
        let of_child = |p: u32| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|stat| parse_ppid(&stat))
                == Some(child_pid)
        };
        // Idle: the sleep has replaced its copy of sh, and both wait.
        let asleep = |p: u32, comm: &str| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            stat.contains(&format!("({comm}) S "))
        };
        let mut tree = Vec::new();
        for _ in 0..500 {
            tree = process_tree(me);
            let sleeping = tree.iter().any(|&p| of_child(p) && asleep(p, "sleep"));
            if sleeping && asleep(child_pid, "sh") {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let grandchildren: Vec<u32> = tree.iter().copied().filter(|&p| of_child(p)).collect();
        // The sum over the child's tree, while its two processes sleep and
        // their RSS stands still (this test's own RSS moves with the tests
        // running beside it, so it is not compared with itself).
        let child_tree_rss = tree_rss_kib(child_pid);
        let parts: Option<u64> = std::iter::once(child_pid)
            .chain(grandchildren.iter().copied())
            .map(rss_kib)
            .sum();
        // Stop the grandchild (by its PID: it is ours) before its parent.
        for &p in &grandchildren {
            let _ = std::process::Command::new("kill")
                .arg(p.to_string())
                .status();
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(tree.first(), Some(&me));
        assert!(tree.contains(&child_pid), "{tree:?}");
        assert!(!grandchildren.is_empty(), "no grandchild in {tree:?}");
        assert!(tree_cpu_time(me).is_some());
        assert!(parts.is_some_and(|kib| kib > 0), "{parts:?}");
        assert_eq!(child_tree_rss, parts);
    }
}
