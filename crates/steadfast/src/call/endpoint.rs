//! The words for the endpoint an attempt went to: its identity, what its
//! outcome says of it, and the endpoints a call has tried.

use std::num::NonZeroU64;
use std::sync::Arc;

use super::Verdict;

/// An endpoint's identity in its set: given by
/// [`Endpoints::insert`](crate::endpoint::Endpoints::insert), never reused
/// by that set. An attempt made under a policy with an endpoint set knows
/// it ([`Attempt::endpoint`](crate::Attempt::endpoint)), and a failed call's
/// error lists the ones it tried ([`RetryError::endpoints`](crate::RetryError::endpoints)).
///
/// An `Option<EndpointId>` is one word, so an [`Attempt`](crate::Attempt)
/// carries it at the cost of eight bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(NonZeroU64);

impl EndpointId {
    /// The identity numbered `n` (a set numbers its endpoints from 0 in
    /// the order they are inserted). `u64::MAX` is the same as
    /// `u64::MAX - 1`: no set numbers that far.
    ///
    /// ```
    /// use steadfast::endpoint::EndpointId;
    /// assert_eq!(EndpointId::new(7).get(), 7);
    /// ```
    #[must_use]
    pub const fn new(n: u64) -> Self {
        match NonZeroU64::new(n.saturating_add(1)) {
            Some(id) => Self(id),
            None => unreachable!(),
        }
    }

    /// The number behind it.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0.get() - 1
    }
}

impl std::fmt::Debug for EndpointId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EndpointId").field(&self.get()).finish()
    }
}

/// What an attempt's outcome says about the endpoint that answered, for
/// outlier detection. The integration's classifier says which it is
/// ([`Classify::answer`](crate::Classify::answer)); the detection's model
/// says which count as failures
/// ([`OutlierDetection::is_failure`](crate::endpoint::OutlierDetection::is_failure)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// The call succeeded (HTTP 2xx/3xx, gRPC `OK`).
    Ok,
    /// The endpoint failed the call: a 5xx other than a gateway error, a
    /// gRPC error status, a reset after the request was sent.
    ServerError,
    /// A gateway error: HTTP 502, 503 or 504, or no connection at all
    /// (Envoy's gateway errors; also server errors).
    GatewayError,
    /// Not OK for a reason of the request's own: a 4xx, 429 included. A50
    /// counts it as a failure, Envoy does not.
    ClientError,
}

impl Answer {
    /// What a verdict alone says, for a classifier that knows nothing
    /// more: a success is [`Ok`](Self::Ok), a request that never got
    /// through ([`Verdict::Unsent`]) a [`GatewayError`](Self::GatewayError),
    /// anything else the endpoint's [`ServerError`](Self::ServerError).
    ///
    /// ```
    /// use steadfast::Verdict;
    /// use steadfast::endpoint::Answer;
    /// assert_eq!(Answer::of(Verdict::Success), Answer::Ok);
    /// assert_eq!(Answer::of(Verdict::Stop), Answer::ServerError);
    /// // A request that never got through: the endpoint could not be reached.
    /// assert_eq!(Answer::of(Verdict::Unsent), Answer::GatewayError);
    /// ```
    #[must_use]
    pub const fn of(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Success => Self::Ok,
            Verdict::Unsent => Self::GatewayError,
            _ => Self::ServerError,
        }
    }
}

/// How many endpoints a call remembers having tried: the retries of a
/// call go elsewhere than the last this many, and its error lists them.
pub(crate) const MAX_TRIED: usize = 8;

/// The endpoints a call's attempts went to, in the order sent (the last
/// eight of them), kept inline: recording one allocates nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TriedEndpoints {
    ids: [EndpointId; MAX_TRIED],
    len: u8,
    /// Where the oldest entry is once the list has wrapped.
    head: u8,
}

impl Default for TriedEndpoints {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl TriedEndpoints {
    /// No endpoint.
    pub(crate) const EMPTY: Self = Self {
        ids: [EndpointId::new(u64::MAX); MAX_TRIED],
        len: 0,
        head: 0,
    };

    /// Records an attempt sent to `id`.
    pub(crate) fn push(&mut self, id: EndpointId) {
        let len = usize::from(self.len);
        if len < MAX_TRIED {
            self.ids[len] = id;
            self.len += 1;
        } else {
            self.ids[usize::from(self.head)] = id;
            self.head = ((usize::from(self.head) + 1) % MAX_TRIED) as u8;
        }
    }

    /// The endpoints, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = EndpointId> + '_ {
        let len = usize::from(self.len);
        let head = usize::from(self.head);
        (0..len).map(move |i| self.ids[(head + i) % MAX_TRIED])
    }

    /// The endpoint of the last attempt (the one that answered last).
    #[must_use]
    pub(crate) fn last(&self) -> Option<EndpointId> {
        match usize::from(self.len) {
            0 => None,
            n if n < MAX_TRIED => Some(self.ids[n - 1]),
            _ => Some(self.ids[(usize::from(self.head) + MAX_TRIED - 1) % MAX_TRIED]),
        }
    }

    /// Whether none is.
    #[must_use]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same, as the slice a pick avoids (in storage order).
    pub(crate) fn avoid(&self) -> &[EndpointId] {
        &self.ids[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for TriedEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The endpoints a call's attempts went to, and the label of the last
/// one (for its error's message).
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Tried {
    ids: TriedEndpoints,
    last: Option<Arc<str>>,
}

impl Tried {
    /// Records an attempt sent to `id`, labelled `label`.
    pub(crate) fn push(&mut self, id: EndpointId, label: &Arc<str>) {
        self.ids.push(id);
        self.last = Some(Arc::clone(label));
    }

    /// The endpoints tried, oldest first.
    pub(crate) fn ids(&self) -> impl Iterator<Item = EndpointId> + '_ {
        self.ids.iter()
    }

    /// The list itself.
    #[cfg(test)]
    pub(crate) fn list(&self) -> TriedEndpoints {
        self.ids
    }

    /// The endpoint of the last attempt.
    pub(crate) fn last_id(&self) -> Option<EndpointId> {
        self.ids.last()
    }

    /// The same, as the slice a pick avoids (in storage order).
    pub(crate) fn avoid(&self) -> &[EndpointId] {
        self.ids.avoid()
    }

    /// The label of the endpoint the last attempt went to.
    pub(crate) fn last(&self) -> Option<&Arc<str>> {
        self.last.as_ref()
    }

    /// Whether no endpoint was tried.
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl std::fmt::Debug for Tried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.ids.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_eight_in_order() {
        let mut tried = Tried::default();
        let label: Arc<str> = Arc::from("a");
        for n in 0..11 {
            tried.push(EndpointId::new(n), &label);
        }
        let ids: Vec<u64> = tried.ids().map(EndpointId::get).collect();
        assert_eq!(ids, (3..11).collect::<Vec<_>>());
        assert_eq!(tried.avoid().len(), MAX_TRIED);
        assert_eq!(tried.last().map(|l| &**l), Some("a"));
        assert_eq!(tried.list().last(), Some(EndpointId::new(10)));
        assert_eq!(tried.list().iter().count(), MAX_TRIED);
        let mut short = TriedEndpoints::default();
        short.push(EndpointId::new(4));
        short.push(EndpointId::new(2));
        assert_eq!(short.last(), Some(EndpointId::new(2)));
        assert_eq!(format!("{short:?}"), "[EndpointId(4), EndpointId(2)]");
    }
}
