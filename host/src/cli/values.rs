//! Values people type: sizes with units, durations with units, listen
//! addresses in the forms nginx and gunicorn accept, file modes, backend
//! and log level names, mounts. Every refusal names what was given and
//! shows a valid form.

use crate::settings::Bind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// A size: bytes, or with a binary unit `K`/`KB`/`KiB`, `M`/`MB`/`MiB`,
/// `G`/`GB`/`GiB` (any case; every unit is a power of 1024, as in nginx).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = (&t[..split], t[split..].trim());
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(format!(
                "unknown size unit {unit:?} in {s:?}: use bytes or K, M, G (KiB, MiB, GiB), e.g. 8KiB or 1M"
            ))
        }
    };
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && n.leading_zeros() >= shift => Ok(n << shift),
        Ok(0) => Err(format!("{s:?} is zero: give a positive size, e.g. 1M")),
        _ => Err(format!(
            "expected a positive size in bytes or with a unit (8KiB, 1M, 1GiB), got {s:?}"
        )),
    }
}

/// A size that must fit in memory (`usize`).
pub fn parse_size_usize(s: &str) -> Result<usize, String> {
    let n = parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("{s:?} is larger than this machine can address"))
}

/// Longest duration any timeout takes: one day.
const MAX_DURATION: Duration = Duration::from_secs(86_400);

/// Shortest timeout (and WebSocket ping interval, drain and watchdog
/// period) taken: deadlines are checked every tenth of the shortest
/// timeout but no more often than every 10 ms (`server::sweep_interval`,
/// the watchdog's tick), so a shorter one could not be kept and would
/// only turn every client away.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);

/// Shortest `--loop-block-warn`: under a millisecond every handler
/// would be reported.
pub const MIN_BLOCK_WARN: Duration = Duration::from_millis(1);

/// A duration: `500ms`, `30s`, `2m`, `1h`, `1m30s` (humantime), or a bare
/// number in `bare_unit` (seconds for timeouts), at least `min`.
fn parse_duration_in(
    s: &str,
    bare_unit: Duration,
    bare_name: &str,
    min: Duration,
) -> Result<Duration, String> {
    let t = s.trim();
    let d = match t.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => bare_unit.mul_f64(n.min(MAX_DURATION.as_secs_f64() * 1e3)),
        Ok(_) => return Err(format!("{s:?} is not a positive duration: e.g. 500ms, 30s or 2m")),
        Err(_) => humantime::parse_duration(t).map_err(|e| {
            format!("cannot read {s:?} as a duration ({e}): use a number of {bare_name} or a unit, e.g. 500ms, 30s, 2m")
        })?,
    };
    if d.is_zero() {
        return Err(format!(
            "{s:?} is zero: give a positive duration, e.g. 500ms"
        ));
    }
    if d > MAX_DURATION {
        return Err(format!("{s:?} is over the longest allowed, 24h"));
    }
    if d < min {
        let min = humantime::format_duration(min);
        return Err(format!(
            "{s:?} is shorter than the smallest allowed, {min}: give at least {min}"
        ));
    }
    Ok(d)
}

/// A timeout, at least `MIN_TIMEOUT`; a bare number is seconds (`30`, `0.5`).
pub fn parse_secs(s: &str) -> Result<Duration, String> {
    parse_duration_in(s, Duration::from_secs(1), "seconds", MIN_TIMEOUT)
}

/// Shortest `--init-timeout`: an app's constructor gets at least a second
/// at start-up (under it, any constructor that opens a file or a
/// connection would be refused on a busy machine).
pub const MIN_INIT_TIMEOUT: Duration = Duration::from_secs(1);

/// `--init-timeout`: at least `MIN_INIT_TIMEOUT`; a bare number is seconds.
pub fn parse_init_timeout(s: &str) -> Result<Duration, String> {
    parse_duration_in(s, Duration::from_secs(1), "seconds", MIN_INIT_TIMEOUT)
}

/// A duration, at least `MIN_BLOCK_WARN`; a bare number is milliseconds (`100`).
pub fn parse_millis(s: &str) -> Result<Duration, String> {
    parse_duration_in(s, Duration::from_millis(1), "milliseconds", MIN_BLOCK_WARN)
}

/// A listen address: `unix:PATH` (a Unix-domain socket), or a TCP address
/// (see `parse_tcp`).
pub fn parse_bind(s: &str) -> Result<Bind, String> {
    if let Some(rest) = s.trim().strip_prefix("tls://") {
        return match parse_tcp(rest)? {
            Bind::Tcp(addr) => Ok(Bind::Tls(addr)),
            _ => Err(format!(
                "--bind {s:?}: a tls:// bind takes an IP address and port, e.g. \
                 tls://127.0.0.1:8443 or tls://:8443"
            )),
        };
    }
    match s.trim().strip_prefix("unix:") {
        Some("") => Err(format!(
            "--bind {s:?}: give the socket's path, e.g. unix:/run/stoa.sock"
        )),
        Some(path) => Ok(Bind::Unix(PathBuf::from(path))),
        None => parse_tcp(s),
    }
}

/// A TCP listen address: `HOST:PORT`, `IP:PORT`, `[IPv6]:PORT`, `:PORT`
/// (every IPv4 address, as gunicorn reads it) or a bare `PORT` (the same,
/// as nginx's `listen 8000`). A host name stands for every address it
/// resolves to, IPv4 first, as in nginx (each is bound); `localhost` for
/// the loopback addresses 127.0.0.1 and ::1 whatever the resolver says
/// (RFC 6761: an /etc/hosts often lists 127.0.0.1 alone).
pub fn parse_tcp(s: &str) -> Result<Bind, String> {
    let t = s.trim();
    if let Ok(addr) = t.parse::<SocketAddr>() {
        return Ok(Bind::Tcp(addr));
    }
    let port_only = t.strip_prefix(':').unwrap_or(t);
    if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
        let port = port_only
            .parse::<u16>()
            .map_err(|_| format!("--bind {s:?}: the port must be 0-65535"))?;
        return Ok(Bind::Tcp(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            port,
        )));
    }
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(format!(
            "--bind {s:?}: expected HOST:PORT, :PORT or PORT, e.g. 127.0.0.1:8000"
        ));
    };
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("--bind {s:?}: the port {port:?} must be a number 0-65535"))?;
    let resolved: Vec<SocketAddr> = if host.eq_ignore_ascii_case("localhost") {
        vec![
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), port),
        ]
    } else {
        (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("--bind {s:?}: cannot resolve {host:?}: {e}"))?
            .collect()
    };
    // IPv4 first (the first line printed, the port of `:0` chosen on it),
    // each address once.
    let mut addrs: Vec<SocketAddr> = Vec::with_capacity(resolved.len());
    for a in resolved
        .iter()
        .filter(|a| a.is_ipv4())
        .chain(resolved.iter().filter(|a| a.is_ipv6()))
    {
        if !addrs.contains(a) {
            addrs.push(*a);
        }
    }
    if addrs.is_empty() {
        return Err(format!("--bind {s:?}: {host:?} has no address"));
    }
    Ok(Bind::Name {
        name: host.to_string(),
        addrs,
    })
}

/// The known name closest to `name`, if it is close enough to be a typo.
pub fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| k)
}

/// `--tls-client-auth`: required or optional.
pub fn parse_client_auth(s: &str) -> Result<crate::settings::ClientAuth, String> {
    crate::settings::ClientAuth::parse(s)
}

/// `--tls-min-version`: 1.2 or 1.3.
pub fn parse_min_version(s: &str) -> Result<crate::settings::MinVersion, String> {
    crate::settings::MinVersion::parse(s)
}

/// Longest `--hsts` max-age: two years (browsers' preload lists ask for
/// one).
pub const MAX_HSTS: Duration = Duration::from_secs(2 * 365 * 24 * 3600);

/// `--hsts`: a max-age, 0 (no header) to two years; a bare number is
/// seconds.
pub fn parse_hsts(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let d = match t.parse::<u64>() {
        Ok(n) => Duration::from_secs(n),
        Err(_) => humantime::parse_duration(t).map_err(|e| {
            format!("cannot read {s:?} as a max-age ({e}): a number of seconds or e.g. 365d")
        })?,
    };
    if d > MAX_HSTS {
        return Err(format!(
            "{s:?} is over the longest allowed max-age, two years: give at most 730d"
        ));
    }
    Ok(d)
}

pub fn parse_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s.trim_start_matches("0o"), 8) {
        Ok(m) if m <= 0o777 => Ok(m),
        _ => Err(format!(
            "expected an octal file mode such as 660 or 666, got {s:?}"
        )),
    }
}

/// Readiness backends of other systems, and the Linux one to use instead.
const FOREIGN_POLLERS: [(&str, &str); 4] = [
    ("kqueue", "epoll"),
    ("iocp", "epoll"),
    ("devpoll", "poll"),
    ("evport", "epoll"),
];

/// `--poller`: `auto` or a backend's name; another name is refused with
/// the nearest (`uring` is `io_uring`) or the Linux counterpart of another
/// system's backend (`kqueue` is BSD's: `epoll` here).
pub fn parse_poller(s: &str) -> Result<String, String> {
    let names: Vec<&str> = std::iter::once("auto")
        .chain(crate::poller::BACKENDS.iter().copied())
        .collect();
    if names.contains(&s) {
        return Ok(s.to_string());
    }
    let lower = s.to_ascii_lowercase();
    let hint = match FOREIGN_POLLERS
        .iter()
        .find(|(other, _)| lower.contains(other))
    {
        Some((other, ours)) => {
            format!(" ({other} is not a Linux backend: did you mean {ours:?}?)")
        }
        None => nearest(&lower, &names)
            .map(|n| format!(" (did you mean {n:?}?)"))
            .unwrap_or_default(),
    };
    Err(format!(
        "unknown poller {s:?}{hint}; valid: {}",
        names.join(", ")
    ))
}

pub fn parse_level(s: &str) -> Result<log::LevelFilter, String> {
    s.parse().map_err(|_| {
        format!("unknown log level {s:?}: use error, warn, info, debug or trace (or off)")
    })
}

/// `--stream-queue`: a size from 4K to 64M (below, every chunk would
/// wait; above, a slow client could hold that much per connection).
pub fn parse_stream_queue(s: &str) -> Result<usize, String> {
    const RANGE: std::ops::RangeInclusive<usize> = 4 * 1024..=64 * 1024 * 1024;
    let n = parse_size_usize(s)?;
    if RANGE.contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "stream queue {s:?} is out of range: give 4K to 64M, e.g. 256K"
        ))
    }
}

/// A yes-or-no word: `on`/`off`, `true`/`false`, `yes`/`no`, `1`/`0`, in
/// any case.
fn yes_or_no(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Some(true),
        "off" | "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// `on` or `off` (also `true`/`false`, `yes`/`no`, `1`/`0`).
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    yes_or_no(s).ok_or_else(|| format!("{s:?} is neither on nor off"))
}

/// A switch flag's value from its `STOA_*` variable: true or false, or the
/// other spellings environments use (1/0, yes/no, on/off).
pub fn parse_switch(s: &str) -> Result<bool, String> {
    yes_or_no(s)
        .ok_or_else(|| format!("{s:?} is neither true nor false (1/0, yes/no and on/off also do)"))
}

/// An HTTP/2 flow-control window: from 16K (a frame) to 2^31-1 bytes.
pub fn parse_h2_window(s: &str) -> Result<u32, String> {
    let n = parse_size(s)?;
    match n {
        16_384..=2_147_483_647 => Ok(n as u32),
        0..16_384 => Err(format!(
            "window {s:?} is below one frame: give at least 16K, e.g. 64K"
        )),
        _ => Err(format!(
            "window {s:?} is over HTTP/2's largest, 2^31-1 bytes: give at most 2047M"
        )),
    }
}

/// An HTTP/2 connection window: at least HTTP/2's initial 65,535 bytes,
/// which no setting can lower (RFC 9113 §6.9.2).
pub fn parse_h2_conn_window(s: &str) -> Result<u32, String> {
    match parse_h2_window(s)? {
        n if n < 65_535 => Err(format!(
            "connection window {s:?} is below HTTP/2's initial 65535 bytes, which cannot be \
             lowered: give at least 64K, e.g. 1M"
        )),
        n => Ok(n),
    }
}

pub fn parse_mount(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, prefix)) if !name.is_empty() && prefix.starts_with('/') => {
            Ok((name.to_string(), prefix.to_string()))
        }
        _ => Err(format!("expected NAME=/prefix, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("8KiB"), Ok(8 << 10));
        assert_eq!(parse_size("8k"), Ok(8 << 10));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1 MB"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        for bad in ["", "0", "M", "1T", "-1", "1.5M", "99999999999G", "1 Mbit"] {
            let e = parse_size(bad).expect_err(bad);
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn durations_take_units_and_bare_numbers() {
        assert_eq!(parse_secs("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_secs("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_secs("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_secs("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_secs("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_secs("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_millis("100"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_millis("1s"), Ok(Duration::from_secs(1)));
        for bad in ["0", "0s", "-1", "ten", "25h", "NaN", "1e400"] {
            let e = parse_secs(bad).expect_err(bad);
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert_eq!(parse_secs("100ms"), Ok(MIN_TIMEOUT));
        for short in ["1ns", "99ms", "0.01"] {
            let e = parse_secs(short).expect_err(short);
            assert!(e.contains("smallest allowed, 100ms"), "{e}");
        }
        assert_eq!(parse_millis("1"), Ok(MIN_BLOCK_WARN));
        let e = parse_millis("1ns").expect_err("1ns");
        assert!(e.contains("smallest allowed, 1ms"), "{e}");
        assert_eq!(parse_init_timeout("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_init_timeout("1s"), Ok(MIN_INIT_TIMEOUT));
        let e = parse_init_timeout("0").expect_err("0");
        assert!(e.contains("\"0\" is not a positive duration"), "{e}");
        let e = parse_init_timeout("0s").expect_err("0s");
        assert!(e.contains("\"0s\" is zero"), "{e}");
        let e = parse_init_timeout("500ms").expect_err("500ms");
        assert!(e.contains("smallest allowed, 1s: give at least 1s"), "{e}");
    }

    #[test]
    fn bind_takes_the_forms_people_type() {
        let v4 = |a: [u8; 4], p| Bind::Tcp(SocketAddr::from((a, p)));
        assert_eq!(parse_bind("127.0.0.1:8000"), Ok(v4([127, 0, 0, 1], 8000)));
        assert_eq!(parse_bind(":8000"), Ok(v4([0, 0, 0, 0], 8000)));
        assert_eq!(parse_bind("8000"), Ok(v4([0, 0, 0, 0], 8000)));
        assert_eq!(
            parse_bind("localhost:8000"),
            Ok(Bind::Name {
                name: "localhost".into(),
                addrs: vec![
                    "127.0.0.1:8000".parse().expect("v4"),
                    "[::1]:8000".parse().expect("v6")
                ],
            })
        );
        assert_eq!(
            parse_bind("localhost:8000").map(|b| b.to_string()),
            Ok("localhost:8000".into())
        );
        assert_eq!(
            parse_bind("[::1]:8000"),
            Ok(Bind::Tcp("[::1]:8000".parse().expect("v6")))
        );
        assert_eq!(
            parse_bind("unix:/run/stoa.sock"),
            Ok(Bind::Unix("/run/stoa.sock".into()))
        );
        for bad in [":99999", "host", "localhost:http", "unix:", ""] {
            let e = parse_bind(bad).expect_err(bad);
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
