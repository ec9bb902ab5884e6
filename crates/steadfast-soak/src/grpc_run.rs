//! The gRPC half: many concurrent callers of one tonic client wired with
//! `steadfast_grpc::channel` from a service config, against the hostile
//! server, then each call judged against what the server did.

use std::time::{Duration, Instant};

use steadfast_grpc::GrpcChannel;
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use tokio::runtime::Handle;
use tonic::transport::Channel;

use crate::Setup;
use crate::findings::Findings;
use crate::grpc_server::{Decide, GrpcServer};
use crate::ledger::Received;
use crate::plan::{GrpcFault, PUSHBACKS, code};
use crate::probe;

type Echo = EchoClient<GrpcChannel<Channel>>;

/// How a call ended, as the client told it.
#[derive(Debug)]
enum Ended {
    Ok { attempts: u32 },
    Failed { code: i32, message: String },
}

#[derive(Debug)]
struct Record {
    call: u64,
    elapsed: Duration,
    ended: Ended,
}

/// The service config: retries on UNAVAILABLE and RESOURCE_EXHAUSTED,
/// with retry throttling when `throttled`.
fn config(setup: &Setup, throttled: bool) -> String {
    let throttling = if throttled {
        r#", "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}"#
    } else {
        ""
    };
    format!(
        r#"{{"methodConfig": [{{"name": [{{"service": "steadfast.test.Echo"}}],
            "retryPolicy": {{"maxAttempts": {}, "initialBackoff": "0.005s", "maxBackoff": "0.05s",
                "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}}}}]{throttling}}}"#,
        setup.attempts
    )
}

/// A soak of the gRPC layer: `decide` says what the server does with each
/// attempt.
pub async fn soak(
    title: &str,
    setup: &Setup,
    servers: &Handle,
    decide: Decide,
    throttled: bool,
) -> Findings {
    let mut findings = Findings::new(title);
    let mut server = match GrpcServer::start(servers, decide) {
        Ok(s) => s,
        Err(e) => {
            findings.violation("the server could not start", || e.to_string());
            return findings;
        }
    };
    let watch = probe::Watch::start();
    let records = {
        let channel = match Channel::from_shared(server.url()) {
            Ok(endpoint) => match endpoint.connect().await {
                Ok(c) => c,
                Err(e) => {
                    findings.violation("the channel could not connect", || e.to_string());
                    return findings;
                }
            },
            Err(e) => {
                findings.violation("the channel could not be made", || e.to_string());
                return findings;
            }
        };
        let client = match steadfast_grpc::channel(channel, &server.url(), config(setup, throttled))
        {
            Ok(c) => EchoClient::new(c),
            Err(e) => {
                findings.violation("the service config was refused", || e.to_string());
                return findings;
            }
        };
        drive(client, setup).await
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

async fn drive(client: Echo, setup: &Setup) -> Vec<Record> {
    let deadline = setup.deadline;
    crate::callers::run(setup.calls, setup.concurrency, move |call| {
        let mut client = client.clone();
        async move {
            let mut request = tonic::Request::new(SayRequest {
                text: "soak".into(),
                key: call.to_string(),
            });
            request.set_timeout(deadline);
            let start = Instant::now();
            let ended = match client.say(request).await {
                Ok(reply) => Ended::Ok {
                    attempts: reply.into_inner().attempts,
                },
                Err(status) => Ended::Failed {
                    code: status.code() as i32,
                    message: status.message().to_owned(),
                },
            };
            Record {
                call,
                elapsed: start.elapsed(),
                ended,
            }
        }
    })
    .await
}

/// Whether A6 lets a client retry after a failure with this pushback.
fn pushback_allows_retry(pushback: Option<usize>) -> bool {
    pushback.is_none_or(|i| PUSHBACKS[i].parse::<u64>().is_ok())
}

fn judge(record: &Record, seen: &[Received<GrpcFault>], setup: &Setup, findings: &mut Findings) {
    let call = record.call;
    let show = || {
        format!(
            "call {call}: {:?} after {:?}; server saw {seen:?}",
            record.ended, record.elapsed
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
    if let Some(i) = seen.iter().position(|r| r.fault.commits())
        && i + 1 < seen.len()
    {
        findings.violation("a retry after the call was committed", show);
    }
    for (i, r) in seen.iter().enumerate() {
        let expected = u32::try_from(i).ok().filter(|&n| n > 0);
        if r.previous != expected {
            findings.violation("grpc-previous-rpc-attempts is wrong", show);
        }
    }
    let last = seen.last().map(|r| r.fault);
    match (&record.ended, last) {
        (Ended::Ok { attempts }, Some(GrpcFault::None)) => {
            findings.outcome("OK; last attempt: ok");
            if *attempts != received {
                findings.violation("the reply is not from the last attempt", show);
            }
        }
        (Ended::Failed { code, message }, Some(fault)) => {
            findings.outcome(format!(
                "{}; last attempt: {}",
                code_name(*code),
                fault.name()
            ));
            let truthful = match fault {
                // A failure whose retry would not fit the deadline, or that
                // arrived at it, is the deadline's doing.
                GrpcFault::Status { code: c, pushback } => {
                    *code == c
                        || (*code == code::DEADLINE_EXCEEDED
                            && (pushback_allows_retry(pushback)
                                || record.elapsed + Duration::from_millis(1) >= setup.deadline))
                }
                GrpcFault::HeadThenFail { code: c } => *code == c,
                // A stream reset after the head: tonic reports the h2 error.
                GrpcFault::ResetAfterHead => *code == code::INTERNAL || *code == code::UNKNOWN,
                // A reset before the head counts as UNAVAILABLE (retryable):
                // it ends a call only when the attempts or the deadline ran out.
                GrpcFault::ResetBeforeHead => {
                    *code == code::UNAVAILABLE
                        || *code == code::INTERNAL
                        || *code == code::DEADLINE_EXCEEDED
                }
                GrpcFault::Stall | GrpcFault::EnforceTimeout => *code == code::DEADLINE_EXCEEDED,
                GrpcFault::None => false,
            };
            if !truthful {
                findings.violation("the status does not describe the last attempt", || {
                    format!("{} {message:?} | {}", code_name(*code), show())
                });
            }
        }
        _ => findings.violation("an outcome the server did not send", show),
    }
}

fn code_name(code: i32) -> String {
    format!("{:?}", tonic::Code::from_i32(code))
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

    /// The attempts as a right client sends them: each retry numbered.
    fn got(faults: &[GrpcFault]) -> Vec<Received<GrpcFault>> {
        (0_u32..)
            .zip(faults)
            .map(|(i, &fault)| Received {
                fault,
                post: false,
                previous: (i > 0).then_some(i),
            })
            .collect()
    }

    fn judged(elapsed: Duration, ended: Ended, seen: &[Received<GrpcFault>]) -> Findings {
        let mut findings = Findings::new("test");
        let record = Record {
            call: 7,
            elapsed,
            ended,
        };
        judge(&record, seen, &setup(), &mut findings);
        findings
    }

    fn failed(code: i32) -> Ended {
        Ended::Failed {
            code,
            message: String::new(),
        }
    }

    const UNAVAILABLE: GrpcFault = GrpcFault::Status {
        code: code::UNAVAILABLE,
        pushback: None,
    };

    #[test]
    fn a_truthful_call_breaks_nothing() {
        let seen = got(&[UNAVAILABLE, GrpcFault::None]);
        let f = judged(20 * MS, Ended::Ok { attempts: 2 }, &seen);
        assert_eq!(f.violations(), 0, "{f}");
        let seen = got(&[UNAVAILABLE, GrpcFault::EnforceTimeout]);
        let f = judged(300 * MS, failed(code::DEADLINE_EXCEEDED), &seen);
        assert_eq!(f.violations(), 0, "{f}");
    }

    #[test]
    fn a_retry_after_a_commit_is_caught() {
        let seen = got(&[
            GrpcFault::HeadThenFail {
                code: code::UNAVAILABLE,
            },
            GrpcFault::None,
        ]);
        let f = judged(20 * MS, Ended::Ok { attempts: 2 }, &seen);
        assert!(
            f.violations
                .contains_key("a retry after the call was committed"),
            "{f}"
        );
    }

    #[test]
    fn cancelled_when_the_deadline_passed_is_caught() {
        // #28 item 6: the server enforced the grpc-timeout; the caller must
        // hear DEADLINE_EXCEEDED, not CANCELLED.
        let seen = got(&[GrpcFault::EnforceTimeout]);
        let f = judged(300 * MS, failed(code::CANCELLED), &seen);
        assert!(
            f.violations
                .contains_key("the status does not describe the last attempt"),
            "{f}"
        );
    }

    #[test]
    fn a_wrong_previous_attempts_header_is_caught() {
        let mut seen = got(&[UNAVAILABLE, GrpcFault::None]);
        seen[1].previous = None;
        let f = judged(20 * MS, Ended::Ok { attempts: 2 }, &seen);
        assert!(
            f.violations
                .contains_key("grpc-previous-rpc-attempts is wrong"),
            "{f}"
        );
    }

    #[test]
    fn a_reply_from_another_attempt_is_caught() {
        let seen = got(&[UNAVAILABLE, GrpcFault::None]);
        let f = judged(20 * MS, Ended::Ok { attempts: 1 }, &seen);
        assert!(
            f.violations
                .contains_key("the reply is not from the last attempt"),
            "{f}"
        );
    }
}
