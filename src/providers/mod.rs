//! Upstream providers, one trait per kind; one module per vendor wire format.

pub mod llm;
pub mod srs;
pub mod stt;
pub mod tts;

/// A reqwest client builder for upstream calls. TLS is rustls with the `ring` provider
/// (installed here once, process-wide; reqwest is built without a default provider).
pub fn http_client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().user_agent(concat!("museum-agent/", env!("CARGO_PKG_VERSION")))
}
