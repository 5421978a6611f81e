//! What another node needs to resume a session, as data: the snapshot kept in the cluster's KV
//! bucket, and the turns a released session's running replies added to its history. Pure: no
//! I/O, no clock.

use serde::{Deserialize, Serialize};

use crate::auth::Principal;
use crate::pipeline::history::History;
use crate::protocol::{FunctionDef, Platform};
use crate::providers::llm::{ChatMessage, Role, ToolCall};
use crate::request::attributes::Attributes;

/// The session's credential, as the user store knows it (ids are the shared store's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Credential {
    ApiKey { id: i64, name: String },
    Account { id: i64, name: String },
}

impl From<&Principal> for Credential {
    fn from(p: &Principal) -> Self {
        match p {
            Principal::ApiKey { id, name } => Credential::ApiKey {
                id: *id,
                name: name.clone(),
            },
            Principal::Account { id, name } => Credential::Account {
                id: *id,
                name: name.clone(),
            },
        }
    }
}

impl From<&Credential> for Principal {
    fn from(c: &Credential) -> Self {
        match c {
            Credential::ApiKey { id, name } => Principal::ApiKey {
                id: *id,
                name: name.clone(),
            },
            Credential::Account { id, name } => Principal::Account {
                id: *id,
                name: name.clone(),
            },
        }
    }
}

/// One history message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<Call>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// The arguments as the vendor sent them (JSON text).
    pub arguments: String,
}

impl From<&ChatMessage> for Message {
    fn from(m: &ChatMessage) -> Self {
        Message {
            role: match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            }
            .into(),
            content: m.content.clone(),
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| Call {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.raw_arguments(),
                })
                .collect(),
            tool_call_id: m.tool_call_id.clone(),
        }
    }
}

impl Message {
    /// None for a role this build does not know (a newer node's snapshot): left out.
    pub fn to_chat(&self) -> Option<ChatMessage> {
        let role = match self.role.as_str() {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        };
        Some(ChatMessage {
            role,
            content: self.content.clone(),
            tool_calls: self
                .tool_calls
                .iter()
                .map(|c| ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: serde_json::from_str(&c.arguments).map_err(|_| c.arguments.clone()),
                })
                .collect(),
            tool_call_id: self.tool_call_id.clone(),
        })
    }
}

/// A resumable session as another node sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub session_id: String,
    /// The node holding the session (the one to ask to release it).
    pub owner: String,
    pub credential: Credential,
    /// SHA-256 of the current resume token, hex.
    pub token_hash: String,
    pub create_time: i64,
    pub platform: Platform,
    pub require_tts: bool,
    pub enable_srs: bool,
    pub functions: Vec<FunctionDef>,
    pub history: Vec<Message>,
    /// Unix ms after which nobody may resume from this snapshot.
    pub expires_ms: i64,
}

impl Snapshot {
    pub fn attributes(&self) -> Attributes {
        Attributes {
            platform: self.platform,
            require_tts: self.require_tts,
            enable_srs: self.enable_srs,
            functions: self.functions.clone(),
        }
    }

    /// The history, bounded by `max` messages as a local one is.
    pub fn history(&self, max: usize) -> History {
        let mut h = History::new(max);
        h.push_turn(self.history.iter().filter_map(Message::to_chat).collect());
        h
    }

    /// Encodes within `max_bytes`, leaving out the oldest history messages (and a tool result
    /// left first without its call) until it fits. None: it does not fit even without history.
    pub fn encode(mut self, max_bytes: usize) -> Option<Vec<u8>> {
        loop {
            let bytes = serde_json::to_vec(&self).ok()?;
            if bytes.len() <= max_bytes {
                return Some(bytes);
            }
            if self.history.is_empty() {
                return None;
            }
            let drop = (self.history.len() / 4).max(1);
            self.history.drain(..drop);
            while self.history.first().is_some_and(|m| m.role == "tool") {
                self.history.remove(0);
            }
        }
    }
}

/// The messages `after` holds beyond `before`: `after` is `before` (less some oldest messages,
/// trimmed by the bound) followed by new turns, since a history only appends at the end and
/// trims at the front. With nothing in common, all of `after`.
pub fn added(before: &[ChatMessage], after: &[ChatMessage]) -> Vec<ChatMessage> {
    // The longest prefix of `after` that is a suffix of `before`.
    let longest = (0..=after.len().min(before.len()))
        .rev()
        .find(|&k| before[before.len() - k..] == after[..k])
        .unwrap_or(0);
    after[longest..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: Role, t: &str) -> ChatMessage {
        ChatMessage::new(role, t)
    }

    #[test]
    fn turns_added_after_a_release_are_found_even_when_the_front_was_trimmed() {
        let before = vec![m(Role::User, "a"), m(Role::Assistant, "A")];
        let mut h = History::new(3);
        h.push_turn(before.clone());
        h.push_turn(vec![m(Role::User, "b"), m(Role::Assistant, "B")]);
        let after: Vec<ChatMessage> = h.messages().cloned().collect();
        assert_eq!(after.len(), 3, "trimmed to its bound");
        assert_eq!(
            added(&before, &after),
            vec![m(Role::User, "b"), m(Role::Assistant, "B")]
        );
        assert!(added(&before, &before).is_empty());
        assert_eq!(added(&[], &before), before);
    }

    #[test]
    fn a_snapshot_round_trips_and_is_bounded_by_dropping_the_oldest_history() {
        let call = ToolCall {
            id: "c1".into(),
            name: "show".into(),
            arguments: Ok(serde_json::json!({"id": 3})),
        };
        let mut with_call = m(Role::Assistant, "");
        with_call.tool_calls = vec![call];
        let mut result = m(Role::Tool, "{}");
        result.tool_call_id = Some("c1".into());
        let msgs = [
            m(Role::User, &"x".repeat(3000)),
            with_call,
            result,
            m(Role::User, "last question"),
            m(Role::Assistant, "last answer"),
        ];
        let s = Snapshot {
            session_id: "sess_1".into(),
            owner: "n1".into(),
            credential: Credential::ApiKey {
                id: 7,
                name: "kiosk".into(),
            },
            token_hash: "00".into(),
            create_time: 1,
            platform: Platform::Web,
            require_tts: false,
            enable_srs: true,
            functions: vec![],
            history: msgs.iter().map(Message::from).collect(),
            expires_ms: 2,
        };
        let whole = s.clone().encode(1 << 20).unwrap();
        let back: Snapshot = serde_json::from_slice(&whole).unwrap();
        assert_eq!(back, s);
        let h: Vec<ChatMessage> = back.history(50).messages().cloned().collect();
        assert_eq!(h, msgs, "tool calls and their arguments survive");
        // Bounded: the long first message goes, and the orphaned tool result with it.
        let small = s.clone().encode(1500).unwrap();
        assert!(small.len() <= 1500);
        let back: Snapshot = serde_json::from_slice(&small).unwrap();
        assert_eq!(back.history.last().unwrap().content, "last answer");
        assert_ne!(back.history.first().unwrap().role, "tool");
        assert!(s.encode(10).is_none());
    }
}
