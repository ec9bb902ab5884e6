//! [`AttemptEvent`]: one attempt of a call, typed, for the client's
//! [`on_attempt`](crate::ClientBuilder::on_attempt) hook.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use steadfast::Verdict;
use steadfast::policy::Wait;

use crate::redact::RedactedUrl;

/// One attempt of a call, as the client's
/// [`on_attempt`](crate::ClientBuilder::on_attempt) hook hears it when the
/// attempt ends: the same facts as the attempt's `tracing` event, typed.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use steadfast_http::{AttemptEnd, Client};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = Arc::clone(&seen);
/// let client = Client::builder()
///     .on_attempt(move |event| {
///         if let Ok(mut log) = log.lock() {
///             log.push((event.number, event.end.failed()));
///         }
///     })
///     .build()?;
/// # let _ = client;
/// # Ok::<(), steadfast_http::BuildError>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AttemptEvent<'a> {
    /// The attempt's number, from 1 (for a hedged call: the copy's).
    pub number: u32,
    /// The request's method.
    pub method: &'a Method,
    /// The request's URL, without userinfo and with query values redacted.
    pub url: RedactedUrl<'a>,
    /// How long the call waited, with nothing in flight, before this
    /// attempt (the backoff or `Retry-After` wait; zero for the first).
    pub waited: Duration,
    /// How the attempt ended.
    pub end: AttemptEnd,
}

/// How one attempt ended, in an [`AttemptEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptEnd {
    /// A response the classifier called a success.
    Succeeded {
        /// Its status.
        status: StatusCode,
    },
    /// A response the classifier did not call a success, or a transport
    /// error.
    Failed {
        /// The response's status, if one came.
        status: Option<StatusCode>,
        /// What kind of transport failure it was, if no response came
        /// (`"timed out"`, `"connection failed"`, ...; never the URL).
        error: Option<&'static str>,
        /// What the classifier made of it.
        verdict: Verdict,
        /// A server's `Retry-After`, and the wait it really gets
        /// ([`Limits::wait`](steadfast::policy::Limits::wait): capped at
        /// `max_delay`, or not taken when it would end past the deadline).
        retry_after: Option<(Duration, Wait)>,
    },
    /// Dropped before it ended: it ran out of time, or another copy of a
    /// hedged call won.
    Abandoned,
}

impl AttemptEnd {
    /// Whether the attempt failed (a failure or an abandoned attempt).
    ///
    /// ```
    /// assert!(steadfast_http::AttemptEnd::Abandoned.failed());
    /// ```
    #[must_use]
    pub fn failed(&self) -> bool {
        !matches!(self, Self::Succeeded { .. })
    }
}

/// A client's `on_attempt` hook.
#[derive(Clone)]
pub(crate) struct OnAttempt(pub(crate) Arc<dyn Fn(&AttemptEvent<'_>) + Send + Sync>);

impl fmt::Debug for OnAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnAttempt(..)")
    }
}
