//! Idle expiry, heartbeats and the expiry warning of one session (spec §6.3, docs/protocol.md).
//! Pure: the caller passes the current [`Instant`] and sleeps until [`Liveness::next_deadline`].

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerEvent {
    /// Send HEARTBEAT with `remaining_seconds`.
    Heartbeat { remaining_seconds: u64 },
    /// Send SESSION_WARN EXPIRE_SOON once.
    Warn { remaining_seconds: u64 },
    /// Send SHUTDOWN and close.
    Expire,
    /// No client frame for `max_missed` heartbeat intervals: the connection is presumed
    /// half-open (the peer vanished without closing); close it.
    Unresponsive,
}

#[derive(Debug, Clone)]
pub struct Liveness {
    timeout: Duration,
    heartbeat: Duration,
    /// Zero when warnings are off (`warn_before >= timeout` would warn after every frame).
    warn_before: Duration,
    expires_at: Instant,
    next_heartbeat: Instant,
    warned: bool,
    /// Heartbeats sent since the last client frame.
    unanswered: u32,
    /// Close after this many unanswered heartbeats (0 = never).
    max_missed: u32,
}

impl Liveness {
    pub fn new(
        now: Instant,
        timeout: Duration,
        heartbeat: Duration,
        warn_before: Duration,
    ) -> Self {
        let warn_before = if warn_before < timeout {
            warn_before
        } else {
            Duration::ZERO
        };
        Liveness {
            timeout,
            heartbeat,
            warn_before,
            expires_at: now + timeout,
            next_heartbeat: now + heartbeat,
            warned: false,
            unanswered: 0,
            max_missed: 0,
        }
    }

    /// Closes the session after `n` heartbeats go unanswered (0 = never).
    pub fn with_max_missed(mut self, n: u32) -> Self {
        self.max_missed = n;
        self
    }

    /// A valid client frame arrived: the idle timer starts again.
    pub fn touch(&mut self, now: Instant) {
        self.expires_at = now + self.timeout;
        self.warned = false;
        self.unanswered = 0;
    }

    /// Whole seconds left, rounded up (a fresh session reports its full timeout).
    pub fn remaining_seconds(&self, now: Instant) -> u64 {
        let left = self.expires_at.saturating_duration_since(now);
        left.as_millis().div_ceil(1000) as u64
    }

    fn warn_at(&self) -> Option<Instant> {
        (!self.warned && !self.warn_before.is_zero()).then(|| self.expires_at - self.warn_before)
    }

    pub fn next_deadline(&self) -> Instant {
        let mut d = self.expires_at.min(self.next_heartbeat);
        if let Some(w) = self.warn_at() {
            d = d.min(w);
        }
        d
    }

    /// Events due at `now`, in the order to send them.
    pub fn due(&mut self, now: Instant) -> Vec<TimerEvent> {
        if now >= self.expires_at {
            return vec![TimerEvent::Expire];
        }
        let mut out = Vec::new();
        if let Some(w) = self.warn_at()
            && now >= w
        {
            self.warned = true;
            out.push(TimerEvent::Warn {
                remaining_seconds: self.remaining_seconds(now),
            });
        }
        if now >= self.next_heartbeat {
            if self.max_missed > 0 && self.unanswered >= self.max_missed {
                return vec![TimerEvent::Unresponsive];
            }
            // Skip missed beats rather than bursting them.
            while self.next_heartbeat <= now {
                self.next_heartbeat += self.heartbeat;
            }
            self.unanswered += 1;
            out.push(TimerEvent::Heartbeat {
                remaining_seconds: self.remaining_seconds(now),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn heartbeat_warn_expire_sequence() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, s(100), s(30), s(25));
        assert_eq!(l.remaining_seconds(t0), 100);
        assert_eq!(l.next_deadline(), t0 + s(30));
        assert_eq!(
            l.due(t0 + s(30)),
            vec![TimerEvent::Heartbeat {
                remaining_seconds: 70
            }]
        );
        assert_eq!(l.next_deadline(), t0 + s(60));
        assert_eq!(
            l.due(t0 + s(60)),
            vec![TimerEvent::Heartbeat {
                remaining_seconds: 40
            }]
        );
        assert_eq!(l.next_deadline(), t0 + s(75));
        assert_eq!(
            l.due(t0 + s(75)),
            vec![TimerEvent::Warn {
                remaining_seconds: 25
            }]
        );
        // Warned once only.
        assert_eq!(l.next_deadline(), t0 + s(90));
        assert_eq!(
            l.due(t0 + s(90)),
            vec![TimerEvent::Heartbeat {
                remaining_seconds: 10
            }]
        );
        assert_eq!(l.next_deadline(), t0 + s(100));
        assert_eq!(l.due(t0 + s(100)), vec![TimerEvent::Expire]);
    }

    #[test]
    fn touch_restarts_the_idle_timer_and_rearms_the_warning() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, s(100), s(1000), s(25));
        assert_eq!(
            l.due(t0 + s(80)),
            vec![TimerEvent::Warn {
                remaining_seconds: 20
            }]
        );
        l.touch(t0 + s(80));
        assert_eq!(l.remaining_seconds(t0 + s(80)), 100);
        assert_eq!(l.next_deadline(), t0 + s(155));
        assert_eq!(
            l.due(t0 + s(155)),
            vec![TimerEvent::Warn {
                remaining_seconds: 25
            }]
        );
    }

    #[test]
    fn unanswered_heartbeats_mean_a_half_open_connection() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, s(1000), s(10), s(0)).with_max_missed(2);
        assert!(matches!(l.due(t0 + s(10))[0], TimerEvent::Heartbeat { .. }));
        l.touch(t0 + s(15));
        assert!(matches!(l.due(t0 + s(20))[0], TimerEvent::Heartbeat { .. }));
        assert!(matches!(l.due(t0 + s(30))[0], TimerEvent::Heartbeat { .. }));
        assert_eq!(l.due(t0 + s(40)), vec![TimerEvent::Unresponsive]);
        let mut never = Liveness::new(t0, s(1000), s(10), s(0));
        for i in 1..20 {
            assert!(matches!(
                never.due(t0 + s(10 * i))[0],
                TimerEvent::Heartbeat { .. }
            ));
        }
    }

    #[test]
    fn warning_off_when_not_shorter_than_timeout() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, s(10), s(100), s(10));
        assert_eq!(l.next_deadline(), t0 + s(10));
        assert_eq!(l.due(t0 + s(9)), vec![]);
        assert_eq!(l.due(t0 + s(10)), vec![TimerEvent::Expire]);
    }
}
