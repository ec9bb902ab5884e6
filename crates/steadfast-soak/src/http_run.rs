//! The HTTP half: many concurrent callers of one `steadfast_http::Client`
//! against the hostile server, then each call judged against what the
//! server did with its attempts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use steadfast::control::TokenBucket;
use steadfast::{Backoff, StopReason};
use steadfast_http::{BodyError, Client};
use tokio::runtime::Handle;

use crate::Setup;
use crate::findings::Findings;
use crate::http_server::{CALL_HEADER, Decide, HttpServer};
use crate::ledger::Received;
use crate::plan::HttpFault;
use crate::probe;

/// What a call sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Get,
    /// A POST the client must send once.
    Post,
    /// A POST with an `Idempotency-Key`: the caller opted in to retries.
    PostWithKey,
}

impl Sent {
    fn of(call: u64) -> Self {
        match call % 20 {
            0..=2 => Self::Post,
            3 => Self::PostWithKey,
            _ => Self::Get,
        }
    }
}

/// How a call ended, as the client told it.
#[derive(Debug)]
enum Ended {
    /// A response and its body read whole.
    Read { status: u16, attempts: u32 },
    /// A response whose body could not be read.
    BodyFailed {
        status: u16,
        attempts: u32,
        deadline: bool,
    },
    /// The call failed.
    Failed {
        reason: StopReason,
        status: Option<u16>,
        transport: bool,
        timed_out: bool,
        attempts: u32,
        text: String,
    },
}

/// One call's record.
#[derive(Debug)]
struct Record {
    call: u64,
    sent: Sent,
    elapsed: Duration,
    ended: Ended,
}

/// A soak of the HTTP client: `decide` says what the server does with each
/// attempt; `throttled` gives the client a gRPC-style token bucket.
pub async fn soak(
    title: &str,
    setup: &Setup,
    servers: &Handle,
    decide: Decide,
    throttled: bool,
) -> Findings {
    let mut findings = Findings::new(title);
    let mut server = match HttpServer::start(servers, decide) {
        Ok(s) => s,
        Err(e) => {
            findings.violation("the server could not start", || e.to_string());
            return findings;
        }
    };
    let watch = probe::Watch::start();
    let records = {
        let client = match client(setup, throttled) {
            Ok(c) => c,
            Err(e) => {
                findings.violation("the client could not be built", || e);
                return findings;
            }
        };
        drive(&client, &server.url(), setup).await
    };
    watch.finish(&server.listening.open, &mut findings).await;
    for record in &records {
        judge(
            record,
            &server.ledger.attempts(record.call),
            setup,
            &mut findings,
        );
    }
    findings.calls = records.len() as u64;
    findings.server_attempts = server.ledger.total() as u64;
    server.listening.stop().await;
    findings
}

fn client(setup: &Setup, throttled: bool) -> Result<Client, String> {
    let backoff = Backoff::exponential()
        .initial(Duration::from_millis(5))
        .max_delay(Duration::from_millis(50))
        .build()
        .map_err(|e| e.to_string())?;
    let mut builder = Client::builder()
        .attempts(setup.attempts)
        .backoff(backoff)
        .deadline(setup.deadline);
    if throttled {
        let bucket = TokenBucket::builder()
            .max_tokens(10)
            .token_ratio(0.1)
            .build()
            .map_err(|e| e.to_string())?;
        builder = builder.control(Arc::new(bucket));
    }
    builder.build().map_err(|e| e.to_string())
}

/// Runs `setup.calls` calls, `setup.concurrency` at a time.
async fn drive(client: &Client, url: &str, setup: &Setup) -> Vec<Record> {
    let (client, url) = (client.clone(), Arc::<str>::from(url));
    crate::callers::run(setup.calls, setup.concurrency, move |call| {
        let (client, url) = (client.clone(), Arc::clone(&url));
        async move { one(&client, &url, call).await }
    })
    .await
}

async fn one(client: &Client, url: &str, call: u64) -> Record {
    let sent = Sent::of(call);
    let request = match sent {
        Sent::Get => client.get(url),
        Sent::Post => client.post(url).body("payload"),
        Sent::PostWithKey => client
            .post(url)
            .header("idempotency-key", call.to_string())
            .body("payload"),
    }
    .header(CALL_HEADER, call.to_string());
    let start = Instant::now();
    let ended = match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let attempts = response.ending().attempts;
            match response.bytes().await {
                Ok(_) => Ended::Read { status, attempts },
                Err(e) => Ended::BodyFailed {
                    status,
                    attempts,
                    deadline: matches!(e, BodyError::DeadlineExceeded),
                },
            }
        }
        Err(e) => Ended::Failed {
            reason: e.reason(),
            status: e.status().map(|s| s.as_u16()),
            transport: e.transport_error().is_some(),
            timed_out: e.timed_out(),
            attempts: e.attempts(),
            text: e.to_string(),
        },
    };
    Record {
        call,
        sent,
        elapsed: start.elapsed(),
        ended,
    }
}

/// Judges one call against what the server did with its attempts.
fn judge(record: &Record, seen: &[Received<HttpFault>], setup: &Setup, findings: &mut Findings) {
    let call = record.call;
    let show = || {
        format!(
            "call {call} ({:?}): {:?}; server saw {seen:?}",
            record.sent, record.ended
        )
    };
    findings.returned(record.elapsed, setup.deadline);
    if let Some(slack) = setup.late_slack
        && record.elapsed > setup.deadline + slack + findings.timer_lag
    {
        findings.violation("returned later than its deadline plus the slack", || {
            format!("{:.1} ms: {}", record.elapsed.as_secs_f64() * 1e3, show())
        });
    }
    let received = u32::try_from(seen.len()).unwrap_or(u32::MAX);
    if received > setup.attempts {
        findings.violation("more attempts than the policy allows", show);
    }
    let posts = seen.iter().filter(|r| r.post).count();
    if record.sent == Sent::Post && posts > 1 {
        findings.violation("a POST without opt-in executed twice", show);
    }
    let last = seen.last().map(|r| r.fault);
    let (attempts, timed_out) = match record.ended {
        Ended::Read { attempts, .. } | Ended::BodyFailed { attempts, .. } => (attempts, false),
        Ended::Failed {
            attempts,
            timed_out,
            ..
        } => (attempts, timed_out),
    };
    // An attempt the deadline cut off while connecting is not counted (the
    // error says it was never sent); one cut off after hyper took it but
    // before hyper wrote it cannot be told from one the server is still
    // reading, and is counted.
    if let Ended::Failed { text, .. } = &record.ended
        && text.ends_with("(it was never sent)")
    {
        findings.outcome("(the deadline cut off an attempt while it was connecting: not counted)");
    }
    if attempts == received + 1 && timed_out {
        findings.outcome(
            "(an attempt cut off by the deadline before it was written: counted, never received)",
        );
    } else if attempts != received {
        findings.violation("the client's attempt count is not the server's", show);
    }
    match (&record.ended, last) {
        (Ended::Read { status, .. }, Some(fault)) => {
            findings.outcome(format!(
                "response {status}, body read; last attempt: {}",
                fault.name()
            ));
            let whole = matches!(fault, HttpFault::None | HttpFault::Status { .. });
            if !whole || fault.status() != Some(*status) {
                findings.violation("a response the server did not send whole", show);
            }
        }
        (
            Ended::BodyFailed {
                status: 200,
                deadline: true,
                ..
            },
            Some(HttpFault::Trickle),
        ) => {
            findings.outcome(
                "response 200, body cut off by the deadline; last attempt: trickling body",
            );
        }
        (
            Ended::BodyFailed {
                status: 200,
                deadline: false,
                ..
            },
            Some(HttpFault::ResetInBody),
        ) => {
            findings.outcome("response 200, body reset; last attempt: reset in body");
        }
        // The head came in time, the deadline passed before the body was
        // read: the deadline covers the body.
        (
            Ended::BodyFailed {
                status: 200,
                deadline: true,
                ..
            },
            Some(HttpFault::None),
        ) if record.elapsed >= setup.deadline => {
            findings.outcome(
                "response 200, the deadline passed before its body was read; last attempt: ok",
            );
        }
        (Ended::BodyFailed { .. }, _) => {
            findings.violation("a body failure the server did not cause", show);
        }
        (
            Ended::Failed {
                reason,
                status,
                transport,
                text,
                ..
            },
            fault,
        ) => {
            findings.outcome(format!(
                "error: {reason:?}; last attempt: {}",
                fault.map_or("none received", HttpFault::name)
            ));
            let truthful = match (status, *transport, fault) {
                // The last attempt answered with a status: the error names it.
                (Some(s), _, Some(f)) => {
                    f.status() == Some(*s)
                        && !matches!(f, HttpFault::ResetInBody | HttpFault::Trickle)
                }
                // A transport error: the server broke the connection.
                (None, true, Some(f)) => matches!(
                    f,
                    HttpFault::ResetInHead | HttpFault::CloseBeforeHead | HttpFault::ResetInBody
                ),
                // Neither: cut off by the deadline while the server stalled,
                // or before the attempt reached it.
                (None, false, f) => {
                    *reason == StopReason::Deadline
                        && (f == Some(HttpFault::Stall)
                            || attempts == received + 1
                            || text.ends_with("(it was never sent)"))
                }
                (_, _, None) => false,
            };
            if !truthful {
                findings.violation("the error does not describe the last attempt", || {
                    format!("{text} | {}", show())
                });
            }
            if *reason == StopReason::Exhausted {
                let allowed = if record.sent == Sent::Post {
                    1
                } else {
                    setup.attempts
                };
                if attempts != allowed {
                    findings.violation("exhausted before the policy's attempts were spent", show);
                }
            }
        }
        (_, None) => findings.violation("a response the server never sent", show),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn setup() -> Setup {
        Setup {
            calls: 1,
            concurrency: 1,
            deadline: 300 * MS,
            attempts: 4,
            late_slack: Some(5 * MS),
        }
    }

    fn got(faults: &[HttpFault], post: bool) -> Vec<Received<HttpFault>> {
        faults
            .iter()
            .map(|&fault| Received {
                fault,
                post,
                previous: None,
            })
            .collect()
    }

    fn failed(status: Option<u16>, timed_out: bool, attempts: u32) -> Ended {
        Ended::Failed {
            reason: if timed_out {
                StopReason::Deadline
            } else {
                StopReason::Exhausted
            },
            status,
            transport: false,
            timed_out,
            attempts,
            text: String::new(),
        }
    }

    fn judged(
        sent: Sent,
        elapsed: Duration,
        ended: Ended,
        seen: &[Received<HttpFault>],
    ) -> Findings {
        let mut findings = Findings::new("test");
        let record = Record {
            call: 7,
            sent,
            elapsed,
            ended,
        };
        judge(&record, seen, &setup(), &mut findings);
        findings
    }

    const UNAVAILABLE: HttpFault = HttpFault::Status {
        code: 503,
        hint: None,
    };

    #[test]
    fn a_truthful_call_breaks_nothing() {
        let seen = got(&[UNAVAILABLE, HttpFault::None], false);
        let ended = Ended::Read {
            status: 200,
            attempts: 2,
        };
        assert_eq!(judged(Sent::Get, 20 * MS, ended, &seen).violations(), 0);
        let seen = got(&[UNAVAILABLE, HttpFault::Stall], false);
        let f = judged(Sent::Get, 301 * MS, failed(None, true, 2), &seen);
        assert_eq!(f.violations(), 0, "{f}");
    }

    #[test]
    fn a_post_executed_twice_is_caught() {
        let seen = got(&[HttpFault::ResetInHead, HttpFault::None], true);
        let ended = Ended::Read {
            status: 200,
            attempts: 2,
        };
        let f = judged(Sent::Post, 20 * MS, ended, &seen);
        assert!(
            f.violations
                .contains_key("a POST without opt-in executed twice"),
            "{f}"
        );
        // With an Idempotency-Key, the caller opted in.
        let ended = Ended::Read {
            status: 200,
            attempts: 2,
        };
        assert_eq!(
            judged(Sent::PostWithKey, 20 * MS, ended, &seen).violations(),
            0
        );
    }

    #[test]
    fn an_error_that_names_an_earlier_attempt_is_caught() {
        // 503, then a stall the deadline cut off: the error must not say 503.
        let seen = got(&[UNAVAILABLE, HttpFault::Stall], false);
        let f = judged(Sent::Get, 300 * MS, failed(Some(503), true, 2), &seen);
        assert!(
            f.violations
                .contains_key("the error does not describe the last attempt"),
            "{f}"
        );
    }

    #[test]
    fn an_attempt_the_server_never_saw_is_caught_unless_the_deadline_cut_it_off() {
        let seen = got(&[UNAVAILABLE], false);
        let f = judged(Sent::Get, 20 * MS, failed(Some(503), false, 2), &seen);
        assert!(
            f.violations
                .contains_key("the client's attempt count is not the server's"),
            "{f}"
        );
        let f = judged(Sent::Get, 300 * MS, failed(None, true, 2), &seen);
        assert_eq!(f.violations(), 0, "{f}");
        assert!(f.outcomes.keys().any(|k| k.contains("never received")));
    }

    #[test]
    fn a_late_return_is_caught() {
        let seen = got(&[HttpFault::Stall], false);
        let f = judged(Sent::Get, 306 * MS, failed(None, true, 1), &seen);
        assert!(
            f.violations
                .contains_key("returned later than its deadline plus the slack"),
            "{f}"
        );
        assert_eq!((f.late_calls, f.worst_late), (1, 6 * MS));
    }

    #[test]
    fn a_late_return_is_only_counted_when_lateness_is_reported() {
        let seen = got(&[HttpFault::Stall], false);
        let mut findings = Findings::new("test");
        let record = Record {
            call: 7,
            sent: Sent::Get,
            elapsed: 400 * MS,
            ended: failed(None, true, 1),
        };
        let report_only = Setup {
            late_slack: None,
            ..setup()
        };
        judge(&record, &seen, &report_only, &mut findings);
        assert_eq!(findings.violations(), 0, "{findings}");
        assert_eq!((findings.late_calls, findings.worst_late), (1, 100 * MS));
    }

    #[test]
    fn more_attempts_than_the_policy_allows_are_caught() {
        let seen = got(&[UNAVAILABLE; 5], false);
        let f = judged(Sent::Get, 20 * MS, failed(Some(503), false, 5), &seen);
        assert!(
            f.violations
                .contains_key("more attempts than the policy allows"),
            "{f}"
        );
    }
}
