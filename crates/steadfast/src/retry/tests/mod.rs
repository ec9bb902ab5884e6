//! Executor tests, all on virtual time: `VirtualClock` for the blocking
//! executor, tokio's paused clock for the async one. The helpers they share
//! are here; the tests, one topic to a file, in the submodules.

mod attempts;
mod cancellation;
mod controls;
mod deadlines;
#[cfg(feature = "tokio")]
mod endpoints;
mod lean;
#[cfg(feature = "tokio")]
mod limits;
mod notify;
mod rate_limits;
mod reports;

use std::time::{Duration, Instant};

use crate::backoff::{Schedule, ScheduleState};
use crate::cancel::CancelToken;
use crate::clock::Clock;
#[cfg(feature = "tokio")]
use crate::clock::TokioClock;
use crate::policy::RetryPolicy;
use crate::rng::Rng;

/// A schedule that hands out fixed delays, then runs out.
#[derive(Debug, Clone)]
struct Fixed(Vec<Duration>);

impl Schedule for Fixed {
    fn next_delay(&self, state: &mut ScheduleState, _: &mut Rng) -> Option<Duration> {
        let d = *self.0.get(state.retries as usize)?;
        state.record(d);
        Some(d)
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn policy(attempts: u32, delays: &[u64]) -> RetryPolicy<Fixed> {
    RetryPolicy::with_schedule(Fixed(delays.iter().map(|&s| secs(s)).collect()))
        .max_attempts(attempts)
        .build()
        .unwrap()
}

/// Cancels `token` after `delay` on tokio's clock; the task returns the
/// instant of the cancel.
#[cfg(feature = "tokio")]
fn cancel_after(token: &CancelToken, delay: Duration) -> tokio::task::JoinHandle<Instant> {
    let token = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        token.cancel();
        TokioClock.now()
    })
}
