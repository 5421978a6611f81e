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

/// How late this process's own runtime wakes a task: a task sleeps 1 ms again and again and
/// records how much later than asked it ran. A load tool whose runtime is starved would count
/// its own lateness as the server's latency; this says whether it was.
pub struct LagProbe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<Samples>,
}

impl LagProbe {
    pub fn start() -> LagProbe {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut s = Samples::default();
            let tick = std::time::Duration::from_millis(1);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let t = std::time::Instant::now();
                tokio::time::sleep(tick).await;
                s.push_micros(t.elapsed().saturating_sub(tick).as_secs_f64() * 1e6);
            }
            s
        });
        LagProbe { stop, task }
    }

    /// The lateness samples (µs past the 1 ms asked; the timer's own granularity is 1 ms).
    pub async fn finish(self) -> Samples {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

pub use museum_agent::util::{cpu_seconds, cpu_times};

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
