//! The error a call returns when it gives up, whether it retried or hedged.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use super::{EndpointId, HedgeStats, LimitRefused, Refused, StopReason, Tried};

/// Why and how a call failed: the stop reason, the attempts made, the time
/// spent, the operation's name, and the last error as `source()`. One type
/// for both executors: a hedged call's error also carries its copies'
/// [`HedgeStats`] ([`hedge_stats`](Self::hedge_stats)).
///
/// ```
/// use std::time::Duration;
/// use steadfast::{RetryError, StopReason};
///
/// let err = RetryError::new(StopReason::Exhausted, Some("connection refused"), 5, Duration::from_millis(3200))
///     .with_name("fetch_user");
/// assert_eq!(
///     err.to_string(),
///     "fetch_user failed after 5 attempts in 3.2s (attempts exhausted): connection refused"
/// );
/// ```
///
/// The details live behind one box, so a `Result<T, RetryError<E>>` stays
/// small: the success path moves little, and the box is made only when a
/// call gives up after trying. A call that a control refused before any
/// attempt (an open circuit breaker, a throttle) keeps its few details
/// inline instead: a refusal costs no allocation.
#[derive(Clone, PartialEq, Eq)]
pub struct RetryError<E>(Repr<E>);

#[derive(Clone, PartialEq, Eq)]
enum Repr<E> {
    /// Refused before any attempt ([`StopReason::Throttled`], no attempt,
    /// no time spent, no error): what a refusal says, without a box.
    Refused {
        by: &'static str,
        name: Option<&'static str>,
        retry_after: Option<Duration>,
    },
    /// Refused before any attempt by a concurrency limit
    /// ([`StopReason::LimitReached`]): likewise without a box.
    /// Its refusal never waited in a queue (a lean call's refusal);
    /// one that did is [`Repr::Full`].
    Limited {
        by: &'static str,
        name: Option<&'static str>,
        in_flight: u32,
        limit: u32,
    },
    /// Everything else.
    Full(Box<Details<E>>),
}

#[derive(Clone, PartialEq, Eq)]
struct Details<E> {
    reason: StopReason,
    last_error: Option<E>,
    attempts: u32,
    elapsed: Duration,
    name: Option<&'static str>,
    /// Who refused the call or its last attempt, if someone did.
    refused: Option<Refused>,
    timed_out: bool,
    /// The copies of a hedged call.
    hedge: Option<HedgeStats>,
    /// The endpoints the attempts went to (under an endpoint set).
    tried: Tried,
    /// Attempts requeued (never processed, or no endpoint ready), not
    /// counted in `attempts`.
    requeues: u32,
}

impl<E> RetryError<E> {
    /// A new error.
    pub fn new(
        reason: StopReason,
        last_error: Option<E>,
        attempts: u32,
        elapsed: Duration,
    ) -> Self {
        Self(Repr::Full(Box::new(Details {
            reason,
            last_error,
            attempts,
            elapsed,
            name: None,
            refused: None,
            timed_out: false,
            hedge: None,
            tried: Tried::default(),
            requeues: 0,
        })))
    }

    /// The error of a hedged call: its attempts are the copies sent, its
    /// time the call's, and the control that refused a copy (if one did)
    /// is [`refused_by`](Self::refused_by) (a limit's refusal of a copy is
    /// added with [`with_refusal`](Self::with_refusal)).
    ///
    /// ```
    /// use steadfast::call::HedgeStats;
    /// use steadfast::{RetryError, StopReason};
    /// let mut stats = HedgeStats::default();
    /// stats.sent = 3;
    /// stats.failed = 3;
    /// let err = RetryError::hedged(StopReason::Exhausted, Some("unavailable"), stats).with_name("lookup");
    /// assert_eq!(err.attempts(), 3);
    /// assert_eq!(err.hedge_stats().map(|s| s.failed), Some(3));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "lookup failed after 3 hedged attempts in 0ms (attempts exhausted): unavailable"
    /// );
    /// ```
    pub fn hedged(reason: StopReason, last_error: Option<E>, stats: HedgeStats) -> Self {
        Self(Repr::Full(Box::new(Details {
            reason,
            last_error,
            attempts: stats.sent,
            elapsed: stats.elapsed,
            name: None,
            refused: stats.refused_by.map(|by| Refused::Control {
                by,
                retry_after: None,
            }),
            timed_out: false,
            hedge: Some(stats),
            tried: Tried::default(),
            requeues: 0,
        })))
    }

    /// The error of a call that the control named `by` refused before any
    /// attempt ([`StopReason::Throttled`], no attempt): made without an
    /// allocation.
    ///
    /// ```
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::<std::io::Error>::refused("circuit breaker").with_name("fetch");
    /// assert_eq!((err.reason(), err.attempts(), err.refused_by()), (StopReason::Throttled, 0, Some("circuit breaker")));
    /// assert_eq!(err.to_string(), "fetch failed after 0 attempts in 0ms (refused by circuit breaker)");
    /// ```
    #[must_use]
    pub const fn refused(by: &'static str) -> Self {
        Self(Repr::Refused {
            by,
            name: None,
            retry_after: None,
        })
    }

    /// The error of a call whose first attempt a concurrency limit refused
    /// ([`StopReason::LimitReached`], no attempt): made without an
    /// allocation.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::call::LimitRefused;
    /// use steadfast::{RetryError, StopReason};
    /// let refused = LimitRefused { by: "payments", in_flight: 8, limit: 8, waited: Duration::ZERO };
    /// let err = RetryError::<std::io::Error>::limited(refused).with_name("charge");
    /// assert_eq!((err.reason(), err.attempts()), (StopReason::LimitReached, 0));
    /// assert_eq!(err.limit_refused(), Some(refused));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "charge failed after 0 attempts in 0ms (concurrency limit payments full: 8 in flight, limit 8)"
    /// );
    /// ```
    #[must_use]
    pub fn limited(refused: LimitRefused) -> Self {
        let inline = Self(Repr::Limited {
            by: refused.by,
            name: None,
            in_flight: refused.in_flight,
            limit: refused.limit,
        });
        if refused.waited.is_zero() {
            inline
        } else {
            // A wait to report: boxed (a refusal after a wait in a queue
            // comes from a call that has its per-call state already).
            inline.with_refusal(Refused::Limit(refused))
        }
    }

    /// The details, boxed now if they were inline (a change that a refusal
    /// cannot hold inline).
    fn details_mut(&mut self) -> &mut Details<E> {
        if let Repr::Refused { .. } | Repr::Limited { .. } = self.0 {
            self.0 = Repr::Full(Box::new(Details {
                reason: self.reason(),
                last_error: None,
                attempts: 0,
                elapsed: Duration::ZERO,
                name: self.name(),
                refused: self.refusal(),
                timed_out: false,
                hedge: None,
                tried: Tried::default(),
                requeues: 0,
            }));
        }
        match &mut self.0 {
            Repr::Full(details) => details,
            Repr::Refused { .. } | Repr::Limited { .. } => unreachable!("boxed above"),
        }
    }

    /// Names the operation in messages.
    #[must_use]
    pub fn with_name(mut self, name: &'static str) -> Self {
        match &mut self.0 {
            Repr::Refused { name: n, .. } | Repr::Limited { name: n, .. } => *n = Some(name),
            Repr::Full(d) => d.name = Some(name),
        }
        self
    }

    /// The same error with another reason: for an executor that knows more
    /// than the policy did (e.g. that the request could not be sent again,
    /// [`StopReason::NotReplayable`]).
    ///
    /// ```
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::new(StopReason::Exhausted, Some("reset"), 1, Default::default());
    /// assert_eq!(err.with_reason(StopReason::NotReplayable).reason(), StopReason::NotReplayable);
    /// ```
    #[must_use]
    pub fn with_reason(mut self, reason: StopReason) -> Self {
        if reason != self.reason() || matches!(self.0, Repr::Full(_)) {
            self.details_mut().reason = reason;
        }
        self
    }

    /// The error of a call whose request could not be sent again (a
    /// streaming body, one over an integration's replay limit), so it was
    /// sent once: a stop for spent attempts says so, as
    /// [`StopReason::NotReplayable`]; any other reason stands.
    ///
    /// ```
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::new(StopReason::Exhausted, Some("reset"), 1, Default::default());
    /// assert_eq!(err.sent_once().reason(), StopReason::NotReplayable);
    /// let err = RetryError::new(StopReason::Deadline, Some("slow"), 1, Default::default());
    /// assert_eq!(err.sent_once().reason(), StopReason::Deadline);
    /// ```
    #[must_use]
    pub fn sent_once(self) -> Self {
        match self.reason() {
            StopReason::Exhausted => self.with_reason(StopReason::NotReplayable),
            _ => self,
        }
    }

    /// Records who refused the call or its last attempt: a retry control
    /// (for [`StopReason::Throttled`]), a rate limit (likewise), or a
    /// concurrency limit (for [`StopReason::LimitReached`]). A refusal of
    /// a call that made no attempt stays inline where it fits.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::call::{RateRefused, Refused};
    /// use steadfast::{RetryError, StopReason};
    /// let refused = Refused::from(RateRefused { by: "maps api", retry_after: Some(Duration::from_millis(40)) });
    /// let err = RetryError::<std::io::Error>::new(refused.reason(false), None, 0, Duration::ZERO).with_refusal(refused);
    /// assert_eq!((err.refused_by(), err.retry_after()), (Some("maps api"), Some(Duration::from_millis(40))));
    /// assert_eq!(err.refusal(), Some(refused));
    /// ```
    #[must_use]
    pub fn with_refusal(mut self, refused: Refused) -> Self {
        match (&mut self.0, refused) {
            (
                Repr::Refused {
                    by, retry_after, ..
                },
                Refused::Control {
                    by: b,
                    retry_after: r,
                },
            ) => (*by, *retry_after) = (b, r),
            (
                Repr::Limited {
                    by,
                    in_flight,
                    limit,
                    ..
                },
                Refused::Limit(l),
            ) if l.waited.is_zero() => {
                (*by, *in_flight, *limit) = (l.by, l.in_flight, l.limit);
            }
            _ => self.details_mut().refused = Some(refused),
        }
        self
    }

    /// Who refused the call or its last attempt, if someone did: a retry
    /// control, a rate limit or a concurrency limit, each with its account.
    #[must_use]
    pub fn refusal(&self) -> Option<Refused> {
        match &self.0 {
            Repr::Refused {
                by, retry_after, ..
            } => Some(Refused::Control {
                by,
                retry_after: *retry_after,
            }),
            Repr::Limited {
                by,
                in_flight,
                limit,
                ..
            } => Some(Refused::Limit(LimitRefused {
                by,
                in_flight: *in_flight,
                limit: *limit,
                waited: Duration::ZERO,
            })),
            Repr::Full(d) => d.refused,
        }
    }

    /// For [`StopReason::LimitReached`]: which concurrency limit refused the
    /// attempt, how many were in flight, its limit, and how long the
    /// attempt waited in its queue.
    #[must_use]
    pub fn limit_refused(&self) -> Option<LimitRefused> {
        self.refusal()?.limit_refused()
    }

    /// Records where the call's attempts went (a call under an endpoint
    /// set); nothing for a call that tried none.
    #[must_use]
    pub(crate) fn with_tried(mut self, tried: &Tried) -> Self {
        if !tried.is_empty() {
            self.details_mut().tried = tried.clone();
        }
        self
    }

    /// The endpoint of the last attempt, if the call tried one.
    pub(crate) fn last_endpoint_id(&self) -> Option<EndpointId> {
        match &self.0 {
            Repr::Full(d) => d.tried.last_id(),
            _ => None,
        }
    }

    /// The endpoints the call's attempts went to, oldest first (the last
    /// eight), under a policy with an [endpoint set](crate::endpoint::Endpoints);
    /// empty otherwise. A retry goes elsewhere than these while another
    /// endpoint is eligible.
    pub fn endpoints(&self) -> impl Iterator<Item = EndpointId> + '_ {
        let tried = match &self.0 {
            Repr::Full(d) => Some(d.tried.ids()),
            Repr::Refused { .. } | Repr::Limited { .. } => None,
        };
        tried.into_iter().flatten()
    }

    /// The label of the endpoint the last attempt went to (its address, its
    /// URL), under an endpoint set.
    #[must_use]
    pub fn last_endpoint(&self) -> Option<&str> {
        match &self.0 {
            Repr::Full(d) => d.tried.last().map(|l| &**l),
            Repr::Refused { .. } | Repr::Limited { .. } => None,
        }
    }

    /// Records how many times the call was requeued (an attempt a server
    /// never processed, or one that waited for an endpoint to come back:
    /// see [`requeues`](Self::requeues)).
    #[must_use]
    pub fn with_requeues(mut self, requeues: u32) -> Self {
        if requeues > 0 || matches!(self.0, Repr::Full(_)) {
            self.details_mut().requeues = requeues;
        }
        self
    }

    /// How many times the call was *requeued* under an endpoint set: sent
    /// again elsewhere after an attempt no server processed, or held until
    /// an endpoint came back, neither counted in
    /// [`attempts`](Self::attempts)
    /// ([`RetryPolicyBuilder::max_requeues`](crate::policy::RetryPolicyBuilder::max_requeues)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::new(StopReason::Exhausted, Some("unavailable"), 2, Duration::ZERO)
    ///     .with_requeues(1);
    /// assert_eq!((err.attempts(), err.requeues()), (2, 1));
    /// ```
    #[must_use]
    pub fn requeues(&self) -> u32 {
        match &self.0 {
            Repr::Refused { .. } | Repr::Limited { .. } => 0,
            Repr::Full(d) => d.requeues,
        }
    }

    /// Records that the last attempt ran out of time rather than failing.
    #[must_use]
    pub fn with_timed_out(mut self, timed_out: bool) -> Self {
        if timed_out || matches!(self.0, Repr::Full(_)) {
            self.details_mut().timed_out = timed_out;
        }
        self
    }

    /// Why the call stopped.
    #[must_use]
    pub fn reason(&self) -> StopReason {
        match &self.0 {
            Repr::Refused { .. } => StopReason::Throttled,
            Repr::Limited { .. } => StopReason::LimitReached,
            Repr::Full(d) => d.reason,
        }
    }

    /// Attempts made, counting the first (0 for a call refused at once).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        match &self.0 {
            Repr::Refused { .. } | Repr::Limited { .. } => 0,
            Repr::Full(d) => d.attempts,
        }
    }

    /// Time spent, from the call's start when a time limit made the executor
    /// read the clock then, otherwise from the end of the first attempt.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        match &self.0 {
            Repr::Refused { .. } | Repr::Limited { .. } => Duration::ZERO,
            Repr::Full(d) => d.elapsed,
        }
    }

    /// The operation's name, if one was given.
    #[must_use]
    pub fn name(&self) -> Option<&'static str> {
        match &self.0 {
            Repr::Refused { name, .. } | Repr::Limited { name, .. } => *name,
            Repr::Full(d) => d.name,
        }
    }

    /// The retry control or rate limit that refused the call or a retry,
    /// for [`StopReason::Throttled`] (a concurrency limit's refusal is
    /// [`limit_refused`](Self::limit_refused); either is [`refusal`](Self::refusal)).
    #[must_use]
    pub fn refused_by(&self) -> Option<&'static str> {
        self.refusal()?.throttled_by()
    }

    /// How long the control or rate limit that refused said it would go on
    /// refusing, when it knows (a circuit breaker that is open: the rest of
    /// its break, after which it lets a probe through; a rate limit: the
    /// time until its next turn). The one name for that time everywhere
    /// ([`Refused::retry_after`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::call::Refused;
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::<std::io::Error>::new(StopReason::Throttled, None, 0, Duration::ZERO)
    ///     .with_refusal(Refused::Control { by: "payments", retry_after: Some(Duration::from_millis(4200)) });
    /// assert_eq!(err.retry_after(), Some(Duration::from_millis(4200)));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "operation failed after 0 attempts in 0ms (refused by payments, for 4.2s more)"
    /// );
    /// ```
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.refusal()?.retry_after()
    }

    /// Whether the last attempt was cut off by its timeout.
    #[must_use]
    pub fn timed_out(&self) -> bool {
        match &self.0 {
            Repr::Refused { .. } | Repr::Limited { .. } => false,
            Repr::Full(d) => d.timed_out,
        }
    }

    /// What a hedged call did with its copies (`None` for a retried call).
    ///
    /// ```
    /// use steadfast::call::HedgeStats;
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::<()>::hedged(StopReason::Deadline, None, HedgeStats::default());
    /// assert!(err.hedge_stats().is_some());
    /// assert!(RetryError::<()>::refused("breaker").hedge_stats().is_none());
    /// ```
    #[must_use]
    pub fn hedge_stats(&self) -> Option<&HedgeStats> {
        match &self.0 {
            Repr::Refused { .. } | Repr::Limited { .. } => None,
            Repr::Full(d) => d.hedge.as_ref(),
        }
    }

    /// The last error the operation returned, if any attempt returned one.
    #[must_use]
    pub fn last_error(&self) -> Option<&E> {
        match &self.0 {
            Repr::Refused { .. } | Repr::Limited { .. } => None,
            Repr::Full(d) => d.last_error.as_ref(),
        }
    }

    /// Takes the last error out.
    #[must_use]
    pub fn into_last_error(self) -> Option<E> {
        match self.0 {
            Repr::Refused { .. } | Repr::Limited { .. } => None,
            Repr::Full(d) => d.last_error,
        }
    }
}

pub(crate) struct Secs(pub(crate) Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d >= Duration::from_secs(1) {
            write!(f, "{:.1}s", d.as_secs_f64())
        } else {
            write!(f, "{}ms", d.as_millis())
        }
    }
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name().unwrap_or("operation");
        let attempts = self.attempts();
        let plural = if attempts == 1 { "" } else { "s" };
        let hedged = self.hedge_stats().is_some();
        let (kind, again) = if hedged {
            ("hedged attempt", "hedge")
        } else {
            ("attempt", "retry")
        };
        write!(
            f,
            "{name} failed after {attempts} {kind}{plural} in {} (",
            Secs(self.elapsed())
        )?;
        match (self.reason(), self.refused_by()) {
            // No attempt made: the call itself was refused.
            (StopReason::Throttled, Some(by)) if attempts == 0 && !hedged => {
                write!(f, "refused by {by}")?;
            }
            (StopReason::Throttled, Some(by)) => write!(f, "{again} refused by {by}")?,
            (reason, _) => match (reason, self.limit_refused()) {
                (StopReason::LimitReached, Some(refused)) if attempts > 0 => {
                    write!(f, "{again} refused: {refused}")?;
                }
                (StopReason::LimitReached, Some(refused)) => write!(f, "{refused}")?,
                _ => f.write_str(reason.as_str())?,
            },
        }
        if let (StopReason::Throttled, Some(d)) = (self.reason(), self.retry_after()) {
            write!(f, ", for {} more", Secs(d))?;
        }
        if let Some(endpoint) = self.last_endpoint() {
            write!(f, "; last attempt to {endpoint}")?;
        }
        f.write_str(")")?;
        if self.timed_out() {
            f.write_str(": attempt timed out")
        } else if let Some(e) = self.last_error() {
            write!(f, ": {e}")
        } else {
            Ok(())
        }
    }
}

impl<E: fmt::Debug> fmt::Debug for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryError")
            .field("reason", &self.reason())
            .field("attempts", &self.attempts())
            .field("requeues", &self.requeues())
            .field("elapsed", &self.elapsed())
            .field("name", &self.name())
            .field("refusal", &self.refusal())
            .field("timed_out", &self.timed_out())
            .field("hedge", &self.hedge_stats())
            .field("last_error", &self.last_error())
            .finish()
    }
}

impl<E: Error + 'static> Error for RetryError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.last_error().map(|e| e as &(dyn Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_its_details_inline_and_the_error_stays_small() {
        let open = Refused::Control {
            by: "circuit breaker",
            retry_after: Some(Duration::from_millis(4200)),
        };
        let err = RetryError::<std::io::Error>::refused("circuit breaker")
            .with_refusal(open)
            .with_name("fetch");
        assert!(matches!(err.0, Repr::Refused { .. }));
        assert_eq!(
            err.to_string(),
            "fetch failed after 0 attempts in 0ms (refused by circuit breaker, for 4.2s more)"
        );
        // The same error, boxed, says the same; a change a refusal cannot
        // hold inline boxes it.
        let boxed =
            RetryError::<std::io::Error>::new(StopReason::Throttled, None, 0, Duration::ZERO)
                .with_refusal(open)
                .with_name("fetch");
        assert_eq!(boxed.to_string(), err.to_string());
        assert_eq!(format!("{boxed:?}"), format!("{err:?}"));
        let moved = err.with_reason(StopReason::Cancelled);
        assert!(matches!(moved.0, Repr::Full(_)));
        assert_eq!(
            (moved.reason(), moved.refused_by()),
            (StopReason::Cancelled, Some("circuit breaker"))
        );
        // Inline details cost bytes in every `Result`, so they are few.
        assert!(std::mem::size_of::<RetryError<std::io::Error>>() <= 48);
    }
}
