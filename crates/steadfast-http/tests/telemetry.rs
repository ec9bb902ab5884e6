//! The per-attempt `tracing` events, captured from real calls: one per
//! attempt, with the method, redacted URL, attempt, status, wait and
//! Retry-After; never a header value, query value or userinfo.

mod support {
    pub mod server;
}

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast_http::Client;
use support::server::Server;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn one_event_per_attempt_with_no_secrets() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = Server::start().await;
    let client = Client::builder()
        .attempts(3)
        .max_delay(Duration::from_millis(20))
        .build()
        .expect("valid client");
    let url = format!(
        "http://user:hunter2@{}/retry-after-secs/2/60?token=s3cret&page=2",
        server.addr
    );
    let response = client
        .get(url)
        .header("authorization", "Bearer AUTHSECRET")
        .header("cookie", "session=COOKIESECRET")
        .header("proxy-authorization", "Basic PROXYSECRET")
        .send()
        .await
        .expect("recovers on the third attempt");
    assert_eq!(response.ending().attempts, 3);

    let text = String::from_utf8(capture.0.lock().expect("lock").clone()).expect("utf-8");
    for secret in [
        "hunter2",
        "s3cret",
        "AUTHSECRET",
        "COOKIESECRET",
        "PROXYSECRET",
        "user:",
    ] {
        assert!(!text.contains(secret), "{secret} leaked:\n{text}");
    }
    let attempts: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("steadfast-http: attempt"))
        .collect();
    assert_eq!(attempts.len(), 3, "{text}");
    assert!(attempts[0].contains("attempt failed"));
    assert!(attempts[0].contains("status=503"));
    assert!(attempts[0].contains("retry_after_ms=60000"));
    assert!(attempts[0].contains("retry_after_clamped=true"));
    assert!(
        attempts[0].contains("token=REDACTED&page=REDACTED"),
        "{}",
        attempts[0]
    );
    assert!(attempts[0].contains("method=GET"));
    assert!(attempts[1].contains("attempt=2"));
    assert!(attempts[2].contains("attempt succeeded"));
    assert!(attempts[2].contains("status=200"));
}
