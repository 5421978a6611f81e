//! The LLM layer's own overhead per streamed chunk: an OpenAI `chat.completion.chunk` SSE
//! payload parsed into a segment, turned into a RESPONSE frame, encoded and queued on a
//! session's outbox — everything the server adds between the upstream and the socket writer.
//!
//! Run: `cargo bench --bench llm_segment`. Prints per-chunk p50/p99/max over batches.

use std::sync::Arc;
use std::time::{Duration, Instant};

use museum_agent::pipeline::Deps;
use museum_agent::pipeline::reply::ReplyStream;
use museum_agent::providers::llm::Segment;
use museum_agent::providers::llm::openai::ChunkParser;
use museum_agent::request::inflight::RequestCtx;
use museum_agent::request::outbox::Outbox;
use tokio_util::sync::CancellationToken;

const BATCH: usize = 1000;
const BATCHES: usize = 300;

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let token = CancellationToken::new();
        let (outbox, mut rx) = Outbox::new(BATCH * 2, token.clone(), Duration::from_secs(10));
        outbox.set_session_id("sess_0123456789abcdef0123456789abcdef");
        let ctx = Arc::new(RequestCtx::new("req_bench".into(), token.child_token()));
        let deps = Deps {
            llm: None,
            llm_config: Default::default(),
            retriever: None,
            retrieval_k: 3,
            facts: None,
            facts_verbatim: true,
            metrics: Default::default(),
            stt: None,
            tts: None,
            tts_config: Default::default(),
            voice: museum_agent::pipeline::speech::Voice::new(&Default::default()),
        };
        let mut reply = ReplyStream::new(ctx, outbox, false, &deps);
        let chunk = r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"这件青铜鼎铸造于西周晚期，"},"logprobs":null,"finish_reason":null}]}"#;
        let mut per_chunk_ns = Vec::with_capacity(BATCHES);
        let mut parser = ChunkParser::default();
        for b in 0..BATCHES + 20 {
            let start = Instant::now();
            for _ in 0..BATCH {
                for seg in parser.push(chunk).unwrap() {
                    if let Segment::Text(t) = seg {
                        reply.push_text(&t).await;
                    }
                }
            }
            let elapsed = start.elapsed();
            while rx.try_recv().is_ok() {}
            if b >= 20 {
                per_chunk_ns.push(elapsed.as_nanos() as f64 / BATCH as f64);
            }
        }
        per_chunk_ns.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let q = |p: f64| per_chunk_ns[((per_chunk_ns.len() as f64 - 1.0) * p) as usize];
        println!(
            "llm_segment: chunk parsed -> RESPONSE frame queued, per chunk over {BATCHES} batches of {BATCH}: p50 {:.2} us, p99 {:.2} us, max {:.2} us",
            q(0.5) / 1000.0,
            q(0.99) / 1000.0,
            per_chunk_ns.last().unwrap() / 1000.0
        );
    });
}
