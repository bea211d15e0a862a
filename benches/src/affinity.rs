//! CPU pinning: which CPUs this process may use, and how to restrict itself
//! or a child to some of them (what `taskset` does, via sched_setaffinity).

use std::io;

/// The CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, and the size passed is
    // the set's own size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's capacity.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// A cpu_set_t holding `cpus` (ids at or past CPU_SETSIZE are ignored).
pub fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `cpu` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    set
}

/// Restricts the calling thread, and every thread it starts later, to `set`.
/// Async-signal-safe (one system call), so a child may call it between fork
/// and exec.
pub fn pin_current(set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: `set` points to a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Parses a CPU list as taskset writes it: `0`, `1,3`, `0-2,5`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list {s:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("empty CPU list {s:?}"));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Splits the allowed CPUs into (server, load generator): the first CPU for
/// the server and the rest for the load, or `None` on a single CPU.
pub fn split_for_benchmark() -> Option<(Vec<usize>, Vec<usize>)> {
    let cpus = allowed_cpus();
    (cpus.len() > 1).then(|| (cpus[..1].to_vec(), cpus[1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("3,0-2,2").unwrap(), vec![0, 1, 2, 3]);
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn this_process_has_a_cpu() {
        assert!(!allowed_cpus().is_empty());
    }
}
