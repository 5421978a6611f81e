//! The accept loop: TCP (optionally TLS, terminated in-process with rustls) → HTTP/1.1 with
//! upgrades → the axum router. Written out instead of `axum::serve` for what a public kiosk
//! server needs and `axum::serve` does not offer:
//! - a deadline for a client to send its request headers (slow-loris) and for the TLS handshake;
//! - a cap on open connections per peer address;
//! - `wss://` from configured certificate and key files.
//!
//! On shutdown the loop stops accepting and plain HTTP connections are closed gracefully;
//! upgraded WebSockets are drained by their sessions (see `lib::run`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::app::AppState;

/// Loads the certificate chain and private key (PEM files) into a TLS acceptor.
pub fn tls_acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| anyhow::anyhow!("reading certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("parsing certificate {}: {e}", cert.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", cert.display());
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| anyhow::anyhow!("reading private key {}: {e}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Open connections per peer address.
#[derive(Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

/// One unit of a peer address's connection count. The accept task holds it, and a WebSocket
/// upgraded from the connection holds a clone (it outlives the HTTP connection task).
pub struct AddressSlot(Arc<PerAddress>, IpAddr);

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut m = self.0.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

impl PerAddress {
    fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<AddressSlot> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(AddressSlot(self.clone(), ip))
    }
}

/// Accepts connections until `stop` is cancelled.
pub async fn accept_loop(
    listener: TcpListener,
    router: Router,
    app: Arc<AppState>,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
) {
    let per_address = Arc::new(PerAddress::default());
    let limits = app.config.limits.clone();
    let header_timeout = crate::config::secs(limits.header_timeout_seconds);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = per_address.take(peer.ip(), limits.max_connections_per_address) else {
            tracing::warn!(%peer, max = limits.max_connections_per_address, "connection refused: too many from this address");
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        let stop = stop.clone();
        let hard = app.hard_stop.clone();
        tokio::spawn(async move {
            let slot = Arc::new(slot);
            match tls {
                None => serve_conn(tcp, peer, slot, router, header_timeout, stop, hard).await,
                Some(acceptor) => {
                    match tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            serve_conn(stream, peer, slot, router, header_timeout, stop, hard).await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

async fn serve_conn<S>(
    stream: S,
    peer: SocketAddr,
    slot: Arc<AddressSlot>,
    router: Router,
    header_timeout: Duration,
    stop: CancellationToken,
    hard: CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = router.map_request(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        req.extensions_mut().insert(slot.clone());
        req
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc))
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
            }
        }
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = hard.cancelled() => {}
            }
        }
    }
}
