//! The one integration test binary: a real server on port 0, a temporary SQLite file, local fake
//! upstreams, real WebSocket clients.

mod support;

mod bad_frames;
mod cli;
mod exhibits;
mod grounding;
mod hardening;
mod http;
mod hub;
mod hub_nats;
mod interrupt;
mod llm;
mod load;
mod register;
mod requests;
mod retrieval;
mod session_timers;
mod shutdown;
mod voice;
