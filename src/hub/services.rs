//! Messages addressed to the hub itself (`recipient: {id: "hub", type: "hub"}`): the only
//! payloads the hub parses. Each gets a reply (`kind: "response"`, `requestId` = the message's
//! id) or a hub `error`.
//!
//! | `payload.type`     | who    | what                                                          |
//! |--------------------|--------|---------------------------------------------------------------|
//! | `ack`              | any    | `{seq}`: everything up to `seq` processed (ack=manual)        |
//! | `presence`         | any    | `{client_type?, env?}`: ids online in an environment          |
//! | `spawn_agent`      | agent  | `{roleId, taskBrief, agentId?}`: seed 001 spawn               |
//! | `send_message`     | agent  | `{to, payload}`: seed 001 send (from filled, contacts, format)|
//! | `list_contacts`    | agent  | the caller's contact registry                                 |
//! | `is_contact_known` | agent  | `{agentId}`: `{inRegistry, error?}`                           |
//! | `get_context`      | agent  | the task brief the caller was spawned with                    |

use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::envelope::{self, HubError, Inbound, OutMessage, PeerType};
use super::mailbox::Entry;
use super::society::{SendError, SpawnError};
use super::{Address, Conn, Hub};
use crate::util::{now_ms, random_id};

pub(super) async fn handle(
    hub: &Hub,
    conn: &Arc<Conn>,
    m: &Inbound<'_>,
    id: &str,
    trace: &str,
) -> Result<(), HubError> {
    let payload: Value = serde_json::from_str(m.payload.get())
        .map_err(|e| HubError::validation(format!("payload: {e}"), "send a JSON object"))?;
    let op = payload.get("type").and_then(Value::as_str).unwrap_or("");
    let str_field = |k: &str| payload.get(k).and_then(Value::as_str);
    let reply = |v: Value| conn.reply(id, trace, &v);
    // A service answers after what the client sent before it is settled (deliveries to other
    // processes included): its reply is a barrier the client can rely on. Not acks: frequent,
    // and they concern what the client received.
    if op != "ack" {
        hub.settle_pipe(conn).await;
    }
    match op {
        "ack" => {
            let Some(seq) = payload.get("seq").and_then(Value::as_u64) else {
                return Err(HubError::validation(
                    "ack needs seq (a non-negative integer)",
                    "acknowledge with the seq of the last message you processed",
                ));
            };
            let released = conn.mailbox.ack(seq);
            // Acks are frequent: no reply unless asked (`reply: true`).
            if payload.get("reply").and_then(Value::as_bool) == Some(true) {
                let (next, acked) = conn.mailbox.counters();
                reply(
                    json!({"type": "ack_result", "acked": acked, "released": released, "next_seq": next}),
                );
            }
            Ok(())
        }
        "presence" => {
            let ty = str_field("client_type")
                .map(|t| {
                    PeerType::parse(t).ok_or_else(|| {
                        HubError::validation(
                            format!("client_type {t:?} is not agent, environment or human"),
                            "use agent, environment or human",
                        )
                    })
                })
                .transpose()?
                .unwrap_or(PeerType::Agent);
            let env = match (str_field("env"), &conn.address.env) {
                (Some(e), Some(own)) if e != &**own => {
                    return Err(HubError::denied(
                        "presence of another environment",
                        "ask about your own environment",
                    ));
                }
                (Some(e), _) => Some(e.to_string()),
                (None, own) => own.as_deref().map(str::to_owned),
            };
            let env = if ty == PeerType::Human { None } else { env };
            // Across processes: the presence bucket; here: the local registry.
            let ids = match hub.backend() {
                super::Backend::Nats(n) => n
                    .present_in(env.as_deref(), ty)
                    .await
                    .unwrap_or_else(|_| hub.online_in(env.as_deref(), ty)),
                _ => hub.online_in(env.as_deref(), ty),
            };
            reply(
                json!({"type": "presence", "client_type": ty.as_str(), "env": env, "online": ids}),
            );
            Ok(())
        }
        "spawn_agent" | "send_message" | "list_contacts" | "is_contact_known" | "get_context" => {
            let (PeerType::Agent, Some(env)) = (conn.address.ty, conn.address.env.clone()) else {
                return Err(HubError::denied(
                    format!("{op} is an agent-society service: only agents use it"),
                    "connect as an agent at /env/{env_id}/agent/{agent_id}",
                ));
            };
            society_op(hub, conn, &env, op, &payload, id, trace).await
        }
        "" => Err(HubError::validation(
            "a message to the hub needs payload.type",
            "one of ack, presence, spawn_agent, send_message, list_contacts, is_contact_known, get_context",
        )),
        other => Err(HubError::validation(
            format!("the hub has no service {other:?}"),
            "one of ack, presence, spawn_agent, send_message, list_contacts, is_contact_known, get_context",
        )),
    }
}

async fn society_op(
    hub: &Hub,
    conn: &Arc<Conn>,
    env: &str,
    op: &str,
    payload: &Value,
    id: &str,
    trace: &str,
) -> Result<(), HubError> {
    let me = conn.address.id.to_string();
    let now = envelope::iso8601(now_ms());
    let str_field = |k: &str| payload.get(k).and_then(Value::as_str);
    match op {
        "spawn_agent" => {
            let role = str_field("roleId").unwrap_or_default().to_string();
            if role.is_empty() {
                return Err(HubError::validation(
                    "spawn_agent needs roleId",
                    "give the role (岗位) of the new agent",
                ));
            }
            let child = match str_field("agentId") {
                Some(c) => c.to_string(),
                None => format!("{}-{}", short(&role), &random_id("")[..8]),
            };
            envelope::valid_id(&child).map_err(|e| {
                HubError::validation(
                    format!("agentId: {e}"),
                    "choose another agentId, or omit it",
                )
            })?;
            let brief = payload.get("taskBrief").cloned().unwrap_or(Value::Null);
            let result = {
                let mut socs = hub.societies.lock().unwrap_or_else(|p| p.into_inner());
                let soc = socs.entry(env.to_string()).or_default();
                soc.spawn(&me, &role, &child, &brief, &now)
            };
            let changes = result.map_err(|e| {
                let (msg, hint) = match &e {
                    SpawnError::InvalidBrief(_) => (
                        "invalid task brief",
                        "give objective, constraints (array), inputs, outputs and completion_criteria",
                    ),
                    SpawnError::AgentNotFound(_) => (
                        "the parent is not part of this society",
                        "reconnect and retry",
                    ),
                    SpawnError::AgentExists(_) => ("an agent with this id exists", "choose another agentId"),
                };
                HubError::validation(msg, hint).with_extra(e.to_json())
            })?;
            hub.persist_society(env, changes).await?;
            conn.reply(
                id,
                trace,
                &json!({"type": "spawn_agent_result", "agentId": child, "roleId": role,
                        "endpoint": format!("/env/{env}/agent/{child}")}),
            );
            Ok(())
        }
        "send_message" => {
            let to = str_field("to").unwrap_or_default().to_string();
            let inner = payload.get("payload").cloned().unwrap_or(Value::Null);
            let target = Address::agent(env, &to);
            hub.check_tier(conn, &target).await?;
            let result = {
                let mut socs = hub.societies.lock().unwrap_or_else(|p| p.into_inner());
                socs.entry(env.to_string())
                    .or_default()
                    .send(&me, &to, &inner, &now)
            };
            let (delivery, changes) = result.map_err(|e| match &e {
                SendError::AgentNotFound(_) => HubError::unavailable(
                    format!("agent {to:?} not found"),
                    "check the id; list_contacts shows the agents you know",
                )
                .with_extra(e.to_json()),
                SendError::InvalidMessageFormat { .. } => HubError::validation(
                    "payload does not match its message_type",
                    "add the fields listed in missing_fields",
                )
                .with_extra(e.to_json()),
            })?;
            hub.persist_society(env, changes).await?;
            let msg_id = random_id("msg_");
            let payload_raw = RawValue::from_string(delivery.payload.to_string())
                .map_err(|e| HubError::validation(format!("payload: {e}"), "send JSON"))?;
            let ts = super::hub_timestamp();
            let body = envelope::body(&OutMessage {
                formatted: Some(&delivery.formatted),
                ..OutMessage::new(
                    "message",
                    &msg_id,
                    conn.address.peer(conn.opts.tier),
                    target.peer(None),
                    &ts,
                    trace,
                    &payload_raw,
                )
            });
            hub.deliver(
                &target,
                Arc::new(Entry {
                    body: body.into(),
                    priority: envelope::Priority::Normal,
                    expires_at: None,
                    received: Instant::now(),
                    seq: None,
                    row: None,
                }),
                &conn.opts.role,
            )
            .await?;
            conn.reply(
                id,
                trace,
                &json!({"type": "send_message_result", "messageId": msg_id}),
            );
            Ok(())
        }
        "list_contacts" => {
            let contacts = {
                let socs = hub.societies.lock().unwrap_or_else(|p| p.into_inner());
                socs.get(env)
                    .map(|s| s.list_contacts(&me))
                    .unwrap_or_default()
            };
            conn.reply(
                id,
                trace,
                &json!({"type": "contacts", "contacts": contacts}),
            );
            Ok(())
        }
        "is_contact_known" => {
            let other = str_field("agentId").unwrap_or_default();
            let check = {
                let socs = hub.societies.lock().unwrap_or_else(|p| p.into_inner());
                socs.get(env).map(|s| s.is_contact_known(&me, other))
            };
            let v = match check {
                Some(c) => serde_json::to_value(c).unwrap_or(Value::Null),
                None => json!({"inRegistry": false, "error": "sender_not_found"}),
            };
            conn.reply(
                id,
                trace,
                &json!({"type": "contact_check", "agentId": other, "result": v}),
            );
            Ok(())
        }
        "get_context" => {
            let ctx = {
                let socs = hub.societies.lock().unwrap_or_else(|p| p.into_inner());
                socs.get(env).and_then(|s| s.context(&me))
            };
            conn.reply(id, trace, &json!({"type": "context", "context": ctx}));
            Ok(())
        }
        _ => unreachable!("dispatched above"),
    }
}

/// A role id shortened for generated agent ids.
fn short(role: &str) -> String {
    let s: String = role
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
        .take(30)
        .collect();
    if s.chars().count() < 2 {
        format!("agent{s}")
    } else {
        s
    }
}
