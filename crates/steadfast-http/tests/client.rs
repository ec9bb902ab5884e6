//! The client against a real axum server on 127.0.0.1 with injected
//! faults: recovery, the idempotency rule, Retry-After, hedging, deadline
//! propagation, streaming bodies, resets, and 1,000 calls without leaks.
//!
//! Real time (these are integration tests over real sockets); no test
//! asserts an upper bound on speed beyond "well before the deadline or the
//! minute a hanging handler would take".

mod support {
    pub mod server;
}

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use steadfast::deadline::DeadlineHeader;
use steadfast::{Backoff, Jitter, StopReason};
use steadfast_http::{Client, NotRetried};
use support::server::{ResettingServer, Server, eventually};

fn backoff(ms: u64) -> Backoff {
    Backoff::exponential()
        .initial(Duration::from_millis(ms))
        .jitter(Jitter::None)
        .build()
        .expect("valid backoff")
}

fn client(attempts: u32) -> Client {
    Client::builder()
        .attempts(attempts)
        .backoff(backoff(5))
        .build()
        .expect("valid client")
}

#[tokio::test]
async fn recovers_after_n_503s() {
    let server = Server::start().await;
    let response = client(4)
        .get(server.url("/fail/3/503"))
        .send()
        .await
        .expect("recovers");
    assert_eq!(response.status(), 200);
    let report = response.ending();
    assert_eq!(report.attempts, 4);
    assert_eq!(report.hedges(), 0);
    assert!(
        report.waited >= Duration::from_millis(5 + 10 + 20),
        "{report:?}"
    );
    assert_eq!(response.text().await.expect("body"), "ok");
    assert_eq!(server.seen.requests("/fail/3/503"), 4);
}

#[tokio::test]
async fn gives_up_after_the_attempts_with_the_last_status() {
    let server = Server::start().await;
    let err = client(3)
        .get(server.url("/fail/9/503"))
        .send()
        .await
        .expect_err("always 503");
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.status(), Some(http::StatusCode::SERVICE_UNAVAILABLE));
    assert!(
        err.to_string().contains("GET failed after 3 attempts"),
        "{err}"
    );
    assert!(err.to_string().contains("last status 503"), "{err}");
    assert_eq!(server.seen.requests("/fail/9/503"), 3);
    let body = err
        .into_response()
        .expect("the last response")
        .text()
        .await
        .expect("body");
    assert_eq!(body, "failure");
}

#[tokio::test]
async fn final_statuses_are_not_retried() {
    let server = Server::start().await;
    for status in [404, 501, 400] {
        let path = format!("/fail/1/{status}");
        let response = client(3)
            .get(server.url(&path))
            .send()
            .await
            .expect("a final response");
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(response.ending().attempts, 1);
        assert_eq!(server.seen.requests(&path), 1);
    }
}

#[tokio::test]
async fn post_is_sent_once_by_default() {
    let server = Server::start().await;
    let err = client(4)
        .post(server.url("/fail/2/503"))
        .body("pay 42")
        .send()
        .await
        .expect_err("503, not retried");
    assert_eq!(server.seen.requests("/fail/2/503"), 1);
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.not_retried(), Some(NotRetried::NotIdempotent));
    assert_eq!(err.status(), Some(http::StatusCode::SERVICE_UNAVAILABLE));
}

#[tokio::test]
async fn post_opted_in_is_retried_per_request_per_client_or_by_idempotency_key() {
    let server = Server::start().await;
    let response = client(4)
        .post(server.url("/fail/2/503"))
        .body("pay 42")
        .retry_non_idempotent()
        .send()
        .await
        .expect("retried");
    assert_eq!(response.ending().attempts, 3);
    assert_eq!(server.seen.requests("/fail/2/503"), 3);

    let response = client(4)
        .post(server.url("/fail/1/502"))
        .header("Idempotency-Key", "8e1c")
        .body("pay 42")
        .send()
        .await
        .expect("retried with an idempotency key");
    assert_eq!(response.ending().attempts, 2);

    let all = Client::builder()
        .backoff(backoff(5))
        .retry_non_idempotent(true)
        .build()
        .expect("valid client");
    let response = all
        .patch(server.url("/fail/1/500"))
        .body("x")
        .send()
        .await
        .expect("retried by the client's rule");
    assert_eq!(response.ending().attempts, 2);
    assert!(
        server
            .seen
            .methods
            .lock()
            .expect("lock")
            .iter()
            .all(|m| m != http::Method::GET)
    );
}

#[tokio::test]
async fn a_buffered_body_is_replayed_on_every_attempt() {
    let server = Server::start().await;
    // `echo` answers 200; force retries with a classifier that wants "3".
    let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = Arc::clone(&attempts);
    let client = Client::builder()
        .backoff(backoff(1))
        .classify(steadfast::classify::ClassifyFn::new(
            move |o: &steadfast_http::Outcome| {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                match o {
                    Ok(_) if n < 2 => steadfast::Verdict::Retry,
                    Ok(_) => steadfast::Verdict::Success,
                    Err(_) => steadfast::Verdict::Retry,
                }
            },
        ))
        .build()
        .expect("valid client");
    let response = client
        .put(server.url("/echo/0/x"))
        .body(Bytes::from_static(b"the same bytes"))
        .send()
        .await
        .expect("third attempt accepted");
    assert_eq!(response.ending().attempts, 3);
    assert_eq!(response.bytes().await.expect("body"), "the same bytes");
    assert_eq!(server.seen.requests("/echo/0/x"), 3);
}

#[tokio::test]
async fn a_streaming_body_is_sent_once_and_the_error_says_why() {
    let server = Server::start().await;
    let chunks = futures::stream::iter([
        Ok::<_, std::io::Error>(http_body::Frame::data(Bytes::from_static(b"part one, "))),
        Ok(http_body::Frame::data(Bytes::from_static(b"part two"))),
    ]);
    let body = reqwest::Body::wrap(http_body_util::StreamBody::new(chunks));
    let err = client(4)
        .put(server.url("/fail/3/503"))
        .body(body)
        .send()
        .await
        .expect_err("503, not retried");
    assert_eq!(server.seen.requests("/fail/3/503"), 1);
    assert_eq!(err.reason(), StopReason::NotReplayable);
    assert_eq!(err.not_retried(), Some(NotRetried::StreamingBody));
}

fn stream_of(chunks: &[&'static [u8]]) -> reqwest::Body {
    let frames: Vec<Result<http_body::Frame<Bytes>, std::io::Error>> = chunks
        .iter()
        .map(|c| Ok(http_body::Frame::data(Bytes::from_static(c))))
        .collect();
    reqwest::Body::wrap(http_body_util::StreamBody::new(futures::stream::iter(
        frames,
    )))
}

#[tokio::test]
async fn a_streaming_body_buffered_within_its_limit_is_replayed() {
    let server = Server::start().await;
    let response = client(4)
        .put(server.url("/fail-echo/2/x"))
        .body(stream_of(&[b"part one, ", b"part two"]))
        .buffer_body(1024)
        .send()
        .await
        .expect("recovers");
    assert_eq!(response.ending().attempts, 3);
    assert_eq!(response.text().await.expect("body"), "part one, part two");
    assert_eq!(server.seen.requests("/fail-echo/2/x"), 3);
}

#[tokio::test]
async fn a_streaming_body_over_its_buffer_is_sent_whole_once() {
    let server = Server::start().await;
    let err = client(4)
        .put(server.url("/fail-echo/1/x"))
        .body(stream_of(&[b"0123456789", b"abcdef"]))
        .buffer_body(8)
        .send()
        .await
        .expect_err("503, not retried");
    assert_eq!(server.seen.requests("/fail-echo/1/x"), 1);
    assert_eq!(err.reason(), StopReason::NotReplayable);
    assert_eq!(
        err.not_retried(),
        Some(NotRetried::BodyTooLarge { limit: 8 })
    );
    // The server got every byte: the buffered prefix, then the rest.
    let response = client(1)
        .put(server.url("/fail-echo/1/x"))
        .body(stream_of(&[b"0123456789", b"abcdef"]))
        .buffer_body(8)
        .send()
        .await
        .expect("the second request is answered");
    assert_eq!(response.text().await.expect("body"), "0123456789abcdef");
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured() {
    let server = Server::start().await;
    let response = client(3)
        .get(server.url("/retry-after-secs/1/1"))
        .send()
        .await
        .expect("recovers");
    assert_eq!(response.ending().attempts, 2);
    // The schedule alone would have waited 5 ms.
    assert!(
        response.ending().waited >= Duration::from_millis(990),
        "{:?}",
        response.ending()
    );
}

#[tokio::test]
async fn retry_after_as_a_date_is_honoured() {
    let server = Server::start().await;
    let response = client(3)
        .get(server.url("/retry-after-date/1/2"))
        .send()
        .await
        .expect("recovers");
    assert_eq!(response.ending().attempts, 2);
    // The date has a resolution of a second: between 1 and 2 s from now.
    assert!(
        response.ending().waited >= Duration::from_millis(900),
        "{:?}",
        response.ending()
    );
}

#[tokio::test]
async fn a_one_year_retry_after_under_a_2s_deadline_fails_at_once() {
    let server = Server::start().await;
    let client = Client::builder()
        .attempts(5)
        .deadline(Duration::from_secs(2))
        .build()
        .expect("valid client");
    let started = std::time::Instant::now();
    let err = client
        .get(server.url("/retry-after-secs/9/31536000"))
        .send()
        .await
        .expect_err("cannot wait a year");
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.ending().waited, Duration::ZERO);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.seen.requests("/retry-after-secs/9/31536000"), 1);
}

#[tokio::test]
async fn a_hint_beyond_max_delay_is_clamped_to_it() {
    let server = Server::start().await;
    let client = Client::builder()
        .attempts(3)
        .max_delay(Duration::from_millis(200))
        .deadline(Duration::from_secs(20))
        .build()
        .expect("valid client");
    let response = client
        .get(server.url("/retry-after-secs/1/31536000"))
        .send()
        .await
        .expect("waits max_delay, then succeeds");
    assert_eq!(response.ending().attempts, 2);
    assert!(response.ending().waited >= Duration::from_millis(190));
    assert!(response.ending().waited < Duration::from_secs(20));
}

#[tokio::test]
async fn hostile_retry_after_values_neither_stall_nor_panic() {
    let server = Server::start().await;
    for value in [
        "-5",
        "garbage",
        "Thu,%2001%20Jan%201970%2000:00:00%20GMT",
        "99999999999999999999999999999",
    ] {
        let client = Client::builder()
            .attempts(2)
            .backoff(backoff(5))
            .max_delay(Duration::from_millis(50))
            .deadline(Duration::from_secs(5))
            .build()
            .expect("valid client");
        let path = format!("/retry-after-secs/1/{value}");
        let response = client
            .get(server.url(&path))
            .send()
            .await
            .expect("recovers");
        assert_eq!(response.ending().attempts, 2, "{value}");
        assert!(response.ending().waited < Duration::from_secs(5), "{value}");
    }
}

#[tokio::test]
async fn the_deadline_header_decreases_across_attempts() {
    let server = Server::start().await;
    let client = Client::builder()
        .attempts(4)
        .backoff(backoff(50))
        .deadline(Duration::from_secs(5))
        .build()
        .expect("valid client");
    client
        .get(server.url("/fail/3/503"))
        .send()
        .await
        .expect("recovers");
    let sent: Vec<Duration> = server
        .seen
        .deadlines()
        .into_iter()
        .map(|v| {
            let v = v.expect("every attempt carries the header");
            DeadlineHeader::DEFAULT
                .decode(v.as_bytes())
                .expect("a valid timeout")
        })
        .collect();
    assert_eq!(sent.len(), 4);
    assert!(sent[0] <= Duration::from_secs(5));
    for pair in sent.windows(2) {
        // At least the 50, 100, 200 ms backoff apart.
        assert!(pair[1] + Duration::from_millis(50) <= pair[0], "{sent:?}");
    }
}

#[tokio::test]
async fn no_deadline_no_header() {
    let server = Server::start().await;
    client(1)
        .get(server.url("/fail/0/503"))
        .send()
        .await
        .expect("ok");
    assert_eq!(server.seen.deadlines(), vec![None]);
}

#[tokio::test]
async fn an_attempt_timeout_is_retried_and_the_hanging_request_is_cancelled() {
    let server = Server::start().await;
    let client = Client::builder()
        .attempts(2)
        .backoff(backoff(5))
        .attempt_timeout(Duration::from_millis(200))
        .build()
        .expect("valid client");
    let err = client
        .get(server.url("/hang/0/x"))
        .send()
        .await
        .expect_err("hangs");
    assert_eq!(err.attempts(), 2);
    assert!(err.timed_out());
    assert_eq!(server.seen.requests("/hang/0/x"), 2);
    assert!(eventually(|| server.seen.cancelled.load(Ordering::SeqCst) == 2).await);
}

#[tokio::test]
async fn hedged_get_returns_the_fast_copy_and_the_slow_one_is_closed() {
    let server = Server::start().await;
    let client = Client::builder()
        .hedge(2, Duration::from_millis(50))
        .build()
        .expect("valid client");
    let response = client
        .get(server.url("/hedge/0/x"))
        .send()
        .await
        .expect("the fast copy");
    assert_eq!(response.ending().attempts, 2);
    assert_eq!(response.ending().hedges(), 1);
    assert_eq!(response.text().await.expect("body"), "fast");
    assert!(
        eventually(|| server.seen.cancelled.load(Ordering::SeqCst) == 1).await,
        "the server saw the slow copy's connection closed"
    );
}

#[tokio::test]
async fn a_failed_copy_sends_the_next_one_at_once() {
    let server = Server::start().await;
    let client = Client::builder()
        .hedge(3, Duration::from_secs(30))
        .build()
        .expect("valid client");
    let started = std::time::Instant::now();
    let response = client
        .get(server.url("/fail/1/503"))
        .send()
        .await
        .expect("the second copy succeeds");
    assert_eq!(response.ending().attempts, 2);
    assert_eq!(response.ending().hedges(), 1);
    // Not after the 30 s hedging delay: at once, when the first copy failed.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn hedging_with_zero_delay_sends_all_copies_at_once() {
    let server = Server::start().await;
    let client = Client::builder()
        .hedge(3, Duration::ZERO)
        .build()
        .expect("valid client");
    let response = client
        .get(server.url("/hedge/0/x"))
        .send()
        .await
        .expect("a fast copy");
    assert_eq!(response.ending().attempts, 3);
    assert_eq!(response.text().await.expect("body"), "fast");
}

#[tokio::test]
async fn post_is_never_hedged_by_default() {
    let server = Server::start().await;
    let client = Client::builder()
        .hedge(3, Duration::ZERO)
        .build()
        .expect("valid client");
    let response = client
        .post(server.url("/fail/0/x"))
        .send()
        .await
        .expect("ok");
    assert_eq!(response.ending().attempts, 1);
    assert_eq!(server.seen.requests("/fail/0/x"), 1);
}

#[tokio::test]
async fn a_connection_reset_mid_response_is_retried() {
    let server = ResettingServer::start(2).await;
    let response = client(3)
        .get(server.url())
        .send()
        .await
        .expect("the third connection answers");
    assert_eq!(response.ending().attempts, 3);
    assert_eq!(response.text().await.expect("body"), "ok");
    assert_eq!(server.connections.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    // Bind, learn the port, close: nothing listens there.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("address")
    };
    let err = client(3)
        .get(format!("http://{addr}/x?token=secret"))
        .send()
        .await
        .expect_err("nothing listens");
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.attempts(), 3);
    let source = err.transport_error().expect("a transport error");
    assert!(source.is_connect());
    assert!(!format!("{err} {source}").contains("secret"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_calls_with_20_percent_503s_all_succeed_without_leaks() {
    let server = Server::start().await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();
    let client = Client::builder()
        .attempts(10) // 0.2^10: about one call in ten million fails
        .backoff(backoff(1))
        .max_delay(Duration::from_millis(10))
        .build()
        .expect("valid client");
    let calls = (0..1000).map(|_| {
        let client = client.clone();
        let url = server.url("/random/20/x");
        async move { client.get(url).send().await }
    });
    let mut attempts = 0;
    let mut retried = 0;
    // 50 calls in flight at a time.
    let results: Vec<_> = futures::StreamExt::collect(futures::StreamExt::buffer_unordered(
        futures::stream::iter(calls),
        50,
    ))
    .await;
    for r in results {
        let response = r.expect("every call succeeds within 10 attempts");
        assert_eq!(response.status(), 200);
        attempts += response.ending().attempts;
        retried += u32::from(response.ending().attempts > 1);
        assert_eq!(response.text().await.expect("body"), "ok");
    }
    assert_eq!(server.seen.requests("/random/20/x"), attempts);
    assert!(retried > 0, "some of 1,000 calls met a 503");
    // Connections are pooled and reused: about one per call in flight, not one per attempt.
    let accepted = server.seen.accepted.load(Ordering::SeqCst);
    assert!(
        accepted <= 100,
        "{accepted} connections for {attempts} attempts, 50 at a time"
    );
    drop(client);
    assert!(
        eventually(|| server.seen.open_connections.load(Ordering::SeqCst) == 0).await,
        "every connection closes once the client is dropped"
    );
    assert!(
        eventually(|| metrics.num_alive_tasks() <= tasks_before).await,
        "no task outlives the calls: {} alive, {tasks_before} before",
        metrics.num_alive_tasks()
    );
}

#[tokio::test]
async fn calls_can_be_spawned() {
    fn spawnable<F: std::future::Future + Send + 'static>(f: F) -> F {
        f
    }
    let server = Server::start().await;
    let call = spawnable(client(2).get(server.url("/fail/1/503")).send());
    let response = tokio::spawn(call).await.expect("joined").expect("recovers");
    assert_eq!(response.ending().attempts, 2);
}

#[tokio::test]
async fn a_shared_control_refuses_retries_once_its_tokens_run_low() {
    use steadfast::control::TokenBucket;
    let server = Server::start().await;
    // gRFC A6 throttling: retries stop while tokens <= max / 2. With 4
    // tokens, each failure costs one: after two failures no retry is allowed.
    let bucket = Arc::new(
        TokenBucket::builder()
            .max_tokens(4)
            .token_ratio(0.1)
            .build()
            .expect("valid bucket"),
    );
    let client = Client::builder()
        .attempts(5)
        .backoff(backoff(1))
        .control(bucket)
        .build()
        .expect("valid client");
    let err = client
        .get(server.url("/fail/9/503"))
        .send()
        .await
        .expect_err("throttled");
    assert_eq!(err.reason(), StopReason::Throttled);
    assert_eq!(err.attempts(), 2);
    assert!(err.refused_by().is_some());
    assert_eq!(server.seen.requests("/fail/9/503"), 2);
}

#[tokio::test]
async fn execute_runs_a_prebuilt_request_and_the_header_name_is_configurable() {
    use steadfast::deadline::HeaderFormat;
    let server = Server::start().await;
    let client = Client::builder()
        .deadline(Duration::from_secs(3))
        .deadline_header(
            DeadlineHeader::new("x-timeout-ms", HeaderFormat::Milliseconds).expect("valid name"),
        )
        .build()
        .expect("valid client");
    let request = client
        .get(server.url("/fail/0/x"))
        .build()
        .expect("a request");
    let response = client.execute(request).await.expect("ok");
    assert_eq!(response.status(), 200);
    // The configured header carries the time left, in milliseconds; the default one is not sent.
    assert_eq!(server.seen.deadlines(), vec![None]);
    let headers = server.seen.headers.lock().expect("lock");
    let ms: u64 = headers[0]
        .get("x-timeout-ms")
        .expect("the configured header")
        .to_str()
        .expect("text")
        .parse()
        .expect("milliseconds");
    assert!(ms > 0 && ms <= 3000, "{ms}");
}

#[tokio::test]
async fn no_deadline_header_when_turned_off() {
    let server = Server::start().await;
    let client = Client::builder()
        .deadline(Duration::from_secs(3))
        .no_deadline_header()
        .build()
        .expect("valid client");
    client
        .get(server.url("/fail/0/x"))
        .send()
        .await
        .expect("ok");
    assert_eq!(server.seen.deadlines(), vec![None]);
}

#[tokio::test]
async fn bad_settings_are_errors_naming_the_field() {
    let err = Client::builder()
        .attempts(0)
        .build()
        .expect_err("0 attempts");
    assert!(err.to_string().contains("max_attempts"), "{err}");
    let err = Client::builder()
        .hedge(0, Duration::ZERO)
        .build()
        .expect_err("0 copies");
    assert!(err.to_string().contains("max_attempts"), "{err}");
}

/// #25: a rate limit shared by every clone of the client: calls past the
/// quota are refused before anything is sent, with the limit's name and
/// the wait; a waiting client is admitted at its turn.
#[tokio::test]
async fn a_rate_limit_refuses_past_its_quota_and_nothing_is_sent() {
    use steadfast::rate::{Quota, RateLimit};
    let server = Server::start().await;
    let quota = RateLimit::builder()
        .name("maps api")
        .quota(Quota::per_minute(2).expect("valid"))
        .build()
        .expect("valid");
    let client = steadfast_http::Client::builder()
        .rate_limit(quota.clone())
        .build()
        .expect("valid");
    let url = server.url("/echo/0/_");
    let copy = client.clone();
    assert!(client.get(&url).send().await.is_ok());
    assert!(copy.get(&url).send().await.is_ok());
    let err = copy.get(&url).send().await.expect_err("over the quota");
    assert_eq!((err.reason(), err.attempts()), (StopReason::Throttled, 0));
    assert_eq!(err.refused_by(), Some("maps api"));
    let wait = err.retry_after().expect("the wait");
    // Padded by the system clock's tick.
    let tick = {
        use steadfast::clock::Clock;
        steadfast::clock::SystemClock.tick_lag()
    };
    assert!(
        wait > Duration::from_secs(29) && wait <= Duration::from_secs(30) + tick,
        "{wait:?}"
    );
    assert!(
        err.to_string()
            .starts_with("GET failed after 0 attempts in 0ms (refused by maps api, for "),
        "{err}"
    );
    assert_eq!(
        server.seen.requests("/echo/0/_"),
        2,
        "the refused call was not sent"
    );

    // Waiting for the turn: admitted, in order.
    let quick = RateLimit::builder()
        .quota(
            Quota::per_second(20)
                .expect("valid")
                .with_burst(1)
                .expect("valid"),
        )
        .build()
        .expect("valid");
    let waiting = steadfast_http::Client::builder()
        .rate_limit_waiting(quick, Duration::from_secs(1))
        .build()
        .expect("valid");
    let url = server.url("/echo/1/_");
    let (a, b, c) = tokio::join!(
        waiting.get(&url).send(),
        waiting.get(&url).send(),
        waiting.get(&url).send()
    );
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(server.seen.requests("/echo/1/_"), 3);
}
