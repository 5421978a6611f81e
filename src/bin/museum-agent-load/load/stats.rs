//! Latency samples and their percentiles.

#[derive(Debug, Default, Clone)]
pub struct Samples {
    micros: Vec<f64>,
}

impl Samples {
    pub fn push_micros(&mut self, us: f64) {
        self.micros.push(us);
    }

    pub fn extend(&mut self, other: Samples) {
        self.micros.extend(other.micros);
    }

    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// Percentile `p` in 0..=1 (nearest rank), in microseconds; NaN when empty.
    pub fn pct(&mut self, p: f64) -> f64 {
        if self.micros.is_empty() {
            return f64::NAN;
        }
        self.micros
            .sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        let rank = ((p * self.micros.len() as f64).ceil() as usize).clamp(1, self.micros.len());
        self.micros[rank - 1]
    }

    pub fn max(&self) -> f64 {
        self.micros.iter().cloned().fold(f64::NAN, f64::max)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut s = Samples::default();
        for i in 1..=100 {
            s.push_micros(i as f64);
        }
        assert_eq!(s.pct(0.5), 50.0);
        assert_eq!(s.pct(0.99), 99.0);
        assert_eq!(s.pct(1.0), 100.0);
        assert_eq!(s.max(), 100.0);
        assert!(Samples::default().pct(0.5).is_nan());
        assert!(cpu_seconds(std::process::id()).is_some());
        assert!(cpu_times(std::process::id()).is_some_and(|(u, s)| u >= 0.0 && s >= 0.0));
    }
}
