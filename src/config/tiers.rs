//! The ClawOS tier vocabulary and the parser of the `[hub] policy` and `[hub] allow` table. Pure.
//!
//! It sits below `config` so that validating the config can build the table without calling
//! into the hub; the hub's `TierPolicy` (`hub/policy.rs`) applies it, and the hub's envelope
//! reads and writes the same [`Tier`].

use std::collections::HashSet;

/// ClawOS tiers; a connection declares one (or none) when it connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    Command,
    Pm,
    Worker,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Command => "command",
            Tier::Pm => "pm",
            Tier::Worker => "worker",
        }
    }

    pub fn parse(s: &str) -> Option<Tier> {
        Some(match s {
            "command" => Tier::Command,
            "pm" => Tier::Pm,
            "worker" => Tier::Worker,
            _ => return None,
        })
    }
}

/// The allowed `(from, to)` tier pairs.
pub type Pairs = HashSet<(Tier, Tier)>;

/// The ClawOS table: command↔command, command↔pm, pm↔worker.
pub fn clawos() -> Pairs {
    use Tier::*;
    let mut allowed = HashSet::new();
    for (a, b) in [(Command, Command), (Command, Pm), (Pm, Worker)] {
        allowed.insert((a, b));
        allowed.insert((b, a));
    }
    allowed
}

/// Every pair.
pub fn open() -> Pairs {
    use Tier::*;
    let all = [Command, Pm, Worker];
    all.iter()
        .flat_map(|a| all.iter().map(move |b| (*a, *b)))
        .collect()
}

/// Parses rules like `"pm->worker"` (one way) and `"pm<->worker"` (both ways).
pub fn custom(rules: &[String]) -> Result<Pairs, String> {
    let mut allowed = HashSet::new();
    for rule in rules {
        let (a, b, both) = if let Some((a, b)) = rule.split_once("<->") {
            (a, b, true)
        } else if let Some((a, b)) = rule.split_once("->") {
            (a, b, false)
        } else {
            return Err(format!(
                "hub.allow rule {rule:?}: expected \"a->b\" or \"a<->b\""
            ));
        };
        let parse = |s: &str| {
            Tier::parse(s.trim()).ok_or_else(|| {
                format!("hub.allow rule {rule:?}: {s:?} is not command, pm or worker")
            })
        };
        let (a, b) = (parse(a)?, parse(b)?);
        allowed.insert((a, b));
        if both {
            allowed.insert((b, a));
        }
    }
    Ok(allowed)
}

/// The table named by `[hub] policy` (with `[hub] allow` for `custom`).
pub fn table(name: &str, allow: &[String]) -> Result<Pairs, String> {
    match name {
        "tiers" => Ok(clawos()),
        "open" => Ok(open()),
        "custom" => custom(allow),
        other => Err(format!(
            "hub.policy {other:?}: expected \"tiers\", \"open\" or \"custom\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ConfigError};

    /// The config refuses a bad hub policy at load, with the table parser's own words.
    #[test]
    fn config_validation_uses_the_table_parser() {
        let invalid = |toml: &str| match Config::from_sources(toml, vec![]) {
            Err(ConfigError::Invalid(m)) => m,
            other => panic!("expected an invalid config, got {other:?}"),
        };
        assert_eq!(
            invalid("[hub]\npolicy = \"strict\"\n"),
            r#"hub.policy "strict": expected "tiers", "open" or "custom""#
        );
        assert_eq!(
            invalid("[hub]\npolicy = \"custom\"\nallow = [\"pm=>worker\"]\n"),
            r#"hub.allow rule "pm=>worker": expected "a->b" or "a<->b""#
        );
        assert_eq!(
            invalid("[hub]\npolicy = \"custom\"\nallow = [\"boss->pm\"]\n"),
            r#"hub.allow rule "boss->pm": "boss" is not command, pm or worker"#
        );
        let c = Config::from_sources(
            "[hub]\npolicy = \"custom\"\nallow = [\"pm<->pm\"]\n",
            vec![],
        )
        .unwrap();
        assert_eq!(
            table(&c.hub.policy, &c.hub.allow).unwrap(),
            Pairs::from([(Tier::Pm, Tier::Pm)])
        );
        // An unused allow list is not parsed (as before).
        assert!(Config::from_sources("[hub]\nallow = [\"nonsense\"]\n", vec![]).is_ok());
    }
}
