//! What a session hands each request task, below both `session` and `pipeline`: the table of
//! requests in flight (each with its own child `CancellationToken`, and the one place that
//! decides who ends a request), the bounded outbox every frame goes through to the socket's one
//! writer task, and the session attributes a request runs with.
//!
//! `session` creates these and `pipeline` uses them; neither needs the other to do so.

pub mod attributes;
pub mod inflight;
pub mod outbox;
pub mod replay;
