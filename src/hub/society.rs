//! The agent society of one environment (seed 001, "Agent Communication Protocol"): task briefs,
//! per-agent contact registries, introductions and the formatting of delivered messages.
//!
//! Pure state model: no I/O, no clock (timestamps come in as strings), no networking. The hub
//! calls [`Society::join`], [`Society::spawn`] and [`Society::send`], persists the [`Change`]s they
//! return (an `Agent` change is an upsert of the record by id, a `Contact` change appends one
//! entry to its owner's registry) and feeds them back through [`Society::restore`] at start-up.
//!
//! What it models, following the seed:
//! - **Task brief** ([`validate_task_brief`]): the five required fields; "missing" means absent or
//!   `null` as in the seed's `validateTaskBrief` (an empty string is present). `constraints`, when
//!   present, must be an array (present means non-null, so `""`, `0` or `false` are errors too,
//!   where the seed's JS truthiness test would let them through). `collaborators`, when present,
//!   must be an array of objects with a non-empty string `agentId`. Error lines are English
//!   (`missing required field: X`, `constraints must be an array`) where the seed's are Chinese.
//! - **Contact registries** (the seed's `ContactManager`): one insertion-ordered registry per known
//!   agent. `root` starts with `user` and `user` with `root` (source `system`); any other new agent
//!   starts with its parent (source `parent`) and then the brief's collaborators (source `preset`,
//!   keeping `role` and `interfaceSpec` only, as the seed does). The parent gains the child
//!   (source `child`; the seed only says "add child").
//! - **Keep first**: an entry, once in a registry, is never replaced by a later source (the seed's
//!   `Map.set` would overwrite, e.g. a preset collaborator that is also the parent). Role changes
//!   through [`Society::join`] update the agent record only, never registries.
//! - **Registries never block sending** (Property 5): [`Society::send`] only needs the recipient
//!   to exist. The sender need not be known (e.g. `user`); its role then shows as `unknown`.
//! - **First message** (Property 7) adds the sender to the recipient's registry; an
//!   `introduction_response` additionally adds its target (top-level `agentId`, optional `role`,
//!   `interfaceSpec`) to the recipient's registry with `introducedBy` = the sender.
//! - **`from` is always the authenticated sender** (Property 8): an object payload gets its
//!   `from` member overwritten; the formatted text is built from that stamped payload.
//! - **Message types** (Property 10, [`validate_message_type`]): an unknown `message_type` is an
//!   `invalid_message_format` with empty `missing_fields` (its JSON also lists `allowed_types`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The required fields of a task brief, in the seed's order.
pub const REQUIRED_BRIEF_FIELDS: [&str; 5] = [
    "objective",
    "constraints",
    "inputs",
    "outputs",
    "completion_criteria",
];

/// The message types of the seed's `MessageType` enumeration.
pub const MESSAGE_TYPES: [&str; 7] = [
    "task_assignment",
    "status_report",
    "introduction_request",
    "introduction_response",
    "collaboration_request",
    "collaboration_response",
    "general",
];

/// A rejected task brief: `{error:"invalid_task_brief", missing_fields, errors}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BriefError {
    /// Required fields that are absent or null, in [`REQUIRED_BRIEF_FIELDS`] order.
    pub missing_fields: Vec<String>,
    /// One readable line per problem (missing fields first, then malformed ones).
    pub errors: Vec<String>,
}

impl BriefError {
    pub fn to_json(&self) -> Value {
        let (missing, errors) = (&self.missing_fields, &self.errors);
        json!({"error": "invalid_task_brief", "missing_fields": missing, "errors": errors})
    }
}

const COLLABORATORS_ERROR: &str =
    "collaborators must be an array of objects with a non-empty string agentId";

fn is_missing(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// Required fields that are missing, and fields that are present but malformed (with a message).
fn brief_problems(brief: &Value) -> (Vec<&'static str>, Vec<(&'static str, String)>) {
    let missing: Vec<&'static str> = REQUIRED_BRIEF_FIELDS
        .into_iter()
        .filter(|f| is_missing(brief.get(f)))
        .collect();
    let mut malformed = Vec::new();
    if brief
        .get("constraints")
        .is_some_and(|c| !c.is_null() && !c.is_array())
    {
        malformed.push(("constraints", "constraints must be an array".to_owned()));
    }
    match brief.get("collaborators") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) if items.iter().all(|c| collaborator_id(c).is_some()) => {}
        Some(_) => malformed.push(("collaborators", COLLABORATORS_ERROR.to_owned())),
    }
    (missing, malformed)
}

fn collaborator_id(item: &Value) -> Option<&str> {
    item.as_object()?
        .get("agentId")?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// The seed's `validateTaskBrief`. A non-object brief (including `null`) misses all five fields.
pub fn validate_task_brief(brief: &Value) -> Result<(), BriefError> {
    let (missing, malformed) = brief_problems(brief);
    if missing.is_empty() && malformed.is_empty() {
        return Ok(());
    }
    let mut errors: Vec<String> = missing
        .iter()
        .map(|f| format!("missing required field: {f}"))
        .collect();
    errors.extend(malformed.into_iter().map(|(_, m)| m));
    Err(BriefError {
        missing_fields: missing.into_iter().map(String::from).collect(),
        errors,
    })
}

/// How an entry came into a registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContactSource {
    /// `root` ↔ `user`, set up by the system.
    System,
    /// The child's entry for the agent that spawned it.
    Parent,
    /// The parent's entry for a child it spawned.
    Child,
    /// A collaborator named in the child's task brief.
    Preset,
    /// Added by an `introduction_response` (see `introduced_by`).
    Introduction,
    /// The sender of the first message this agent received from it.
    FirstMessage,
}

/// One entry of a contact registry, serialized as in the seed's `contactRegistries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContactEntry {
    pub id: String,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interface_spec: Option<Value>,
    pub source: ContactSource,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub introduced_by: Option<String>,
    pub added_at: String,
}

impl ContactEntry {
    pub fn new(id: &str, role: &str, source: ContactSource, now: &str) -> Self {
        ContactEntry {
            id: id.to_owned(),
            role: role.to_owned(),
            interface_spec: None,
            source,
            introduced_by: None,
            added_at: now.to_owned(),
        }
    }
}

/// A member of the society. `task_brief` is the brief it was spawned with (context injection).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRecord {
    pub id: String,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task_brief: Option<Value>,
}

/// A state change for the hub to persist.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// Upsert of the agent record with this id.
    Agent(AgentRecord),
    /// Append `entry` to `owner`'s registry.
    Contact { owner: String, entry: ContactEntry },
}

/// The seed's `isContactKnown` result: `{inRegistry, error?}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContactCheck {
    pub in_registry: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ContactCheckError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContactCheckError {
    SenderNotFound,
    UnknownContact,
}

/// A message ready for the recipient: the stamped payload and the seed's formatted text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    pub from: String,
    pub to: String,
    pub payload: Value,
    pub formatted: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SpawnError {
    InvalidBrief(BriefError),
    /// The parent is not a member of the society.
    AgentNotFound(String),
    /// The chosen child id is already taken.
    AgentExists(String),
}

impl SpawnError {
    pub fn to_json(&self) -> Value {
        match self {
            SpawnError::InvalidBrief(e) => e.to_json(),
            SpawnError::AgentNotFound(id) => json!({"error": "agent_not_found", "agentId": id}),
            SpawnError::AgentExists(id) => json!({"error": "agent_exists", "agentId": id}),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The recipient is not a member of the society.
    AgentNotFound(String),
    /// The payload does not fit its `message_type` (empty `missing_fields`: unknown type).
    InvalidMessageFormat {
        message_type: String,
        missing_fields: Vec<String>,
    },
}

impl SendError {
    pub fn to_json(&self) -> Value {
        match self {
            SendError::AgentNotFound(id) => json!({"error": "agent_not_found", "agentId": id}),
            SendError::InvalidMessageFormat {
                message_type,
                missing_fields,
            } => {
                let mut v = json!({"error": "invalid_message_format", "message_type": message_type,
                    "missing_fields": missing_fields});
                if !MESSAGE_TYPES.contains(&message_type.as_str()) {
                    v["allowed_types"] = json!(MESSAGE_TYPES);
                }
                v
            }
        }
    }
}

/// The errors display as their JSON objects.
macro_rules! json_errors {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.to_json())
            }
        }
        impl std::error::Error for $t {}
    )*};
}
json_errors!(BriefError, SpawnError, SendError);

/// The seed's `formatMessageForAgent`: source line, content, reply hint (not for the user).
pub fn format_message_for_agent(from: &str, sender_role: Option<&str>, payload: &Value) -> String {
    let header = if from == "user" {
        "【来自用户的消息】".to_owned()
    } else {
        format!(
            "【来自 {}（{from}）的消息】",
            sender_role.unwrap_or("unknown")
        )
    };
    let content = match payload {
        Value::String(s) => s.clone(),
        Value::Object(m) => match m.get("text") {
            Some(Value::String(t)) => t.clone(),
            _ => payload.to_string(),
        },
        other => other.to_string(),
    };
    let hint = if from == "user" {
        String::new()
    } else {
        format!("\n如需回复，请使用 send_message(to='{from}', ...)")
    };
    format!("{header}\n{content}{hint}")
}

/// Property 10. `Ok` when the payload has no (or a null) `message_type`. Required fields count as
/// missing when absent or null; `task_assignment` reports `taskBrief` itself, or the brief's
/// missing/malformed fields as `taskBrief.<field>`; `introduction_response` needs a non-empty
/// string `agentId`. A non-string or unknown `message_type` fails with empty `missing_fields`.
pub fn validate_message_type(payload: &Value) -> Result<(), SendError> {
    let mt = match payload.get("message_type") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(format_error(&other.to_string(), Vec::new())),
    };
    let present = |k: &str| !is_missing(payload.get(k));
    let missing: Vec<String> = match mt {
        "task_assignment" => match payload.get("taskBrief") {
            Some(b) if b.is_object() => {
                // A malformed field is never missing too (missing means absent or null).
                let (missing, malformed) = brief_problems(b);
                let fields = missing
                    .into_iter()
                    .chain(malformed.into_iter().map(|(f, _)| f));
                fields.map(|f| format!("taskBrief.{f}")).collect()
            }
            _ => vec!["taskBrief".to_owned()],
        },
        "introduction_request" => ["reason", "required_capability"]
            .into_iter()
            .filter(|k| !present(k))
            .map(String::from)
            .collect(),
        "introduction_response" => match payload.get("agentId").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Vec::new(),
            _ => vec!["agentId".to_owned()],
        },
        t if MESSAGE_TYPES.contains(&t) => Vec::new(),
        unknown => return Err(format_error(unknown, Vec::new())),
    };
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format_error(mt, missing))
    }
}

fn format_error(message_type: &str, missing_fields: Vec<String>) -> SendError {
    SendError::InvalidMessageFormat {
        message_type: message_type.to_owned(),
        missing_fields,
    }
}

/// Insertion-ordered registry with O(1) lookup by contact id.
#[derive(Debug, Clone, Default)]
struct Registry {
    entries: Vec<ContactEntry>,
    index: HashMap<String, usize>,
}

impl Registry {
    fn get(&self, id: &str) -> Option<&ContactEntry> {
        self.index.get(id).map(|&i| &self.entries[i])
    }

    /// The entry that holds for its id, whatever was here (in place: the registry's order
    /// stays), or appended when new.
    fn settle(&mut self, entry: ContactEntry) {
        match self.index.get(&entry.id) {
            Some(&i) => self.entries[i] = entry,
            None => {
                self.index.insert(entry.id.clone(), self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    /// Keep first: returns false (and drops `entry`) when the id is already present.
    fn insert(&mut self, entry: ContactEntry) -> bool {
        if self.index.contains_key(&entry.id) {
            return false;
        }
        self.index.insert(entry.id.clone(), self.entries.len());
        self.entries.push(entry);
        true
    }
}

#[derive(Debug, Clone, Default)]
struct Member {
    record: AgentRecord,
    contacts: Registry,
}

/// A society as plain data: agent records, then registry entries as `(owner, entry)`.
pub type Snapshot = (Vec<AgentRecord>, Vec<(String, ContactEntry)>);

/// All agents of one environment and their contact registries.
#[derive(Debug, Clone, Default)]
pub struct Society {
    agents: BTreeMap<String, Member>,
}

impl Society {
    /// Restores persisted state (agents then contacts), no Changes. Records upsert by id (an
    /// existing registry is kept); contacts follow the keep-first rule; contacts whose owner is
    /// not an agent are dropped (every persisted contact change follows its owner's record).
    pub fn restore(&mut self, agents: Vec<AgentRecord>, contacts: Vec<(String, ContactEntry)>) {
        for record in agents {
            let id = record.id.clone();
            self.agents.entry(id).or_default().record = record;
        }
        for (owner, entry) in contacts {
            if let Some(m) = self.agents.get_mut(&owner) {
                m.contacts.insert(entry);
            }
        }
    }

    /// Takes `entry` as the one that holds in `owner`'s registry (the first recorded anywhere,
    /// when several processes share the society): it replaces a different local entry for the
    /// same contact in place. False (nothing done) when `owner` is not an agent here.
    pub fn settle_contact(&mut self, owner: &str, entry: ContactEntry) -> bool {
        match self.agents.get_mut(owner) {
            Some(m) => {
                m.contacts.settle(entry);
                true
            }
            None => false,
        }
    }

    /// Every agent record and registry entry, in the order [`Society::restore`] takes them.
    pub fn snapshot(&self) -> Snapshot {
        let agents = self.agents.values().map(|m| m.record.clone()).collect();
        let contacts = self
            .agents
            .iter()
            .flat_map(|(id, m)| m.contacts.entries.iter().map(|e| (id.clone(), e.clone())))
            .collect();
        (agents, contacts)
    }

    pub fn exists(&self, id: &str) -> bool {
        self.agents.contains_key(id)
    }

    pub fn role_of(&self, id: &str) -> Option<&str> {
        self.agents.get(id).map(|m| m.record.role.as_str())
    }

    pub fn agent(&self, id: &str) -> Option<&AgentRecord> {
        self.agents.get(id).map(|m| &m.record)
    }

    /// The role shown for `id` in registries and headers: `unknown` when not known or empty.
    fn display_role(&self, id: &str) -> String {
        self.role_of(id)
            .filter(|r| !r.is_empty())
            .unwrap_or("unknown")
            .to_owned()
    }

    /// An agent that joins without spawn_agent (it connected to the hub). Idempotent: returns no
    /// Changes if known, except that a non-empty different role replaces the record's role
    /// (one `Change::Agent`; registries are untouched). New `root` gets `user` and new `user`
    /// gets `root` (source `system`), as in the seed's `initRegistry`.
    pub fn join(&mut self, id: &str, role: &str, now: &str) -> Vec<Change> {
        if let Some(m) = self.agents.get_mut(id) {
            if !role.is_empty() && m.record.role != role {
                m.record.role = role.to_owned();
                return vec![Change::Agent(m.record.clone())];
            }
            return Vec::new();
        }
        let record = AgentRecord {
            id: id.to_owned(),
            role: role.to_owned(),
            parent: None,
            task_brief: None,
        };
        self.create(record, now)
    }

    /// The seed's `initRegistry` for a new agent, then its record; returns the Changes.
    fn create(&mut self, record: AgentRecord, now: &str) -> Vec<Change> {
        let id = record.id.clone();
        let contact = |c: &str, role: &str, source| ContactEntry::new(c, role, source, now);
        let mut initial = match (id.as_str(), record.parent.as_deref()) {
            ("root", _) => vec![contact("user", "user", ContactSource::System)],
            ("user", _) => vec![contact("root", "root", ContactSource::System)],
            (_, Some(p)) => vec![contact(p, &self.display_role(p), ContactSource::Parent)],
            _ => Vec::new(),
        };
        let collaborators = record.task_brief.as_ref().map(|b| &b["collaborators"]);
        for c in collaborators
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(cid) = collaborator_id(c) {
                initial.push(self.described_contact(c, cid, ContactSource::Preset, now));
            }
        }
        self.agents.entry(id.clone()).or_default().record = record.clone();
        let mut changes = vec![Change::Agent(record)];
        for entry in initial {
            changes.extend(self.add_contact(&id, entry));
        }
        changes
    }

    /// An entry for `id` taking `role` and `interfaceSpec` from `info` (a collaborator or an
    /// introduction); without a string role, the role known for `id` (or `unknown`).
    fn described_contact(
        &self,
        info: &Value,
        id: &str,
        source: ContactSource,
        now: &str,
    ) -> ContactEntry {
        let role = match info.get("role").and_then(Value::as_str) {
            Some(r) => r.to_owned(),
            None => self.display_role(id),
        };
        let mut entry = ContactEntry::new(id, &role, source, now);
        entry.interface_spec = info.get("interfaceSpec").filter(|v| !v.is_null()).cloned();
        entry
    }

    /// The seed's `addContact` with keep-first: `Some(Change)` only if `entry` was added
    /// (`owner` known and `entry.id` not yet in its registry).
    pub fn add_contact(&mut self, owner: &str, entry: ContactEntry) -> Option<Change> {
        let m = self.agents.get_mut(owner)?;
        m.contacts.insert(entry.clone()).then(|| Change::Contact {
            owner: owner.to_owned(),
            entry,
        })
    }

    /// The seed's `getContact`.
    pub fn get_contact(&self, owner: &str, contact: &str) -> Option<&ContactEntry> {
        self.agents.get(owner)?.contacts.get(contact)
    }

    /// spawn_agent(roleId, taskBrief) by `parent`, creating `child_id` (chosen by the caller).
    /// Checks in order: the brief, the parent's existence, the child id's freshness; nothing
    /// changes on error. Changes: the child record (with the brief), the child's initial
    /// contacts (parent, then presets; `root`/`user` get their system contact instead of the
    /// parent), then the parent's entry for the child (source `child`, role `role_id`).
    pub fn spawn(
        &mut self,
        parent: &str,
        role_id: &str,
        child_id: &str,
        brief: &Value,
        now: &str,
    ) -> Result<Vec<Change>, SpawnError> {
        validate_task_brief(brief).map_err(SpawnError::InvalidBrief)?;
        if !self.exists(parent) {
            return Err(SpawnError::AgentNotFound(parent.to_owned()));
        }
        if self.exists(child_id) {
            return Err(SpawnError::AgentExists(child_id.to_owned()));
        }
        let record = AgentRecord {
            id: child_id.to_owned(),
            role: role_id.to_owned(),
            parent: Some(parent.to_owned()),
            task_brief: Some(brief.clone()),
        };
        let mut changes = self.create(record, now);
        let entry = ContactEntry::new(child_id, role_id, ContactSource::Child, now);
        changes.extend(self.add_contact(parent, entry));
        Ok(changes)
    }

    /// The agent's initial context (Property 2): `{agentId, roleId, parent, taskBrief}` (the last
    /// two null for an agent that joined), or None for an unknown agent.
    pub fn context(&self, id: &str) -> Option<Value> {
        let r = &self.agents.get(id)?.record;
        let (brief, parent) = (&r.task_brief, &r.parent);
        Some(json!({"agentId": r.id, "roleId": r.role, "parent": parent, "taskBrief": brief}))
    }

    /// The seed's `isContactKnown`: for queries only, never consulted when sending.
    pub fn is_contact_known(&self, from: &str, to: &str) -> ContactCheck {
        let error = match self.agents.get(from) {
            None => Some(ContactCheckError::SenderNotFound),
            Some(m) if m.contacts.get(to).is_none() => Some(ContactCheckError::UnknownContact),
            Some(_) => None,
        };
        ContactCheck {
            in_registry: error.is_none(),
            error,
        }
    }

    /// Property 5: registries never block sending; only the recipient must exist.
    pub fn can_send_message(&self, _from: &str, to: &str) -> bool {
        self.exists(to)
    }

    /// `id`'s registry in insertion order (empty for an unknown agent).
    pub fn list_contacts(&self, id: &str) -> Vec<ContactEntry> {
        self.agents
            .get(id)
            .map(|m| m.contacts.entries.clone())
            .unwrap_or_default()
    }

    /// send_message from the authenticated sender `from` (Property 8: a `from` inside an object
    /// payload is overwritten). Fails, changing nothing, when `to` is unknown or the payload does
    /// not fit its `message_type`. Changes: `from` into `to`'s registry (first message), then the
    /// target of an `introduction_response` into `to`'s registry (source introduction).
    pub fn send(
        &mut self,
        from: &str,
        to: &str,
        payload: &Value,
        now: &str,
    ) -> Result<(Delivery, Vec<Change>), SendError> {
        if !self.exists(to) {
            return Err(SendError::AgentNotFound(to.to_owned()));
        }
        validate_message_type(payload)?;
        let first = ContactEntry::new(
            from,
            &self.display_role(from),
            ContactSource::FirstMessage,
            now,
        );
        let mut changes: Vec<Change> = self.add_contact(to, first).into_iter().collect();
        if payload["message_type"] == "introduction_response" {
            // validate_message_type guarantees a non-empty string agentId.
            let target = payload["agentId"].as_str().unwrap_or_default();
            let mut entry =
                self.described_contact(payload, target, ContactSource::Introduction, now);
            entry.introduced_by = Some(from.to_owned());
            changes.extend(self.add_contact(to, entry));
        }
        let mut stamped = payload.clone();
        if let Value::Object(m) = &mut stamped {
            m.insert("from".to_owned(), Value::String(from.to_owned()));
        }
        let shown_role = self.role_of(from).filter(|r| !r.is_empty());
        let formatted = format_message_for_agent(from, shown_role, &stamped);
        let delivery = Delivery {
            from: from.to_owned(),
            to: to.to_owned(),
            payload: stamped,
            formatted,
        };
        Ok((delivery, changes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::{hash_set, vec};
    use proptest::prelude::*;

    #[test]
    fn a_settled_contact_replaces_in_place_and_snapshot_restores() {
        let mut s = Society::default();
        s.join("root", "root", "t0");
        let brief = json!({"objective": "o", "constraints": [], "inputs": "i", "outputs": "o",
                           "completion_criteria": "c"});
        s.spawn("root", "guide", "kid", &brief, "t1").unwrap();
        let ids = |s: &Society| -> Vec<String> {
            s.list_contacts("root").into_iter().map(|e| e.id).collect()
        };
        assert_eq!(ids(&s), ["user", "kid"]);
        let winner = ContactEntry::new("user", "visitor", ContactSource::FirstMessage, "t9");
        assert!(s.settle_contact("root", winner.clone()));
        assert_eq!(ids(&s), ["user", "kid"], "in place");
        assert_eq!(s.get_contact("root", "user"), Some(&winner));
        assert!(!s.settle_contact("nobody", winner));
        let (agents, contacts) = s.snapshot();
        let mut t = Society::default();
        t.restore(agents, contacts);
        assert_eq!(t.snapshot(), s.snapshot());
    }

    const NOW: &str = "2026-01-05T12:00:00.000+08:00";

    fn seed_brief() -> Value {
        json!({
            "objective": "创建一个简单的计算器程序",
            "constraints": ["使用 HTML + JavaScript 实现", "必须是静态网页，不需要后端"],
            "inputs": "用户通过网页界面输入数字和运算符",
            "outputs": "在网页上显示计算结果",
            "completion_criteria": "计算器能正确执行加减乘除运算，界面美观易用",
            "collaborators": [{"agentId": "agent-ui-designer", "role": "UI设计师",
                "description": "如需界面设计建议，可联系此智能体"}],
            "references": ["参考现有计算器应用的界面设计"],
            "priority": "high"
        })
    }

    fn missing_of(brief: &Value) -> Vec<String> {
        validate_task_brief(brief).unwrap_err().missing_fields
    }

    #[test]
    fn brief_complete_missing_and_non_object() {
        assert_eq!(validate_task_brief(&seed_brief()), Ok(()));
        let mut b = seed_brief();
        b["objective"] = json!(""); // present: only absent or null count as missing
        assert_eq!(validate_task_brief(&b), Ok(()));
        for f in REQUIRED_BRIEF_FIELDS {
            let mut b = seed_brief();
            b.as_object_mut().unwrap().remove(f);
            assert_eq!(missing_of(&b), [f]);
            b[f] = Value::Null;
            let e = validate_task_brief(&b).unwrap_err();
            assert_eq!(e.errors, [format!("missing required field: {f}")]);
        }
        let b = json!({"objective": "x", "inputs": null, "outputs": "y"});
        let expected = ["constraints", "inputs", "completion_criteria"];
        assert_eq!(missing_of(&b), expected);
        for b in [json!({}), Value::Null, json!("brief"), json!([1, 2])] {
            assert_eq!(missing_of(&b), REQUIRED_BRIEF_FIELDS, "{b}");
        }
    }

    #[test]
    fn brief_malformed_fields_and_json() {
        let mut b = seed_brief();
        b["constraints"] = json!("HTML");
        let j = validate_task_brief(&b).unwrap_err().to_json();
        let expected = json!({"error": "invalid_task_brief", "missing_fields": [],
            "errors": ["constraints must be an array"]});
        assert_eq!(j, expected);
        let bads = json!([5, [1], [{"role": "x"}], [{"agentId": ""}], {"agentId": "a"}]);
        for bad in bads.as_array().unwrap() {
            b = seed_brief();
            b["collaborators"] = bad.clone();
            let errors = validate_task_brief(&b).unwrap_err().errors;
            assert_eq!(errors, [COLLABORATORS_ERROR]);
        }
        b["collaborators"] = Value::Null;
        assert_eq!(validate_task_brief(&b), Ok(()));
    }

    #[test]
    fn registries_root_user_join_add_get() {
        let mut s = Society::default();
        assert_eq!(s.join("root", "root", NOW).len(), 2);
        let user = ContactEntry::new("user", "user", ContactSource::System, NOW);
        assert_eq!(s.list_contacts("root"), [user]);
        s.join("user", "user", NOW);
        let root = ContactEntry::new("root", "root", ContactSource::System, NOW);
        assert_eq!(s.list_contacts("user"), [root]);
        s.spawn("root", "程序员", "c1", &seed_brief(), NOW).unwrap();
        let parent = ContactEntry::new("root", "root", ContactSource::Parent, NOW);
        assert_eq!(s.list_contacts("c1")[0], parent);
        // join: idempotent, a new non-empty role updates the record only.
        assert_eq!(s.join("a", "r1", NOW).len(), 1);
        assert!(s.join("a", "r1", NOW).is_empty() && s.join("a", "", NOW).is_empty());
        assert!(matches!(&s.join("a", "r2", NOW)[..], [Change::Agent(r)] if r.role == "r2"));
        assert_eq!((s.role_of("a"), s.list_contacts("a")), (Some("r2"), vec![]));
        // add/get with keep-first; isContactKnown's JSON.
        let first = ContactEntry::new("b", "rb", ContactSource::Preset, NOW);
        assert!(s.add_contact("nobody", first.clone()).is_none());
        assert!(s.add_contact("a", first.clone()).is_some());
        let later = ContactEntry::new("b", "x", ContactSource::Introduction, "t");
        assert!(s.add_contact("a", later).is_none());
        assert_eq!(s.get_contact("a", "b"), Some(&first));
        assert_eq!(s.get_contact("a", "c"), None);
        let check = |from, to| serde_json::to_value(s.is_contact_known(from, to)).unwrap();
        assert_eq!(check("a", "b"), json!({"inRegistry": true}));
        let unknown = json!({"inRegistry": false, "error": "unknown_contact"});
        assert_eq!(check("a", "c"), unknown);
        let no_sender = json!({"inRegistry": false, "error": "sender_not_found"});
        assert_eq!(check("zz", "a"), no_sender);
    }

    #[test]
    fn spawn_errors_changes_and_restore() {
        let mut s = Society::default();
        let mut changes = s.join("p", "经理", NOW);
        let err = |r: Result<Vec<Change>, SpawnError>| r.unwrap_err().to_json();
        for (parent, child) in [("ghost", "c"), ("p", "p")] {
            let e = err(s.spawn(parent, "r", child, &json!({}), NOW)); // the brief comes first
            assert_eq!(e["error"], "invalid_task_brief");
        }
        let e = err(s.spawn("ghost", "r", "c", &seed_brief(), NOW));
        assert_eq!(e, json!({"error": "agent_not_found", "agentId": "ghost"}));
        let e = err(s.spawn("p", "r", "p", &seed_brief(), NOW));
        assert_eq!(e, json!({"error": "agent_exists", "agentId": "p"}));
        assert!(!s.exists("c") && s.list_contacts("p").is_empty());
        changes.extend(s.spawn("p", "程序员", "c", &seed_brief(), NOW).unwrap());
        let preset = &s.list_contacts("c")[1];
        assert_eq!(
            [&preset.id, &preset.role],
            ["agent-ui-designer", "UI设计师"]
        );
        assert_eq!(
            s.get_contact("p", "c").unwrap().source,
            ContactSource::Child
        );
        changes.extend(s.send("c", "p", &json!({"text": "hi"}), NOW).unwrap().1);
        let j = serde_json::to_value(&changes[2]).unwrap();
        let parent = json!({"id": "p", "role": "经理", "source": "parent", "addedAt": NOW});
        assert_eq!(j, json!({"kind": "contact", "owner": "c", "entry": parent}));
        let (mut agents, mut contacts) = (Vec::new(), Vec::new());
        for c in changes {
            match c {
                Change::Agent(r) => agents.push(r),
                Change::Contact { owner, entry } => contacts.push((owner, entry)),
            }
        }
        let mut r = Society::default();
        r.restore(agents, contacts);
        for id in ["p", "c"] {
            assert_eq!(r.list_contacts(id), s.list_contacts(id));
            assert_eq!(r.context(id), s.context(id));
        }
    }

    #[test]
    fn introduction_flow() {
        let mut s = Society::default();
        s.join("p", "经理", NOW);
        s.join("t", "测试员", NOW);
        s.spawn("p", "程序员", "c", &seed_brief(), NOW).unwrap();
        let req = json!({"message_type": "introduction_request", "reason": "需要测试",
            "required_capability": "测试"});
        s.send("c", "p", &req, NOW).unwrap();
        let spec = json!({"services": "代码测试服务", "input_format": "路径"});
        let resp = json!({"message_type": "introduction_response", "agentId": "t",
            "interfaceSpec": spec});
        let (_, ch) = s.send("p", "c", &resp, "t2").unwrap();
        assert_eq!(ch.len(), 1); // c already knew p as its parent
        let mut expected = ContactEntry::new("t", "测试员", ContactSource::Introduction, "t2");
        expected.interface_spec = Some(spec);
        expected.introduced_by = Some("p".into());
        assert_eq!(s.get_contact("c", "t"), Some(&expected));
        s.send("c", "t", &json!("你好"), NOW).unwrap();
        let first = ContactEntry::new("c", "程序员", ContactSource::FirstMessage, NOW);
        assert_eq!(s.get_contact("t", "c"), Some(&first));
    }

    #[test]
    fn formatter_agent_user_and_reply_hint() {
        let p = json!({"text": "请完成登录页"});
        let agent = format_message_for_agent("agent-1", Some("程序员"), &p);
        let hint = "如需回复，请使用 send_message(to='agent-1', ...)";
        assert_eq!(
            agent,
            format!("【来自 程序员（agent-1）的消息】\n请完成登录页\n{hint}")
        );
        let user = format_message_for_agent("user", Some("user"), &p);
        assert_eq!(user, "【来自用户的消息】\n请完成登录页");
        let f = |p: Value| format_message_for_agent("a", None, &p);
        assert!(f(json!("plain")).starts_with("【来自 unknown（a）的消息】\nplain\n如需回复"));
        assert!(f(json!({"k": 1})).contains("\n{\"k\":1}\n"));
        assert!(f(json!({"text": 7})).contains("{\"text\":7}"));
        assert!(f(Value::Null).contains("\nnull\n"));
    }

    #[test]
    fn message_type_errors_json() {
        let p = json!({"message_type": "introduction_request", "reason": null});
        let expected = json!({"error": "invalid_message_format",
            "message_type": "introduction_request",
            "missing_fields": ["reason", "required_capability"]});
        assert_eq!(validate_message_type(&p).unwrap_err().to_json(), expected);
        let e = validate_message_type(&json!({"message_type": "gossip"})).unwrap_err();
        let allowed = json!(MESSAGE_TYPES);
        let expected = json!({"error": "invalid_message_format", "message_type": "gossip",
            "missing_fields": [], "allowed_types": allowed});
        assert_eq!(e.to_json(), expected);
        let brief = json!({"constraints": 1, "objective": "o", "inputs": "i", "outputs": "o"});
        let p = json!({"message_type": "task_assignment", "taskBrief": brief});
        let fields = ["taskBrief.completion_criteria", "taskBrief.constraints"];
        let e = format_error("task_assignment", fields.map(String::from).to_vec());
        assert_eq!(validate_message_type(&p), Err(e));
        assert!(validate_message_type(&json!({"message_type": 3})).is_err());
        assert!(validate_message_type(&json!("no type")).is_ok());
    }

    // ---- property tests -------------------------------------------------------------------

    /// Non-empty ids with ASCII, CJK and kana characters (never the special root/user).
    fn id() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_.:-\u{4e00}-\u{4e3f}\u{3040}-\u{3060}]{1,10}"
            .prop_filter("reserved ids", |s| s != "root" && s != "user")
    }

    fn text() -> impl Strategy<Value = String> {
        "\\PC{0,12}"
    }

    /// A brief field: absent, null, or a value of any JSON kind.
    fn field() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            text().prop_map(|s| Some(json!(s))),
            vec(text(), 0..3).prop_map(|v| Some(json!(v))),
            any::<i32>().prop_map(|n| Some(json!(n))),
            any::<bool>().prop_map(|b| Some(json!(b))),
            Just(Some(json!({"k": "v"}))),
        ]
    }

    /// Any non-null JSON value.
    fn present() -> impl Strategy<Value = Value> {
        field().prop_filter_map("present", |f| f.filter(|v| !v.is_null()))
    }

    fn collaborator() -> impl Strategy<Value = Value> {
        let spec = prop::option::of(text().prop_map(|s| json!({"services": s})));
        (id(), text(), spec).prop_map(|(i, r, spec)| {
            let mut c = json!({"agentId": i, "role": r, "description": "d"});
            if let Some(spec) = spec {
                c["interfaceSpec"] = spec;
            }
            c
        })
    }

    /// A valid brief: the required fields (constraints an array) and some optional ones.
    fn valid_brief() -> impl Strategy<Value = Value> {
        let required = (present(), vec(text(), 0..3), vec(present(), 3));
        let optional = (
            prop::option::of(vec(collaborator(), 0..3).prop_map(Value::from)),
            prop::option::of(vec(text(), 0..3).prop_map(Value::from)),
            prop::option::of(text().prop_map(Value::from)),
            prop::option::of(present()),
        );
        (required, optional).prop_map(|((o, c, rest), (collab, refs, prio, extra))| {
            let mut b = json!({"objective": o, "constraints": c, "inputs": rest[0],
                "outputs": rest[1], "completion_criteria": rest[2]});
            let optional = [("collaborators", collab), ("references", refs)];
            let more = [("priority", prio), ("extra_note", extra)];
            for (k, v) in optional.into_iter().chain(more) {
                if let Some(v) = v {
                    b[k] = v;
                }
            }
            b
        })
    }

    fn society_of(ids: &[String], roles: &[String]) -> Society {
        let mut s = Society::default();
        for (i, r) in ids.iter().zip(roles) {
            s.join(i, r, NOW);
        }
        s
    }

    fn ids_of(s: &Society, owner: &str) -> Vec<String> {
        s.list_contacts(owner).into_iter().map(|e| e.id).collect()
    }

    type Pick = prop::sample::Index;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn property_01_task_brief_validation(
            fields in vec(field(), 5),
            collab in prop_oneof![
                Just(None), Just(Some(Value::Null)),
                vec(collaborator(), 0..3).prop_map(|v| Some(json!(v))),
                Just(Some(json!(5))), Just(Some(json!([{"role": "x"}]))),
            ],
            non_object in prop_oneof![Just(Value::Null), text().prop_map(Value::from)],
        ) {
            let mut brief = json!({});
            for (name, f) in REQUIRED_BRIEF_FIELDS.iter().zip(&fields) {
                if let Some(v) = f { brief[*name] = v.clone(); }
            }
            if let Some(c) = &collab { brief["collaborators"] = c.clone(); }
            let expected: Vec<String> = REQUIRED_BRIEF_FIELDS.iter().zip(&fields)
                .filter(|(_, f)| matches!(f, None | Some(Value::Null)))
                .map(|(n, _)| n.to_string()).collect();
            let bad_constraints = matches!(&fields[1], Some(v) if !v.is_null() && !v.is_array());
            let bad_collab = matches!(&collab, Some(v) if !v.is_null() && !v.as_array()
                .is_some_and(|a| a.iter().all(|c| c["agentId"].is_string())));
            match validate_task_brief(&brief) {
                Ok(()) => prop_assert!(expected.is_empty() && !bad_constraints && !bad_collab),
                Err(e) => {
                    prop_assert_eq!(&e.missing_fields, &expected);
                    let constraints_error = "constraints must be an array".to_owned();
                    prop_assert_eq!(e.errors.contains(&constraints_error), bad_constraints);
                    let problems = usize::from(bad_constraints) + usize::from(bad_collab);
                    prop_assert_eq!(e.errors.len(), expected.len() + problems);
                    prop_assert_eq!(&e.to_json()["missing_fields"], &json!(expected));
                }
            }
            prop_assert_eq!(missing_of(&non_object), REQUIRED_BRIEF_FIELDS);
        }

        #[test]
        fn property_02_task_brief_injected_into_context(
            ids in hash_set(id(), 2), role in text(), brief in valid_brief(), drop in 0usize..5,
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            let (parent, child) = (&ids[0], &ids[1]);
            let mut s = society_of(&ids[..1], &["经理".into()]);
            s.spawn(parent, &role, child, &brief, NOW).unwrap();
            let ctx = s.context(child).unwrap();
            prop_assert_eq!(&ctx["agentId"], &json!(child));
            prop_assert_eq!(&ctx["roleId"], &json!(role));
            prop_assert_eq!(&ctx["parent"], &json!(parent));
            let given = brief.as_object().unwrap();
            for (k, v) in given {
                prop_assert_eq!(&ctx["taskBrief"][k], v, "field {}", k);
            }
            prop_assert_eq!(ctx["taskBrief"].as_object().unwrap().len(), given.len());
            // A brief lacking one required field creates nothing.
            let mut broken = brief.clone();
            broken.as_object_mut().unwrap().remove(REQUIRED_BRIEF_FIELDS[drop]);
            let other = format!("{child}-2");
            let err = s.spawn(parent, &role, &other, &broken, NOW).unwrap_err();
            prop_assert!(matches!(err, SpawnError::InvalidBrief(_)));
            prop_assert!(s.context(&other).is_none());
        }

        #[test]
        fn property_03_registry_initialised_with_parent(
            ids in hash_set(id(), 2), roles in vec(text(), 2), brief in valid_brief(),
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            let mut s = society_of(&ids[..1], &roles);
            s.spawn(&ids[0], &roles[1], &ids[1], &brief, NOW).unwrap();
            let first = &s.list_contacts(&ids[1])[0];
            let shown = if roles[0].is_empty() { "unknown" } else { roles[0].as_str() };
            prop_assert_eq!(first, &ContactEntry::new(&ids[0], shown, ContactSource::Parent, NOW));
            prop_assert!(s.is_contact_known(&ids[1], &ids[0]).in_registry);
        }

        #[test]
        fn property_04_parent_registry_gains_child(
            ids in hash_set(id(), 2..6), roles in vec(text(), 6), brief in valid_brief(),
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            let mut s = society_of(&ids[..1], &roles);
            for (child, role) in ids[1..].iter().zip(&roles[1..]) {
                let changes = s.spawn(&ids[0], role, child, &brief, NOW).unwrap();
                let expected = ContactEntry::new(child, role, ContactSource::Child, NOW);
                prop_assert_eq!(s.get_contact(&ids[0], child), Some(&expected));
                let last = Change::Contact { owner: ids[0].clone(), entry: expected };
                prop_assert_eq!(changes.last(), Some(&last));
            }
            prop_assert_eq!(&ids_of(&s, &ids[0])[..], &ids[1..]);
        }

        #[test]
        fn property_05_registry_never_blocks_sending(
            ids in hash_set(id(), 2..6), a in any::<Pick>(), b in any::<Pick>(), ghost in id(),
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            prop_assume!(!ids.contains(&ghost));
            let mut s = society_of(&ids, &ids);
            let (from, to) = (a.get(&ids), b.get(&ids));
            let unknown = Some(ContactCheckError::UnknownContact);
            prop_assert_eq!(s.is_contact_known(from, to), ContactCheck { in_registry: false,
                error: unknown });
            prop_assert!(s.can_send_message(from, to));
            let hi = json!({"text": "hi"});
            prop_assert!(s.send(from, to, &hi, NOW).is_ok());
            let no_sender = Some(ContactCheckError::SenderNotFound);
            prop_assert_eq!(s.is_contact_known(&ghost, to).error, no_sender);
            prop_assert!(s.can_send_message(&ghost, to));
            prop_assert!(s.send(&ghost, to, &json!("x"), NOW).is_ok());
            prop_assert!(!s.can_send_message(from, &ghost));
            let err = s.send(from, &ghost, &json!("x"), NOW).unwrap_err();
            prop_assert_eq!(err, SendError::AgentNotFound(ghost.clone()));
        }

        #[test]
        fn property_06_preset_collaborators(
            ids in hash_set(id(), 3..7), roles in vec(text(), 7),
            specs in vec(prop::option::of(present()), 7), base in valid_brief(),
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            let (parent, child, collabs) = (&ids[0], &ids[1], &ids[2..]);
            let mut s = society_of(collabs, &roles);
            s.join(parent, "经理", NOW);
            let described = collabs.iter().zip(&roles).zip(&specs);
            let list: Vec<Value> = described.clone().map(|((i, r), spec)| {
                let mut c = json!({"agentId": i, "role": format!("协作-{r}"), "description": "d"});
                if let Some(spec) = spec { c["interfaceSpec"] = spec.clone(); }
                c
            }).collect();
            let mut brief = base;
            brief["collaborators"] = json!(list);
            s.spawn(parent, "程序员", child, &brief, NOW).unwrap();
            for ((c, r), spec) in described {
                let e = s.get_contact(child, c).unwrap();
                prop_assert_eq!(e.source, ContactSource::Preset);
                prop_assert_eq!(&e.role, &format!("协作-{r}"));
                prop_assert_eq!(&e.interface_spec, spec);
                prop_assert!(s.can_send_message(child, c));
                let req = json!({"message_type": "collaboration_request"});
                prop_assert!(s.send(child, c, &req, NOW).is_ok());
            }
            prop_assert_eq!(s.list_contacts(child).len(), 1 + collabs.len());
        }

        #[test]
        fn property_07_first_message_adds_sender(
            ids in hash_set(id(), 2..5), roles in vec(text(), 5),
            sends in vec((any::<Pick>(), any::<Pick>()), 1..12),
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            let mut s = society_of(&ids, &roles);
            let mut model: HashMap<String, Vec<String>> = HashMap::new();
            for (a, b) in sends {
                let (from, to) = (a.get(&ids), b.get(&ids));
                let (_, changes) = s.send(from, to, &json!({"text": "x"}), NOW).unwrap();
                let known = model.entry(to.clone()).or_default();
                if known.contains(from) {
                    prop_assert!(changes.is_empty());
                } else {
                    known.push(from.clone());
                    let role = s.role_of(from).filter(|r| !r.is_empty()).unwrap_or("unknown");
                    let entry = ContactEntry::new(from, role, ContactSource::FirstMessage, NOW);
                    prop_assert_eq!(s.get_contact(to, from), Some(&entry));
                    prop_assert_eq!(changes, vec![Change::Contact { owner: to.clone(), entry }]);
                }
            }
            for i in &ids {
                prop_assert_eq!(ids_of(&s, i), model.remove(i).unwrap_or_default());
            }
        }

        #[test]
        fn property_08_from_is_the_sender(
            ids in hash_set(id(), 2), forged in prop::option::of(present()),
            extra in vec((text(), present()), 0..4), scalar in present(),
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            let mut s = society_of(&ids, &ids);
            let mut payload = json!({});
            for (k, v) in &extra { payload[k] = v.clone(); }
            let m = payload.as_object_mut().unwrap();
            m.remove("message_type");
            m.remove("from");
            if let Some(f) = &forged { payload["from"] = f.clone(); }
            let (d, _) = s.send(&ids[0], &ids[1], &payload, NOW).unwrap();
            prop_assert_eq!(&d.from, &ids[0]);
            prop_assert_eq!(&d.payload["from"], &json!(ids[0]));
            for (k, v) in payload.as_object().unwrap() {
                if k != "from" { prop_assert_eq!(&d.payload[k], v); }
            }
            let keys = payload.as_object().unwrap().len() + usize::from(forged.is_none());
            prop_assert_eq!(d.payload.as_object().unwrap().len(), keys);
            if !scalar.is_object() {
                prop_assert_eq!(s.send(&ids[1], &ids[0], &scalar, NOW).unwrap().0.payload, scalar);
            }
        }

        #[test]
        fn property_09_message_formatting(
            ids in hash_set(id(), 2), role in "\\PC{1,8}", content in "\\PC{1,20}",
        ) {
            let ids: Vec<_> = ids.into_iter().collect();
            let (from, to) = (&ids[0], &ids[1]);
            let hint = format!("如需回复，请使用 send_message(to='{from}', ...)");
            let expected = format!("【来自 {role}（{from}）的消息】\n{content}\n{hint}");
            let payload = json!({"text": content});
            prop_assert_eq!(&format_message_for_agent(from, Some(&role), &payload), &expected);
            let mut s = society_of(&ids, &[role.clone(), "r".into()]);
            prop_assert_eq!(s.send(from, to, &payload, NOW).unwrap().0.formatted, expected);
            s.join("user", "user", NOW);
            let d = s.send("user", to, &json!(content), NOW).unwrap().0;
            prop_assert_eq!(d.formatted, format!("【来自用户的消息】\n{content}"));
        }

        #[test]
        fn property_10_message_type_validation(
            kind in prop_oneof![
                prop::sample::select(MESSAGE_TYPES.to_vec()).prop_map(String::from),
                "[a-z_]{1,12}",
            ],
            brief in prop_oneof![
                Just(None), valid_brief().prop_map(Some), Just(Some(json!({}))),
                Just(Some(json!("b"))),
            ],
            reason in field(), capability in field(), target in field(),
        ) {
            let mut p = json!({"message_type": kind});
            let fields = [("taskBrief", &brief), ("reason", &reason),
                ("required_capability", &capability), ("agentId", &target)];
            for (k, v) in fields {
                if let Some(v) = v { p[k] = v.clone(); }
            }
            let absent = |f: &Option<Value>| matches!(f, None | Some(Value::Null));
            let expected: Option<Vec<String>> = match kind.as_str() {
                "task_assignment" => match &brief {
                    Some(b) if b.as_object().is_some_and(|m| m.is_empty()) => Some(
                        REQUIRED_BRIEF_FIELDS.iter().map(|f| format!("taskBrief.{f}")).collect()),
                    Some(b) if b.is_object() => None,
                    _ => Some(vec!["taskBrief".into()]),
                },
                "introduction_request" => {
                    let m: Vec<String> = [("reason", &reason), ("required_capability", &capability)]
                        .into_iter().filter(|(_, f)| absent(f)).map(|(k, _)| k.into()).collect();
                    (!m.is_empty()).then_some(m)
                }
                "introduction_response" => match &target {
                    Some(Value::String(t)) if !t.is_empty() => None,
                    _ => Some(vec!["agentId".into()]),
                },
                k if MESSAGE_TYPES.contains(&k) => None,
                _ => Some(vec![]),
            };
            let expected = expected.map(|m| format_error(&kind, m));
            prop_assert_eq!(validate_message_type(&p).err(), expected.clone());
            // Through send: the same verdict, and a rejected message changes nothing.
            let mut s = society_of(&["a".into(), "b".into()], &["ra".into(), "rb".into()]);
            let sent = s.send("a", "b", &p, NOW);
            prop_assert_eq!(sent.as_ref().err(), expected.as_ref());
            prop_assert_eq!(s.list_contacts("b").is_empty(), expected.is_some());
        }
    }
}
