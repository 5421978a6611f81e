//! Who may send to whom. Pure.
//!
//! Two layers:
//! 1. **Scope** (Star): agents and environments speak inside their own environment; humans,
//!    who belong to none, may address any environment. Always on.
//! 2. **Tiers** (ClawOS): a configurable set of allowed `from → to` tier pairs, checked when
//!    both sides of a message declared a tier. The ready-made `tiers` policy is the seed's table
//!    (command↔command, command↔pm, pm↔worker allowed; pm↔pm and worker↔worker refused);
//!    `open` allows every pair; `custom` takes `[hub] allow = ["pm->pm", "command<->worker"]`.
//!    A connection without a tier is outside the tier system: its messages are only scoped.
//!
//! The tier vocabulary and the table parser live in [`crate::config::tiers`], so the config can
//! be validated without the hub.

use crate::config::tiers::{self, Pairs, Tier};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierPolicy {
    allowed: Pairs,
}

impl TierPolicy {
    /// The ClawOS table.
    pub fn clawos() -> Self {
        TierPolicy {
            allowed: tiers::clawos(),
        }
    }

    pub fn open() -> Self {
        TierPolicy {
            allowed: tiers::open(),
        }
    }

    /// Parses rules like `"pm->worker"` (one way) and `"pm<->worker"` (both ways).
    pub fn custom(rules: &[String]) -> Result<Self, String> {
        tiers::custom(rules).map(|allowed| TierPolicy { allowed })
    }

    /// Builds the policy named in the config.
    pub fn from_config(name: &str, allow: &[String]) -> Result<Self, String> {
        tiers::table(name, allow).map(|allowed| TierPolicy { allowed })
    }

    /// Whether `from` may send to `to`; untiered parties are not subject to tier rules.
    pub fn allows(&self, from: Option<Tier>, to: Option<Tier>) -> bool {
        match (from, to) {
            (Some(a), Some(b)) => self.allowed.contains(&(a, b)),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Tier::*;

    #[test]
    fn clawos_table() {
        let p = TierPolicy::clawos();
        for (a, b, ok) in [
            (Command, Command, true),
            (Command, Pm, true),
            (Pm, Command, true),
            (Pm, Pm, false),
            (Pm, Worker, true),
            (Worker, Pm, true),
            (Worker, Worker, false),
            (Command, Worker, false),
            (Worker, Command, false),
        ] {
            assert_eq!(p.allows(Some(a), Some(b)), ok, "{a:?} -> {b:?}");
        }
        assert!(p.allows(None, Some(Worker)));
        assert!(p.allows(Some(Worker), None));
    }

    #[test]
    fn custom_rules() {
        let p = TierPolicy::custom(&["pm->pm".into(), "worker<->command".into()]).unwrap();
        assert!(p.allows(Some(Pm), Some(Pm)));
        assert!(p.allows(Some(Worker), Some(Command)));
        assert!(p.allows(Some(Command), Some(Worker)));
        assert!(!p.allows(Some(Pm), Some(Worker)));
        assert!(TierPolicy::custom(&["pm=>worker".into()]).is_err());
        assert!(
            TierPolicy::custom(&["boss->pm".into()])
                .unwrap_err()
                .contains("boss")
        );
        assert!(
            TierPolicy::from_config("open", &[])
                .unwrap()
                .allows(Some(Pm), Some(Pm))
        );
        assert!(TierPolicy::from_config("strict", &[]).is_err());
    }
}
