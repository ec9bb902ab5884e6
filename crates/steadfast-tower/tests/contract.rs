//! The tower contract, as a matrix every layer runs: readiness before every
//! call (tower-test's `Mock` panics on a call it did not say ready for),
//! readiness errors, a service that is ready once then pending
//! (backpressure passes through), and clones that are ready on their own.
//! Then what only the replaying layers do: readiness before every retry and
//! hedge copy, replay refusal, and dropping a call mid-backoff or mid-hedge.
//! All on tokio's paused clock.

use std::time::Duration;

use http::Request;
use steadfast::backoff::Backoff;
use steadfast::{HedgePolicy, Jitter, RetryPolicy, StopReason, Verdict};
use steadfast_tower::deadline::DeadlineLayer;
use steadfast_tower::replay::{HttpReplay, ReplayBody};
use steadfast_tower::{
    ControlLayer, HedgeLayer, RetryLayer, ServerDeadlineLayer, SetDeadlineHeaderLayer,
};
use tokio_test::{assert_pending, assert_ready_err, assert_ready_ok};
use tower::{Layer, Service, ServiceExt};
use tower_test::mock;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn retry_policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(
            Backoff::constant(ms(100))
                .jitter(Jitter::None)
                .build()
                .expect("valid backoff"),
        )
        .build()
        .expect("valid policy")
}

fn hedge_policy(copies: u32) -> HedgePolicy {
    HedgePolicy::builder(ms(10))
        .max_attempts(copies)
        .build()
        .expect("valid policy")
}

fn request(body: &str) -> Request<String> {
    Request::put("http://service.test/users/7")
        .body(body.to_owned())
        .expect("valid request")
}

/// The contract every layer keeps, for a layer over a `Mock<$inner, u16>`
/// that takes `Request<String>`s.
macro_rules! contract {
    ($name:ident, $inner:ty, $layer:expr) => {
        mod $name {
            use super::*;

            macro_rules! service {
                () => {{
                    let (mock, handle) = mock::pair::<$inner, u16>();
                    (mock::Spawn::new($layer.layer(mock)), handle)
                }};
            }

            #[tokio::test(start_paused = true)]
            async fn backpressure_passes_through_and_a_ready_service_is_called() {
                let (mut service, mut handle) = service!();
                handle.allow(0);
                assert_pending!(service.poll_ready());
                handle.allow(1);
                assert_ready_ok!(service.poll_ready());
                let call = tokio::spawn(service.call(request("hello")));
                let (got, reply) = handle
                    .next_request()
                    .await
                    .expect("the call reaches the service");
                assert_eq!(got.uri().path(), "/users/7");
                reply.send_response(200);
                assert_eq!(call.await.expect("no panic").ok(), Some(200));
            }

            #[tokio::test(start_paused = true)]
            async fn a_readiness_error_is_reported_by_poll_ready() {
                let (mut service, mut handle) = service!();
                handle.send_error("overloaded");
                assert_ready_err!(service.poll_ready());
            }

            #[tokio::test(start_paused = true)]
            async fn ready_once_then_pending() {
                let (mut service, mut handle) = service!();
                handle.allow(1);
                assert_ready_ok!(service.poll_ready());
                let first = tokio::spawn(service.call(request("one")));
                let (_, reply) = handle.next_request().await.expect("first call");
                // The allowance is spent: the next call must wait.
                assert_pending!(service.poll_ready());
                reply.send_response(200);
                assert_eq!(first.await.expect("no panic").ok(), Some(200));
                assert_pending!(service.poll_ready());
                handle.allow(1);
                assert_ready_ok!(service.poll_ready());
            }

            #[tokio::test(start_paused = true)]
            async fn clones_are_readied_on_their_own() {
                let (service, mut handle) = service!();
                let mut a = service.clone();
                let mut b = service;
                handle.allow(2);
                assert_ready_ok!(a.poll_ready());
                assert_ready_ok!(b.poll_ready());
                let ca = tokio::spawn(a.call(request("a")));
                let cb = tokio::spawn(b.call(request("b")));
                for _ in 0..2 {
                    let (_, reply) = handle.next_request().await.expect("a call");
                    reply.send_response(204);
                }
                assert_eq!(ca.await.expect("no panic").ok(), Some(204));
                assert_eq!(cb.await.expect("no panic").ok(), Some(204));
            }
        }
    };
}

type Buffered = Request<ReplayBody<String>>;

contract!(
    retry,
    Buffered,
    RetryLayer::new(retry_policy(3)).replay(HttpReplay::default())
);
contract!(
    hedge,
    Buffered,
    HedgeLayer::new(hedge_policy(2)).replay(HttpReplay::default())
);
contract!(
    deadline,
    Request<String>,
    DeadlineLayer::new(Duration::from_secs(5))
);
contract!(server_deadline, Request<String>, ServerDeadlineLayer::new());
contract!(
    set_deadline_header,
    Request<String>,
    SetDeadlineHeaderLayer::new(steadfast::deadline::DeadlineHeader::GRPC).expect("valid header")
);
contract!(
    control,
    Request<String>,
    ControlLayer::new(std::sync::Arc::new(
        steadfast::control::TokenBucket::builder()
            .max_tokens(10)
            .token_ratio(0.1)
            .build()
            .expect("valid bucket")
    ))
);

/// Every retry waits until its own clone of the service is ready: the
/// second attempt is not sent while the service is not ready, however long
/// the backoff was.
#[tokio::test(start_paused = true)]
async fn every_retry_waits_for_readiness() {
    let (mock, mut handle) = mock::pair::<u32, u16>();
    let service = RetryLayer::new(retry_policy(3)).layer(mock);
    handle.allow(1);
    let start = tokio::time::Instant::now();
    let call = tokio::spawn(service.oneshot(7));
    let (n, reply) = handle.next_request().await.expect("attempt 1");
    assert_eq!(n, 7);
    reply.send_error("connection reset");
    // The backoff (100 ms) passes; the service is still not ready.
    tokio::time::sleep(ms(500)).await;
    assert_pending!(tokio_test::task::spawn(handle.next_request()).poll());
    handle.allow(1);
    let (n, reply) = handle.next_request().await.expect("attempt 2");
    assert_eq!((n, start.elapsed()), (7, ms(500)));
    reply.send_response(200);
    assert_eq!(call.await.expect("no panic").expect("success"), 200);
}

/// A readiness error of a retry's clone is that attempt's outcome: it is
/// classified (here: retried) like any other error.
#[tokio::test(start_paused = true)]
async fn a_readiness_error_during_retries_is_an_attempt_outcome() {
    let (mock, mut handle) = mock::pair::<u32, u16>();
    let service = RetryLayer::new(retry_policy(3)).layer(mock);
    handle.allow(1);
    let call = tokio::spawn(service.oneshot(1));
    let (_, reply) = handle.next_request().await.expect("attempt 1");
    reply.send_error("connection reset");
    handle.send_error("not ready: reconnecting"); // attempt 2 fails in poll_ready
    tokio::time::sleep(ms(150)).await;
    handle.allow(1);
    let (_, reply) = handle.next_request().await.expect("attempt 3");
    reply.send_response(200);
    assert_eq!(call.await.expect("no panic").expect("success"), 200);
}

/// The layer's own poll_ready error ends the call before any attempt.
#[tokio::test(start_paused = true)]
async fn a_readiness_error_before_the_first_attempt_is_not_an_attempt() {
    let (mock, mut handle) = mock::pair::<u32, u16>();
    let mut service = RetryLayer::new(retry_policy(3)).layer(mock);
    handle.send_error("no connection");
    let err = service.ready().await.expect_err("not ready");
    assert_eq!((err.reason(), err.attempts()), (StopReason::Permanent, 0));
    assert_eq!(
        err.last_error().map(ToString::to_string).as_deref(),
        Some("no connection")
    );
}

/// The exact attempt sequence: attempts count the first, waits follow the
/// schedule, and the last error comes back with the facts.
#[tokio::test(start_paused = true)]
async fn the_attempt_sequence_follows_the_policy() {
    let (mock, mut handle) = mock::pair::<u32, u16>();
    let service = RetryLayer::new(retry_policy(3)).name("users").layer(mock);
    handle.allow(10);
    let start = tokio::time::Instant::now();
    let call = tokio::spawn(service.oneshot(3));
    let mut at = Vec::new();
    for _ in 0..3 {
        let (_, reply) = handle.next_request().await.expect("an attempt");
        at.push(start.elapsed());
        reply.send_error("503");
    }
    let err = call
        .await
        .expect("no panic")
        .expect_err("every attempt failed");
    assert_eq!(at, [ms(0), ms(100), ms(200)]);
    assert_eq!((err.reason(), err.attempts()), (StopReason::Exhausted, 3));
    assert_eq!(err.name(), Some("users"));
    // No fourth attempt: the service is gone with the call.
    assert!(matches!(
        tokio_test::task::spawn(handle.next_request()).poll(),
        std::task::Poll::Ready(None)
    ));
}

/// A lean call (no deadline anywhere) makes its first attempt through the
/// service's own future; under an ambient deadline the same layer runs the
/// whole call in the core, which ends an attempt that outlives it.
#[tokio::test(start_paused = true)]
async fn an_ambient_deadline_bounds_even_the_first_attempt() {
    let (mock, mut handle) = mock::pair::<u32, u16>();
    let service = RetryLayer::new(retry_policy(3)).layer(mock);
    handle.allow(10);
    let start = tokio::time::Instant::now();
    let deadline = steadfast::Deadline::after(start.into_std(), ms(250));
    let call = tokio::spawn(steadfast::deadline::scope_async(
        deadline,
        service.clone().oneshot(1),
    ));
    // The first attempt hangs; the deadline, not the service, ends it.
    let (_, _hung) = handle.next_request().await.expect("attempt 1");
    let err = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the deadline ends the call, not the test's timeout")
        .expect("no panic")
        .expect_err("past the deadline");
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(start.elapsed(), ms(250));

    // Without one, the lean path: a failed first attempt is retried by the
    // core after the backoff, and the call succeeds.
    let call = tokio::spawn(service.oneshot(2));
    let (_, reply) = handle.next_request().await.expect("attempt 1");
    reply.send_error("503");
    let (_, reply) = handle.next_request().await.expect("attempt 2");
    reply.send_response(200);
    assert_eq!(call.await.expect("no panic").expect("success"), 200);
}

/// A body over the replay limit is sent once and never retried; the error
/// says why.
#[tokio::test(start_paused = true)]
async fn a_request_that_cannot_be_replayed_is_sent_once() {
    let (mock, mut handle) = mock::pair::<Buffered, u16>();
    let service = RetryLayer::new(retry_policy(3))
        .replay(HttpReplay::new(4))
        .layer(mock);
    handle.allow(10);
    let call = tokio::spawn(service.clone().oneshot(request("more than four bytes")));
    let (got, reply) = handle.next_request().await.expect("the one attempt");
    assert!(!got.body().is_replayable());
    reply.send_error("connection reset");
    let err = call.await.expect("no panic").expect_err("failed");
    assert_eq!(
        (err.reason(), err.attempts()),
        (StopReason::NotReplayable, 1)
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        tokio_test::task::spawn(handle.next_request())
            .poll()
            .is_pending()
    );

    // A body within the limit is retried, with the same bytes each time.
    let call = tokio::spawn(service.oneshot(request("ok")));
    let (first, reply) = handle.next_request().await.expect("attempt 1");
    assert!(first.body().is_replayable());
    reply.send_error("connection reset");
    let (second, reply) = handle.next_request().await.expect("attempt 2");
    reply.send_response(200);
    use http_body_util::BodyExt;
    assert_eq!(
        second.into_body().collect().await.expect("body").to_bytes(),
        "ok"
    );
    assert_eq!(call.await.expect("no panic").expect("success"), 200);
}

/// A response the classifier would retry, of a request that cannot be
/// replayed, is returned as it is after its one attempt.
#[tokio::test(start_paused = true)]
async fn a_retryable_response_of_a_request_sent_once_is_returned() {
    let (mock, mut handle) = mock::pair::<Buffered, u16>();
    let service = RetryLayer::new(retry_policy(3))
        .replay(HttpReplay::new(0))
        .classify(|r: &Result<u16, BoxError>| match r {
            Ok(503) | Err(_) => Verdict::Retry,
            Ok(_) => Verdict::Success,
        })
        .layer(mock);
    handle.allow(10);
    let call = tokio::spawn(service.oneshot(request("x")));
    let (_, reply) = handle.next_request().await.expect("the one attempt");
    reply.send_response(503);
    assert_eq!(call.await.expect("no panic").expect("a response"), 503);
}

/// A clone of `mock`, readied (`run` takes a service whose `poll_ready`
/// said yes).
async fn readied(mock: &mock::Mock<Buffered, u16>) -> mock::Mock<Buffered, u16> {
    let mut service = mock.clone();
    std::future::poll_fn(|cx| service.poll_ready(cx))
        .await
        .expect("ready");
    service
}

/// `run_reported` tells a retried response that ran out of attempts from a
/// success, and says when a request was sent once because it could not be
/// replayed.
#[tokio::test(start_paused = true)]
async fn a_reported_run_says_how_the_call_ended() {
    let (mock, mut handle) = mock::pair::<Buffered, u16>();
    handle.allow(10);
    let classify = |r: &Result<u16, BoxError>| match r {
        Ok(503) | Err(_) => Verdict::Retry,
        Ok(_) => Verdict::Success,
    };
    let layer = RetryLayer::new(retry_policy(2))
        .replay(HttpReplay::new(4))
        .classify(classify);
    let service = readied(&mock).await;
    let call = tokio::spawn(layer.run_reported(service, request("ok")));
    for _ in 0..2 {
        let (_, reply) = handle.next_request().await.expect("an attempt");
        reply.send_response(503);
    }
    let report = call.await.expect("no panic");
    assert_eq!(report.result.as_ref().ok(), Some(&503));
    assert_eq!(
        (report.attempts, report.stop, report.waited),
        (2, Some(StopReason::Exhausted), ms(100))
    );

    // Too big to replay: sent once, and the report says why.
    let service = readied(&mock).await;
    let call = tokio::spawn(layer.run_reported(service, request("more than four bytes")));
    let (_, reply) = handle.next_request().await.expect("the one attempt");
    reply.send_response(503);
    let report = call.await.expect("no panic");
    assert_eq!(report.result.as_ref().ok(), Some(&503));
    assert_eq!(
        (report.attempts, report.stop),
        (1, Some(StopReason::NotReplayable))
    );

    // A hedged call's report counts its copies on success too.
    let hedge = HedgeLayer::new(hedge_policy(3))
        .replay(HttpReplay::new(64))
        .classify(classify);
    let service = readied(&mock).await;
    let call = tokio::spawn(hedge.run_reported(service, request("ok")));
    let (_, _slow) = handle.next_request().await.expect("copy 1");
    let (_, reply) = handle.next_request().await.expect("copy 2, after 10 ms");
    reply.send_response(200);
    let report = call.await.expect("no panic");
    assert!(report.succeeded());
    assert_eq!(
        (
            report.hedge.unwrap().sent,
            report.hedge.unwrap().winner,
            report.hedge.unwrap().cancelled
        ),
        (2, Some(2), 1)
    );
}

/// Hedge copies each wait for readiness: copy 2 is not sent while the
/// service is not ready, even once its delay has passed.
#[tokio::test(start_paused = true)]
async fn every_hedge_copy_waits_for_readiness() {
    let (mock, mut handle) = mock::pair::<u32, u16>();
    let service = HedgeLayer::new(hedge_policy(2)).layer(mock);
    handle.allow(1);
    let start = tokio::time::Instant::now();
    let call = tokio::spawn(service.oneshot(9));
    let (_, slow) = handle.next_request().await.expect("copy 1");
    tokio::time::sleep(ms(50)).await; // the 10 ms delay has long passed
    assert_pending!(tokio_test::task::spawn(handle.next_request()).poll());
    handle.allow(1);
    let (_, fast) = handle.next_request().await.expect("copy 2");
    assert_eq!(start.elapsed(), ms(50));
    fast.send_response(200);
    assert_eq!(call.await.expect("no panic").expect("success"), 200);
    drop(slow);
}

#[path = "support/probe.rs"]
mod probe;

/// Dropping a call while it waits to retry drops everything it holds: no
/// attempt is in flight and none is ever sent again.
#[tokio::test(start_paused = true)]
async fn dropping_a_call_mid_backoff_stops_it() {
    let probe = probe::Probe::failing_then(1, 200);
    let mut service = RetryLayer::new(retry_policy(3)).layer(probe.clone());
    let mut call = tokio_test::task::spawn(service.ready().await.expect("ready").call(1));
    assert_pending!(call.poll()); // attempt 1 in flight
    probe.finish_all();
    tokio::time::sleep(ms(1)).await;
    assert_pending!(call.poll()); // attempt 1 failed: waiting 100 ms
    assert_eq!((probe.calls(), probe.live()), (1, 0));
    drop(call);
    tokio::time::sleep(Duration::from_secs(10)).await;
    // The call's clone is gone: only the test's handle and the layer's remain.
    assert_eq!((probe.calls(), probe.live(), probe.services()), (1, 0, 2));
}

/// Dropping a hedged call drops every copy in flight at once.
#[tokio::test(start_paused = true)]
async fn dropping_a_call_mid_hedge_cancels_every_copy() {
    let probe = probe::Probe::failing_then(0, 200);
    let mut service = HedgeLayer::new(hedge_policy(3)).layer(probe.clone());
    let mut call = tokio_test::task::spawn(service.ready().await.expect("ready").call(1));
    assert_pending!(call.poll());
    tokio::time::sleep(ms(10)).await;
    assert_pending!(call.poll());
    tokio::time::sleep(ms(10)).await;
    assert_pending!(call.poll());
    assert_eq!((probe.calls(), probe.live()), (3, 3));
    drop(call);
    assert_eq!(probe.live(), 0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(probe.calls(), 3);
}

/// The layers compose in `ServiceBuilder`, in either order, and a call goes
/// through all of them.
#[tokio::test(start_paused = true)]
async fn the_layers_compose_in_any_order() {
    let bucket = std::sync::Arc::new(
        steadfast::control::TokenBucket::builder()
            .max_tokens(10)
            .token_ratio(0.1)
            .build()
            .expect("valid bucket"),
    );
    let probe = probe::Probe::failing_then(1, 200);
    let outer_first = tower::ServiceBuilder::new()
        .layer(ControlLayer::new(bucket.clone()))
        .layer(DeadlineLayer::new(Duration::from_secs(5)))
        .layer(RetryLayer::new(retry_policy(3)))
        .layer(HedgeLayer::new(hedge_policy(2)))
        .service(probe.clone());
    let call = tokio::spawn(outer_first.oneshot(1));
    tokio::time::sleep(ms(1)).await;
    probe.finish_all();
    let out = call.await.expect("no panic");
    assert_eq!(out.ok(), Some(200));

    let probe = probe::Probe::failing_then(1, 200);
    let inner_first = tower::ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge_policy(2)))
        .layer(RetryLayer::new(retry_policy(3)))
        .layer(DeadlineLayer::new(Duration::from_secs(5)))
        .layer(ControlLayer::new(bucket))
        .service(probe.clone());
    let call = tokio::spawn(inner_first.oneshot(1));
    tokio::time::sleep(ms(1)).await;
    probe.finish_all();
    assert_eq!(call.await.expect("no panic").ok(), Some(200));
}

/// A circuit breaker at the front door: failures open it, the service is
/// then not called at all, and the refusal says how long the break lasts;
/// slow calls count as failures when the breaker asks for durations (timed
/// on the layer's clock, here tokio's paused one).
#[tokio::test(start_paused = true)]
async fn a_breaker_in_a_control_layer_refuses_locally_and_counts_slow_calls() {
    use steadfast::clock::TokioClock;
    use steadfast::control::{BreakerState, CircuitBreaker, WindowKind};
    use steadfast_tower::ControlError;

    let breaker = std::sync::Arc::new(
        CircuitBreaker::builder()
            .window(WindowKind::Count(10))
            .min_calls(4)
            .failure_ratio(0.5)
            .break_duration(Duration::from_secs(5))
            .slow_call(ms(100))
            .build_with_clock(TokioClock)
            .expect("valid breaker"),
    );
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = std::sync::Arc::clone(&calls);
    // Every call answers Ok, but after 500 ms: slow.
    let slow = tower::service_fn(move |_: u32| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async {
            tokio::time::sleep(ms(500)).await;
            Ok::<_, std::io::Error>(200)
        }
    });
    let service = ControlLayer::new(breaker.clone())
        .clock(TokioClock)
        .layer(slow);
    for _ in 0..4 {
        assert_eq!(service.clone().oneshot(1).await.ok(), Some(200));
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    let err = service.clone().oneshot(1).await.expect_err("refused");
    let ControlError::Refused(refused) = err else {
        panic!("expected a refusal, got {err}");
    };
    assert_eq!(refused.by(), steadfast::RetryControl::name(&*breaker));
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        4,
        "an open breaker calls nothing"
    );
}
