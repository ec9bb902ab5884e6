//! The client's typed attempt hook, on real calls: what each attempt was,
//! and the wait a server's `Retry-After` really gets. (Its own test binary:
//! tracing's callsite cache is shared by every test in a binary, and the
//! telemetry test captures events with a thread-local subscriber.)

mod support {
    pub mod server;
}

use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast::Verdict;
use steadfast::policy::Wait;
use steadfast_http::{AttemptEnd, Client};
use support::server::Server;

/// The typed hook hears every attempt with the same facts, and says the
/// wait a `Retry-After` really gets: capped at `max_delay`, or not waited
/// at all when it would end past the call's deadline.
#[tokio::test(flavor = "current_thread")]
async fn the_attempt_hook_hears_each_attempt_and_the_real_wait_of_a_hint() {
    let server = Server::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let client = Client::builder()
        .attempts(3)
        .max_delay(Duration::from_millis(50))
        .on_attempt(move |event| {
            log.lock().expect("lock").push((
                event.number,
                event.waited,
                event.end,
                event.url.to_string(),
            ));
        })
        .build()
        .expect("valid client");
    let response = client
        .get(server.url("/retry-after-secs/1/60?key=secret"))
        .send()
        .await
        .expect("recovers on the second attempt");
    assert_eq!(response.ending().attempts, 2);
    let events = seen.lock().expect("lock").clone();
    assert_eq!(events.len(), 2, "{events:?}");
    let ms = Duration::from_millis;
    assert_eq!(
        (events[0].0, events[0].1, events[0].2),
        (
            1,
            Duration::ZERO,
            AttemptEnd::Failed {
                status: Some(http::StatusCode::SERVICE_UNAVAILABLE),
                error: None,
                verdict: Verdict::RetryAfter(Duration::from_secs(60)),
                retry_after: Some((Duration::from_secs(60), Wait::Capped(ms(50)))),
            }
        )
    );
    assert!(!events[0].3.contains("secret"), "{}", events[0].3);
    assert_eq!(
        (events[1].0, events[1].1, events[1].2),
        (
            2,
            ms(50),
            AttemptEnd::Succeeded {
                status: http::StatusCode::OK
            }
        )
    );

    // Under a 500 ms deadline even the capped wait of 10 s cannot be
    // taken: the hook says so, and the call stops for the deadline.
    seen.lock().expect("lock").clear();
    let log = Arc::clone(&seen);
    let client = Client::builder()
        .attempts(3)
        .max_delay(Duration::from_secs(10))
        .deadline(ms(500))
        .on_attempt(move |event| {
            log.lock()
                .expect("lock")
                .push((event.number, event.waited, event.end, String::new()));
        })
        .build()
        .expect("valid client");
    let err = client
        .get(server.url("/retry-after-secs/1/61"))
        .send()
        .await
        .expect_err("the hint does not fit the deadline");
    assert!(err.is_deadline(), "{err}");
    let events = seen.lock().expect("lock").clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        matches!(
            events[0].2,
            AttemptEnd::Failed {
                retry_after: Some((_, Wait::PastDeadline)),
                ..
            }
        ),
        "{events:?}"
    );
}

/// With an attempt timeout, an attempt's own deadline is earlier than the
/// call's: a hint is judged against the call's (which the policy waits
/// under), not the attempt's.
#[tokio::test(flavor = "current_thread")]
async fn a_hint_is_judged_against_the_calls_deadline_not_the_attempts() {
    let server = Server::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let client = Client::builder()
        .attempts(2)
        .max_delay(Duration::from_secs(2))
        .deadline(Duration::from_secs(10))
        .attempt_timeout(Duration::from_millis(500))
        .on_attempt(move |event| log.lock().expect("lock").push(event.end))
        .build()
        .expect("valid client");
    let response = client
        .get(server.url("/retry-after-secs/1/1"))
        .send()
        .await
        .expect("recovers after the hinted second");
    assert_eq!(response.ending().attempts, 2);
    let events = seen.lock().expect("lock").clone();
    assert!(
        matches!(
            events[0],
            AttemptEnd::Failed {
                retry_after: Some((_, Wait::AsWanted(d))),
                ..
            } if d == Duration::from_secs(1)
        ),
        "{events:?}"
    );
}
