//! Requests in flight on one session, each with its own child [`CancellationToken`].
//!
//! The map is the single arbiter of how a request ends: whoever removes its entry first (the
//! pipeline finishing normally, an ERROR, or an INTERRUPT) owns the final frame. Because removal
//! happens under one lock, a request can never get both a normal `-1` frame and an interrupted
//! one. Shared between the session task and its pipeline tasks; a std mutex is right here
//! (held for a map operation only, never across an await).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// One request in flight.
#[derive(Debug)]
pub struct RequestCtx {
    pub request_id: String,
    /// Cancelled by INTERRUPT, by the session ending, or by the server stopping.
    pub token: CancellationToken,
    /// Bytes of reply text actually written to the socket (kept by the writer task), so an
    /// interrupted reply enters the history only as far as the visitor saw it.
    delivered_text: AtomicUsize,
    /// Frames with neither seq (transcript, function_call) queued so far: the rank of the next
    /// one, which is how a resuming client's `last_seen` names them (`request::replay`).
    unsequenced: AtomicU32,
}

impl RequestCtx {
    pub fn new(request_id: String, token: CancellationToken) -> Self {
        RequestCtx {
            request_id,
            token,
            delivered_text: AtomicUsize::new(0),
            unsequenced: AtomicU32::new(0),
        }
    }

    /// The rank of this request's next frame that carries neither seq.
    pub fn next_unsequenced(&self) -> u32 {
        self.unsequenced.fetch_add(1, Ordering::Relaxed)
    }

    pub fn add_delivered(&self, bytes: usize) {
        self.delivered_text.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn delivered(&self) -> usize {
        self.delivered_text.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertError {
    /// The id is already in flight.
    Duplicate,
    /// The session has `max` requests in flight already.
    Busy { max: usize },
}

/// One allocation per session (every session has an `InFlight`, most of them idle).
#[derive(Clone, Default)]
pub struct InFlight(Arc<Shared>);

#[derive(Default)]
struct Shared {
    map: Mutex<HashMap<String, Arc<RequestCtx>>>,
    /// Notified whenever an entry is removed (draining waits on it).
    removed: Notify,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<RequestCtx>>> {
        self.0.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a request with a child token of `parent`.
    pub fn insert(
        &self,
        request_id: &str,
        parent: &CancellationToken,
        max: usize,
    ) -> Result<Arc<RequestCtx>, InsertError> {
        let mut map = self.lock();
        if map.contains_key(request_id) {
            return Err(InsertError::Duplicate);
        }
        if map.len() >= max {
            return Err(InsertError::Busy { max });
        }
        let ctx = Arc::new(RequestCtx::new(
            request_id.to_string(),
            parent.child_token(),
        ));
        map.insert(request_id.to_string(), ctx.clone());
        Ok(ctx)
    }

    pub fn contains(&self, request_id: &str) -> bool {
        self.lock().contains_key(request_id)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Claims the end of `ctx`'s request. True when the caller now owns the final frame; false
    /// when someone else (an INTERRUPT) already ended it.
    pub fn finish(&self, ctx: &Arc<RequestCtx>) -> bool {
        let mut map = self.lock();
        let ours = map
            .get(&ctx.request_id)
            .is_some_and(|c| Arc::ptr_eq(c, ctx));
        if ours {
            map.remove(&ctx.request_id);
            drop(map);
            self.0.removed.notify_one();
        }
        ours
    }

    /// Removes and cancels one request (INTERRUPT with an id).
    pub fn cancel(&self, request_id: &str) -> Option<Arc<RequestCtx>> {
        let ctx = self.lock().remove(request_id);
        if let Some(c) = &ctx {
            c.token.cancel();
            self.0.removed.notify_one();
        }
        ctx
    }

    /// Removes and cancels every request (INTERRUPT without an id), oldest id order not kept:
    /// ids are returned sorted so replies are deterministic.
    pub fn cancel_all(&self) -> Vec<Arc<RequestCtx>> {
        let mut all: Vec<_> = self.lock().drain().map(|(_, c)| c).collect();
        all.sort_by(|a, b| a.request_id.cmp(&b.request_id));
        for c in &all {
            c.token.cancel();
        }
        if !all.is_empty() {
            self.0.removed.notify_one();
        }
        all
    }

    /// Removes requests whose token was cancelled without being removed (a reply stopped because
    /// it outgrew the replay buffer while its client was away).
    pub fn remove_cancelled(&self) {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, c| !c.token.is_cancelled());
        let removed = map.len() != before;
        drop(map);
        if removed {
            self.0.removed.notify_one();
        }
    }

    /// Resolves after the next removal.
    pub async fn removed(&self) {
        self.0.removed.notified().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_side_ends_a_request() {
        let f = InFlight::default();
        let root = CancellationToken::new();
        let a = f.insert("a", &root, 2).unwrap();
        assert_eq!(f.insert("a", &root, 2).unwrap_err(), InsertError::Duplicate);
        let _b = f.insert("b", &root, 2).unwrap();
        assert_eq!(
            f.insert("c", &root, 2).unwrap_err(),
            InsertError::Busy { max: 2 }
        );
        // Interrupt wins: the pipeline's finish then fails.
        assert!(f.cancel("a").is_some());
        assert!(a.token.is_cancelled());
        assert!(!f.finish(&a));
        // A new request reusing the id is not ended by the old one's finish.
        let a2 = f.insert("a", &root, 2).unwrap();
        assert!(!f.finish(&a));
        assert!(f.finish(&a2));
        assert!(f.cancel("a").is_none());
        let all = f.cancel_all();
        assert_eq!(all.len(), 1);
        assert!(f.is_empty());
    }

    #[test]
    fn parent_cancel_reaches_children() {
        let f = InFlight::default();
        let root = CancellationToken::new();
        let a = f.insert("a", &root, 1).unwrap();
        root.cancel();
        assert!(a.token.is_cancelled());
    }
}
