//! Upstream providers, one trait per kind; one module per vendor wire format. Retrieval, the
//! fourth upstream kind, has its own top-level module (`crate::retrieval`), which these never
//! need except for the [`Hit`](crate::retrieval::Hit)s an LLM request carries.

pub mod llm;
pub mod stt;
pub mod tts;
