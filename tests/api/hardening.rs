//! Transport hardening: wss with an in-process TLS terminator, the Origin allow-list, slow-loris
//! header deadlines, per-address connection caps.

use std::sync::Arc;
use std::time::Duration;

use futures_util::SinkExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::*;

#[tokio::test]
async fn wss_with_a_self_signed_certificate() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let (c2, k2) = (cert_path.clone(), key_path.clone());
    let app = spawn_app_with(move |c| {
        c.server.tls_cert = c2;
        c.server.tls_key = k2;
    })
    .await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let url = format!("wss://localhost:{}/ws/agent/stream", app.addr.port());
    let (mut ws, _) = tokio_tungstenite::client_async(url, tls).await.unwrap();
    ws.send(Message::Text(
        frame("HEALTH_CHECK", "", json!({})).to_string().into(),
    ))
    .await
    .unwrap();
    let reply = loop {
        match futures_util::StreamExt::next(&mut ws)
            .await
            .unwrap()
            .unwrap()
        {
            Message::Text(t) => break t.to_string(),
            _ => continue,
        }
    };
    assert!(reply.contains("HEALTH_CHECK_ACK"), "{reply}");

    // Plain HTTP to the TLS port gets nowhere.
    let mut plain = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(RECV_TIMEOUT, plain.read_to_end(&mut buf)).await;
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
}

#[tokio::test]
async fn cross_site_origins_are_refused() {
    let app =
        spawn_app_with(|c| c.server.allowed_origins = vec!["https://kiosk.museum.example".into()])
            .await;
    let attempt = |origin: Option<&'static str>| {
        let url = app.ws_url();
        async move {
            let mut req = url.into_client_request().unwrap();
            if let Some(o) = origin {
                req.headers_mut().insert("Origin", o.parse().unwrap());
            }
            tokio_tungstenite::connect_async(req)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    let err = attempt(Some("https://evil.example")).await.unwrap_err();
    assert!(err.contains("403"), "{err}");
    assert!(attempt(Some("https://kiosk.museum.example")).await.is_ok());
    assert!(attempt(None).await.is_ok(), "apps send no Origin");
    let same = format!("http://{}", app.addr);
    let same: &'static str = Box::leak(same.into_boxed_str());
    assert!(attempt(Some(same)).await.is_ok(), "the server's own page");
}

#[tokio::test]
async fn slow_loris_headers_are_cut_off() {
    let app = spawn_app_with(|c| c.limits.header_timeout_seconds = 0.5).await;
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    s.write_all(b"GET /ws/agent/stream HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // Never finish the headers: the server must close the connection by itself.
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(RECV_TIMEOUT, s.read(&mut buf))
        .await
        .expect("the server closes a connection that never finishes its headers")
        .unwrap_or(0);
    // hyper may answer 408 before closing; either way the connection ends.
    if n > 0 {
        assert!(String::from_utf8_lossy(&buf[..n]).contains("408"));
    }
    // Healthy clients are unaffected.
    app.client().await.sync().await;
}

#[tokio::test]
async fn connections_per_address_are_capped() {
    let app = spawn_app_with(|c| c.limits.max_connections_per_address = 2).await;
    let a = app.client().await;
    let b = app.client().await;
    let third = tokio_tungstenite::connect_async(app.ws_url()).await;
    assert!(
        third.is_err(),
        "a third connection from the same address is refused"
    );
    drop(a);
    // Once one closes, a new one is accepted again (the slot is released when the server
    // notices the close, so retry for a bounded time).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if tokio_tungstenite::connect_async(app.ws_url()).await.is_ok() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "slot never released"
        );
        tokio::task::yield_now().await;
    }
    drop(b);
}
