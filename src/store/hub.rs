//! SQL for the agent hub: recipient streams (sequence numbers, acknowledgements), the durable
//! inbox of offline recipients, and the agent society's agents and contact registries.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, now_ms};

/// A stored message for an offline recipient.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxRow {
    /// Row id (arrival order); 0 for a row not yet inserted.
    pub id: i64,
    pub address: String,
    pub seq: Option<u64>,
    pub priority: i64,
    /// Unix ms after which the message must not be delivered.
    pub expires_at: Option<i64>,
    /// The sender's role (for formatted deliveries); may be empty.
    pub role: String,
    pub body: String,
}

/// A society agent as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRow {
    pub env: String,
    pub agent_id: String,
    pub role: String,
    pub parent: Option<String>,
    pub task_brief: Option<String>,
}

impl Store {
    /// Pins (or unpins) the hub tier of an API key.
    pub fn set_api_key_hub_tier(&self, key_id: i64, tier: Option<&str>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE api_keys SET hub_tier = ?2 WHERE id = ?1",
                params![key_id, tier],
            )?;
            Ok(())
        })
    }

    /// The hub tier pinned to an API key, if any.
    pub fn api_key_hub_tier(&self, key_id: i64) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT hub_tier FROM api_keys WHERE id = ?1",
                [key_id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
        })
    }

    /// Every address that has a stream (connected at least once, or spawned), with its tier.
    pub fn hub_known_addresses(&self) -> Result<Vec<(String, Option<String>)>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare("SELECT address, tier FROM hub_streams")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Opens (creating if needed) the stream of `address`, recording the tier it connected
    /// with: `(next_seq, acked_seq)`.
    pub fn hub_open_stream(
        &self,
        address: &str,
        tier: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        self.with(|c| {
            let now = now_ms();
            c.execute(
                "INSERT INTO hub_streams (address, tier, created_at, last_seen_at) VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT(address) DO UPDATE SET last_seen_at = ?3, tier = ?2",
                params![address, tier, now],
            )?;
            let (n, a): (i64, i64) = c.query_row(
                "SELECT next_seq, acked_seq FROM hub_streams WHERE address = ?1",
                [address],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok((n.max(1) as u64, a.max(0) as u64))
        })
    }

    /// Records a stream's counters (at disconnect, and when a resume moves them).
    pub fn hub_save_stream(
        &self,
        address: &str,
        next_seq: u64,
        acked_seq: u64,
    ) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE hub_streams SET next_seq = MAX(next_seq, ?2), acked_seq = MAX(acked_seq, ?3),
                 last_seen_at = ?4 WHERE address = ?1",
                params![address, next_seq as i64, acked_seq as i64, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Appends messages to inboxes in one transaction; returns their row ids.
    pub fn hub_inbox_append(&self, rows: &[InboxRow]) -> Result<Vec<i64>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let mut ids = Vec::with_capacity(rows.len());
            {
                let now = now_ms();
                let mut st = tx.prepare_cached(
                    "INSERT INTO hub_inbox (address, seq, priority, expires_at, created_at, role, body)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?;
                for r in rows {
                    st.execute(params![
                        r.address,
                        r.seq.map(|s| s as i64),
                        r.priority,
                        r.expires_at,
                        now,
                        r.role,
                        r.body
                    ])?;
                    ids.push(tx.last_insert_rowid());
                }
            }
            tx.commit()?;
            Ok(ids)
        })
    }

    /// Sets the sequence number of stored rows that were written to their recipient.
    pub fn hub_inbox_set_seqs(&self, seqs: &[(i64, u64)]) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut st = tx.prepare_cached("UPDATE hub_inbox SET seq = ?2 WHERE id = ?1")?;
                for (id, seq) in seqs {
                    st.execute(params![id, *seq as i64])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// The stored messages of `address` in arrival order.
    pub fn hub_inbox_load(&self, address: &str) -> Result<Vec<InboxRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT id, seq, priority, expires_at, role, body FROM hub_inbox WHERE address = ?1 ORDER BY id",
            )?;
            let rows = st.query_map([address], |r| {
                Ok(InboxRow {
                    id: r.get(0)?,
                    address: address.to_string(),
                    seq: r.get::<_, Option<i64>>(1)?.map(|s| s as u64),
                    priority: r.get(2)?,
                    expires_at: r.get(3)?,
                    role: r.get(4)?,
                    body: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    pub fn hub_inbox_count(&self, address: &str) -> Result<usize, StoreError> {
        self.with(|c| {
            let n: i64 = c.query_row(
                "SELECT COUNT(*) FROM hub_inbox WHERE address = ?1",
                [address],
                |r| r.get(0),
            )?;
            Ok(n as usize)
        })
    }

    /// Deletes stored rows (acknowledged, expired, or re-queued in memory).
    pub fn hub_inbox_delete(&self, ids: &[i64]) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut st = tx.prepare_cached("DELETE FROM hub_inbox WHERE id = ?1")?;
                for id in ids {
                    st.execute([id])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    pub fn hub_agents(&self) -> Result<Vec<AgentRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT env, agent_id, role, parent, task_brief FROM hub_agents ORDER BY created_at, rowid",
            )?;
            let rows = st.query_map([], |r| {
                Ok(AgentRow {
                    env: r.get(0)?,
                    agent_id: r.get(1)?,
                    role: r.get(2)?,
                    parent: r.get(3)?,
                    task_brief: r.get(4)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// `(env, owner, entry JSON)` in insertion order.
    pub fn hub_contacts(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT env, owner, entry FROM hub_contacts ORDER BY env, owner, position",
            )?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Persists society changes in one transaction: agents (upsert) and contacts (insert; a
    /// contact already present keeps its first entry). An agent also gets a stream, so messages
    /// to a spawned agent wait in its inbox until it connects.
    pub fn hub_society_apply(
        &self,
        agents: &[AgentRow],
        contacts: &[(String, String, String, String)],
    ) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let now = now_ms();
            for a in agents {
                tx.execute(
                    "INSERT INTO hub_agents (env, agent_id, role, parent, task_brief, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT(env, agent_id) DO UPDATE SET role = ?3,
                       parent = COALESCE(?4, parent), task_brief = COALESCE(?5, task_brief)",
                    params![a.env, a.agent_id, a.role, a.parent, a.task_brief, now],
                )?;
                tx.execute(
                    "INSERT OR IGNORE INTO hub_streams (address, created_at) VALUES (?1, ?2)",
                    params![format!("agent/{}/{}", a.env, a.agent_id), now],
                )?;
            }
            for (env, owner, contact_id, entry) in contacts {
                let pos: i64 = tx
                    .query_row(
                        "SELECT MAX(position) FROM hub_contacts WHERE env = ?1 AND owner = ?2",
                        params![env, owner],
                        |r| r.get::<_, Option<i64>>(0),
                    )
                    .optional()?
                    .flatten()
                    .unwrap_or(0);
                tx.execute(
                    "INSERT OR IGNORE INTO hub_contacts (env, owner, contact_id, position, entry)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![env, owner, contact_id, pos + 1, entry],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_inbox_and_society_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        let s = Store::open(&path).unwrap();
        assert_eq!(
            s.hub_open_stream("agent/w1x/a01", Some("pm")).unwrap(),
            (1, 0)
        );
        s.hub_save_stream("agent/w1x/a01", 5, 3).unwrap();
        s.hub_save_stream("agent/w1x/a01", 4, 2).unwrap(); // never moves back
        let row = |seq, body: &str| InboxRow {
            id: 0,
            address: "agent/w1x/a01".into(),
            seq,
            priority: 1,
            expires_at: None,
            role: String::new(),
            body: body.into(),
        };
        let ids = s
            .hub_inbox_append(&[row(None, "a"), row(Some(4), "b")])
            .unwrap();
        s.hub_inbox_set_seqs(&[(ids[0], 5)]).unwrap();
        s.hub_society_apply(
            &[AgentRow {
                env: "w1x".into(),
                agent_id: "kid".into(),
                role: "guide".into(),
                parent: Some("a01".into()),
                task_brief: Some("{}".into()),
            }],
            &[
                (
                    "w1x".into(),
                    "kid".into(),
                    "a01".into(),
                    "{\"id\":\"a01\"}".into(),
                ),
                (
                    "w1x".into(),
                    "kid".into(),
                    "zed".into(),
                    "{\"id\":\"zed\"}".into(),
                ),
                (
                    "w1x".into(),
                    "kid".into(),
                    "a01".into(),
                    "{\"id\":\"dup\"}".into(),
                ),
            ],
        )
        .unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(
            s.hub_open_stream("agent/w1x/a01", Some("pm")).unwrap(),
            (5, 3)
        );
        let rows = s.hub_inbox_load("agent/w1x/a01").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].seq, rows[0].body.as_str()), (Some(5), "a"));
        assert_eq!(s.hub_inbox_count("agent/w1x/a01").unwrap(), 2);
        s.hub_inbox_delete(&[rows[0].id]).unwrap();
        assert_eq!(s.hub_inbox_count("agent/w1x/a01").unwrap(), 1);
        let mut known = s.hub_known_addresses().unwrap();
        known.sort();
        assert_eq!(
            known,
            vec![
                ("agent/w1x/a01".to_string(), Some("pm".to_string())),
                ("agent/w1x/kid".to_string(), None)
            ]
        );
        assert_eq!(s.hub_agents().unwrap()[0].parent.as_deref(), Some("a01"));
        let contacts = s.hub_contacts().unwrap();
        assert_eq!(contacts.len(), 2);
        assert_eq!(
            contacts[0].2, "{\"id\":\"a01\"}",
            "first entry kept, order kept"
        );
        assert_eq!(contacts[1].2, "{\"id\":\"zed\"}");
    }
}
