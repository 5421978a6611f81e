//! Small helpers shared by several modules.

use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds (the protocol's `timestamp`).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Days since 1970-01-01 → (year, month, day) of the proleptic Gregorian calendar (Howard
/// Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A count as English writes it, thousands separated: 2700 → "2,700" (a bare "1959" reads as
/// a year).
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Percent-encodes everything but RFC 3986's unreserved characters (for a query value or one
/// path segment).
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A reqwest client builder for upstream calls (providers, retrieval, the load tool). TLS is
/// rustls with the `ring` provider (installed here once, process-wide; reqwest is built without
/// a default provider).
pub fn http_client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().user_agent(concat!("museum-agent/", env!("CARGO_PKG_VERSION")))
}

/// 128 random bits as 32 hex characters, prefixed (session ids, generated call ids).
pub fn random_id(prefix: &str) -> String {
    use rand::RngCore;
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    format!("{prefix}{}", hex::encode(b))
}

/// Process CPU usage in percent of one core, measured between successive calls
/// (from `/proc/self/stat`; 0 where that file does not exist).
pub struct CpuSampler {
    last: Mutex<(Instant, u64)>,
    ticks_per_sec: f64,
}

impl Default for CpuSampler {
    fn default() -> Self {
        CpuSampler {
            last: Mutex::new((Instant::now(), process_cpu_ticks().unwrap_or(0))),
            ticks_per_sec: 100.0,
        }
    }
}

impl CpuSampler {
    pub fn sample(&self) -> u64 {
        let now = Instant::now();
        let Some(ticks) = process_cpu_ticks() else {
            return 0;
        };
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let dt = now.duration_since(last.0).as_secs_f64();
        if dt < 0.2 {
            // Too short to measure; keep the previous window open.
            let used = ticks.saturating_sub(last.1) as f64 / self.ticks_per_sec;
            return if dt > 0.0 {
                ((used / dt) * 100.0).round() as u64
            } else {
                0
            };
        }
        let used = ticks.saturating_sub(last.1) as f64 / self.ticks_per_sec;
        *last = (now, ticks);
        ((used / dt) * 100.0).round() as u64
    }
}

fn process_cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, i.e. 11 and 12 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    cpu_times(pid).map(|(user, system)| user + system)
}

/// CPU seconds a process has used in user space and in the kernel, from `/proc/<pid>/stat`.
pub fn cpu_times(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let user: u64 = f.get(11)?.parse().ok()?;
    let system: u64 = f.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    Some((user as f64 / hz, system as f64 / hz))
}

/// Resident set size of a process in KiB, from `/proc/<pid>/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Raises this process's open-file limit to its hard limit (every socket is a file; the
/// default soft limit of 1024 would cap the server near a thousand connections).
pub fn raise_nofile_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            return r.rlim_cur;
        }
    }
    0
}

/// A string kept in place when it is short (most index tokens: English stems, CJK bigrams and
/// words), else on the heap. As a hash-map key, a probe compares it without following a
/// pointer to another cache line: in the ingest's big maps (a thread's memo of English
/// words, the load's document frequencies) that pointer was a cache miss a token. Looked up
/// by `&str` ([`Borrow`](std::borrow::Borrow)); hashes and compares as its text.
#[derive(Clone)]
pub enum ShortStr {
    Inline { len: u8, bytes: [u8; SHORT_STR_MAX] },
    Heap(Box<str>),
}

/// The longest text a [`ShortStr`] keeps in place (the enum is then 24 bytes, a `Box<str>`
/// and its tag).
pub const SHORT_STR_MAX: usize = 22;

impl ShortStr {
    pub fn new(s: &str) -> ShortStr {
        if s.len() <= SHORT_STR_MAX {
            let mut bytes = [0u8; SHORT_STR_MAX];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            ShortStr::Inline {
                len: s.len() as u8,
                bytes,
            }
        } else {
            ShortStr::Heap(s.into())
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            ShortStr::Inline { len, bytes } => {
                // SAFETY: `new` copied these bytes from a whole `&str`, and they are never
                // changed: valid UTF-8. (Checking them again on every hash-map probe cost
                // more than the pointer this type saves.)
                unsafe { std::str::from_utf8_unchecked(&bytes[..*len as usize]) }
            }
            ShortStr::Heap(s) => s,
        }
    }
}

impl std::borrow::Borrow<str> for ShortStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::hash::Hash for ShortStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq for ShortStr {
    fn eq(&self, other: &ShortStr) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ShortStr {}

impl std::fmt::Debug for ShortStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The cases of a JSON-lines fixture (`path` under the crate root), for data-driven unit tests.
#[cfg(test)]
pub fn fixture_cases<T: serde::de::DeserializeOwned>(path: &str) -> Vec<T> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full)
        .unwrap_or_else(|e| panic!("{}: {e}", full.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}: {l}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_and_long() {
        let a = random_id("sess_");
        assert_eq!(a.len(), 5 + 32);
        assert_ne!(a, random_id("sess_"));
    }

    #[test]
    fn short_strings_are_their_text() {
        use std::hash::BuildHasher;
        let long = "a".repeat(SHORT_STR_MAX + 1);
        for s in [
            "",
            "bronze",
            "青铜器",
            &"x".repeat(SHORT_STR_MAX),
            &long,
            "汉字汉字汉字汉字",
        ] {
            let k = ShortStr::new(s);
            assert_eq!(k.as_str(), s);
            assert_eq!(
                matches!(k, ShortStr::Inline { .. }),
                s.len() <= SHORT_STR_MAX
            );
            // Found by its text in a map, as a `String` key would be.
            let h = rustc_hash::FxBuildHasher;
            assert_eq!(h.hash_one(&k), h.hash_one(s));
            let mut m = rustc_hash::FxHashMap::default();
            m.insert(k.clone(), 1);
            assert_eq!(m.get(s), Some(&1));
            assert_eq!(k, ShortStr::new(s));
        }
        assert_ne!(ShortStr::new("ab"), ShortStr::new("abc"));
        assert_eq!(std::mem::size_of::<ShortStr>(), 24);
    }

    #[test]
    fn cpu_and_rss_read_on_linux() {
        let s = CpuSampler::default();
        let _ = s.sample();
        assert!(rss_kib(std::process::id()).unwrap() > 0);
    }
}
