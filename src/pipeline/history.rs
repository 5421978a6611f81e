//! A session's conversation history, bounded, oldest dropped first. Pure.

use std::collections::VecDeque;

use crate::providers::llm::{ChatMessage, Role};

/// Marker appended to a reply the visitor cut off, so the model knows what they actually heard.
pub const CUT_OFF_MARKER: &str = " [cut off: the visitor interrupted the reply here]";

/// Content given to the model for a client function call whose result was never reported.
pub const NO_RESULT: &str =
    "{\"status\":\"sent to the visitor's device for execution; no result was reported\"}";

#[derive(Debug, Clone)]
pub struct History {
    messages: VecDeque<ChatMessage>,
    max: usize,
}

impl History {
    /// An empty history, shared by a session and its request tasks.
    pub fn shared(max: usize) -> std::sync::Arc<std::sync::Mutex<History>> {
        std::sync::Arc::new(std::sync::Mutex::new(History::new(max)))
    }

    pub fn new(max: usize) -> Self {
        History {
            messages: VecDeque::new(),
            max,
        }
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages as kept, oldest first (a session snapshot for another node, `src/cluster`).
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = &ChatMessage> {
        self.messages.iter()
    }

    /// Appends one finished turn (its messages stay together) and trims the oldest.
    pub fn push_turn(&mut self, turn: Vec<ChatMessage>) {
        self.messages.extend(turn);
        while self.messages.len() > self.max {
            self.messages.pop_front();
        }
        // Never start on a tool result whose call was trimmed away.
        while self.messages.front().is_some_and(|m| m.role == Role::Tool) {
            self.messages.pop_front();
        }
    }

    /// The messages to send, with a placeholder result after every client call that got none
    /// (vendors refuse an assistant tool call that is not followed by its result).
    pub fn for_prompt(&self) -> Vec<ChatMessage> {
        self.for_prompt_with(&[])
    }

    /// [`History::for_prompt`] with the current turn's messages appended first, so a tool
    /// result arriving in this turn answers its call instead of getting a placeholder.
    pub fn for_prompt_with(&self, current: &[ChatMessage]) -> Vec<ChatMessage> {
        let msgs: Vec<&ChatMessage> = self.messages.iter().chain(current.iter()).collect();
        let mut out = Vec::with_capacity(msgs.len() + 2);
        for (i, m) in msgs.iter().enumerate() {
            out.push((*m).clone());
            if m.role == Role::Assistant && !m.tool_calls.is_empty() {
                for call in &m.tool_calls {
                    let answered = msgs[i + 1..]
                        .iter()
                        .take_while(|n| n.role == Role::Tool)
                        .any(|n| n.tool_call_id.as_deref() == Some(call.id.as_str()));
                    let answered_later = msgs[i + 1..].iter().any(|n| {
                        n.role == Role::Tool && n.tool_call_id.as_deref() == Some(call.id.as_str())
                    });
                    if !answered && !answered_later {
                        let mut t = ChatMessage::new(Role::Tool, NO_RESULT);
                        t.tool_call_id = Some(call.id.clone());
                        out.push(t);
                    }
                }
            }
        }
        // Tool results reported later than other messages are moved right after their call.
        reorder_tool_results(out)
    }

    /// Whether `call_id` is a call the model made in this history.
    pub fn has_call(&self, call_id: &str) -> bool {
        self.messages
            .iter()
            .any(|m| m.tool_calls.iter().any(|c| c.id == call_id))
    }
}

fn reorder_tool_results(msgs: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let (tools, rest): (Vec<_>, Vec<_>) = msgs.into_iter().partition(|m| m.role == Role::Tool);
    let mut tools: Vec<Option<ChatMessage>> = tools.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(rest.len() + tools.len());
    for m in rest {
        let ids: Vec<String> = m.tool_calls.iter().map(|c| c.id.clone()).collect();
        out.push(m);
        for id in ids {
            if let Some(slot) = tools
                .iter_mut()
                .find(|t| t.as_ref().and_then(|t| t.tool_call_id.as_deref()) == Some(id.as_str()))
            {
                out.push(slot.take().expect("found above"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::llm::ToolCall;
    use serde_json::json;

    fn call(id: &str) -> ChatMessage {
        let mut m = ChatMessage::new(Role::Assistant, "");
        m.tool_calls.push(ToolCall {
            id: id.into(),
            name: "show".into(),
            arguments: Ok(json!({})),
        });
        m
    }

    fn result(id: &str) -> ChatMessage {
        let mut m = ChatMessage::new(Role::Tool, "done");
        m.tool_call_id = Some(id.into());
        m
    }

    #[test]
    fn bounded_oldest_first() {
        let mut h = History::new(3);
        for i in 0..3 {
            h.push_turn(vec![
                ChatMessage::new(Role::User, format!("q{i}")),
                ChatMessage::new(Role::Assistant, format!("a{i}")),
            ]);
        }
        let p = h.for_prompt();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].content, "a1");
        assert_eq!(p[2].content, "a2");
    }

    #[test]
    fn unanswered_calls_get_a_placeholder_and_late_results_move_up() {
        let mut h = History::new(20);
        h.push_turn(vec![ChatMessage::new(Role::User, "show it"), call("c1")]);
        let p = h.for_prompt();
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].role, Role::Tool);
        assert_eq!(p[2].content, NO_RESULT);
        // Another turn happens, then the result arrives.
        h.push_turn(vec![
            ChatMessage::new(Role::User, "and?"),
            ChatMessage::new(Role::Assistant, "ok"),
        ]);
        h.push_turn(vec![result("c1")]);
        let p = h.for_prompt();
        assert_eq!(p[2].content, "done", "{p:?}");
        assert_eq!(p.len(), 5);
        assert!(h.has_call("c1"));
    }

    #[test]
    fn trimming_never_leaves_an_orphan_tool_result_first() {
        let mut h = History::new(2);
        h.push_turn(vec![call("c1"), result("c1")]);
        h.push_turn(vec![ChatMessage::new(Role::User, "x")]);
        let p = h.for_prompt();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].role, Role::User);
    }
}
