//! The server model: fixed concurrency, a bounded queue, a latency
//! distribution, and an up/down switch for outages.
//!
//! **Capacity is concurrency**: at most `concurrency` requests are served at
//! once, each for a service time drawn from `latency`, so the throughput it
//! can sustain is `concurrency / mean(latency)` requests per second. A
//! request that finds every slot busy waits in a FIFO queue of at most
//! `queue_limit`; one that finds the queue full is rejected at once (a fast
//! failure, like an HTTP 503 from a load shedder). While the server is down
//! every arrival is rejected. Overload is modelled by lowering the capacity
//! with [`Server::set_capacity`].
//!
//! The model holds no clock: the caller schedules the completion of a started
//! request at `now + service` and calls [`Server::finish`] then.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::backoff::Rng;
//! use steadfast_sim::Latency;
//! use steadfast_sim::server::{Arrival, Server, ServerConfig};
//!
//! let config = ServerConfig {
//!     concurrency: 1,
//!     queue_limit: 1,
//!     latency: Latency::Constant(Duration::from_millis(10)),
//! };
//! let mut server = Server::new(&config)?;
//! let mut rng = Rng::with_seed(1);
//! assert!(matches!(server.arrive("a", &mut rng), Arrival::Started("a", 10_000_000)));
//! assert!(matches!(server.arrive("b", &mut rng), Arrival::Queued));
//! assert!(matches!(server.arrive("c", &mut rng), Arrival::Rejected("c")));
//! // "a" completes: "b" starts.
//! assert_eq!(server.finish(&mut rng), Some(("b", 10_000_000)));
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::collections::VecDeque;

use serde::Serialize;
use steadfast::backoff::Rng;

use crate::engine::Nanos;
use crate::error::check;
use crate::{Latency, SimError};

/// The shape of a server.
///
/// ```
/// use steadfast_sim::server::ServerConfig;
/// let config = ServerConfig { concurrency: 10, queue_limit: 0, latency: "const:5ms".parse()? };
/// assert_eq!(config.capacity_per_sec(), 2000.0);
/// # Ok::<(), steadfast_sim::SimError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerConfig {
    /// Requests served at once (at least 1).
    pub concurrency: u32,
    /// Requests that may wait for a free slot; more are rejected at once.
    pub queue_limit: u32,
    /// The service time of one request.
    pub latency: Latency,
}

impl Default for ServerConfig {
    /// 100 slots, a queue of 100, exponential service times with mean 10 ms:
    /// about 10,000 requests per second.
    fn default() -> Self {
        Self {
            concurrency: 100,
            queue_limit: 100,
            latency: Latency::Exponential {
                mean: std::time::Duration::from_millis(10),
            },
        }
    }
}

impl ServerConfig {
    /// Checks the settings.
    ///
    /// ```
    /// let config = steadfast_sim::server::ServerConfig { concurrency: 0, ..Default::default() };
    /// assert!(config.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), SimError> {
        check::at_least(
            "server config",
            "concurrency",
            self.concurrency.into(),
            1,
            "must be at least 1",
        )?;
        check::at_most(
            "server config",
            "queue_limit",
            u64::from(self.concurrency) + u64::from(self.queue_limit),
            check::MAX_SERVER_REQUESTS,
            "plus `concurrency` must be at most 10,000,000 (requests held at once)",
        )?;
        self.latency.validate()
    }

    /// [`validate`](Self::validate), and a mean service time above zero: what
    /// the scenarios that hold a load against the server's capacity
    /// ([`capacity_per_sec`](Self::capacity_per_sec)) need, as a zero mean
    /// makes that capacity infinite.
    ///
    /// ```
    /// use steadfast_sim::server::ServerConfig;
    /// let instant = ServerConfig { latency: "exp:0ms".parse()?, ..ServerConfig::default() };
    /// assert!(instant.validate().is_ok());
    /// assert!(instant.validate_capacity().is_err());
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    ///
    /// # Errors
    /// [`SimError::Config`] for the first broken rule.
    pub fn validate_capacity(&self) -> Result<(), SimError> {
        self.validate()?;
        if self.latency.mean().is_zero() {
            return Err(SimError::config(
                "server config",
                "latency",
                "must have a mean above zero (with none, the server's capacity, slots / mean \
                 service time, would be infinite)",
                format_args!("{}", self.latency),
            ));
        }
        Ok(())
    }

    /// The sustainable throughput in requests per second:
    /// `concurrency / mean(latency)` (infinite for zero latency).
    ///
    /// ```
    /// let config = steadfast_sim::server::ServerConfig::default();
    /// assert!((config.capacity_per_sec() - 10_000.0).abs() < 1e-6);
    /// ```
    #[must_use]
    pub fn capacity_per_sec(&self) -> f64 {
        f64::from(self.concurrency) / self.latency.mean().as_secs_f64()
    }
}

/// What happened to an arriving request (example in the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival<R> {
    /// Started at once; it completes after the given service time (ns).
    Started(R, Nanos),
    /// Waiting in the queue; it starts when [`Server::finish`] hands it out.
    Queued,
    /// Rejected at once: the server is down or its queue is full.
    Rejected(R),
}

/// A server with concurrency slots and a bounded FIFO queue (example in the
/// [module docs](self)).
#[derive(Debug, Clone)]
pub struct Server<R> {
    capacity: u32,
    full_capacity: u32,
    queue_limit: usize,
    latency: Latency,
    busy: u32,
    queue: VecDeque<R>,
    up: bool,
}

impl<R> Server<R> {
    /// A server that is up, idle, at full capacity.
    ///
    /// # Errors
    /// The configuration's own [`validate`](ServerConfig::validate) error.
    pub fn new(config: &ServerConfig) -> Result<Self, SimError> {
        config.validate()?;
        Ok(Self {
            capacity: config.concurrency,
            full_capacity: config.concurrency,
            queue_limit: usize::try_from(config.queue_limit).unwrap_or(usize::MAX),
            latency: config.latency.clone(),
            busy: 0,
            queue: VecDeque::new(),
            up: true,
        })
    }

    /// A request arrives.
    #[inline]
    pub fn arrive(&mut self, request: R, rng: &mut Rng) -> Arrival<R> {
        if !self.up {
            return Arrival::Rejected(request);
        }
        if self.busy < self.capacity {
            self.busy += 1;
            return Arrival::Started(request, self.latency.sample_nanos(rng));
        }
        if self.queue.len() < self.queue_limit {
            self.queue.push_back(request);
            return Arrival::Queued;
        }
        Arrival::Rejected(request)
    }

    /// A request in service completed: its slot frees, and the next queued
    /// request (if the capacity allows) starts, returned with its service time.
    #[inline]
    pub fn finish(&mut self, rng: &mut Rng) -> Option<(R, Nanos)> {
        self.finish_where(rng, |_| true)
    }

    /// [`finish`](Self::finish) for a server that looks at a request before
    /// it starts it: queued requests for which `keep` says `false` (for
    /// example, whose propagated deadline has passed) are dropped without
    /// being served, and the next one is looked at.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::backoff::Rng;
    /// use steadfast_sim::server::{Arrival, Server, ServerConfig};
    /// let config = ServerConfig { concurrency: 1, queue_limit: 5, latency: "const:1ms".parse()? };
    /// let mut server = Server::new(&config)?;
    /// let mut rng = Rng::with_seed(0);
    /// for request in [1, 2, 3] {
    ///     server.arrive(request, &mut rng);
    /// }
    /// // 1 completes; 2 is no longer wanted, so 3 starts.
    /// assert_eq!(server.finish_where(&mut rng, |&r| r != 2), Some((3, 1_000_000)));
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    #[inline]
    pub fn finish_where(
        &mut self,
        rng: &mut Rng,
        keep: impl FnMut(&R) -> bool,
    ) -> Option<(R, Nanos)> {
        self.busy = self.busy.saturating_sub(1);
        self.start_next(rng, keep)
    }

    #[inline]
    fn start_next(
        &mut self,
        rng: &mut Rng,
        mut keep: impl FnMut(&R) -> bool,
    ) -> Option<(R, Nanos)> {
        while self.busy < self.capacity {
            let next = self.queue.pop_front()?;
            if keep(&next) {
                self.busy += 1;
                return Some((next, self.latency.sample_nanos(rng)));
            }
        }
        None
    }

    /// Sets the capacity to `fraction` (0..=1, clamped) of the configured
    /// concurrency, rounded up to at least one slot when `fraction > 0`.
    /// Returns the queued requests that can start at once, with their
    /// service times. Requests in service are never cut short.
    ///
    /// ```
    /// use steadfast::backoff::Rng;
    /// use steadfast_sim::server::{Arrival, Server, ServerConfig};
    /// let mut server = Server::new(&ServerConfig { concurrency: 4, ..Default::default() })?;
    /// let mut rng = Rng::with_seed(0);
    /// assert!(server.set_capacity(0.25, &mut rng).is_empty()); // one slot left
    /// assert!(matches!(server.arrive(1, &mut rng), Arrival::Started(1, _)));
    /// assert!(matches!(server.arrive(2, &mut rng), Arrival::Queued));
    /// assert_eq!(server.set_capacity(1.0, &mut rng).len(), 1); // 2 starts
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    pub fn set_capacity(&mut self, fraction: f64, rng: &mut Rng) -> Vec<(R, Nanos)> {
        self.set_capacity_where(fraction, rng, |_| true)
    }

    /// [`set_capacity`](Self::set_capacity), dropping the queued requests
    /// for which `keep` says `false` instead of starting them (see
    /// [`finish_where`](Self::finish_where)).
    pub fn set_capacity_where(
        &mut self,
        fraction: f64,
        rng: &mut Rng,
        mut keep: impl FnMut(&R) -> bool,
    ) -> Vec<(R, Nanos)> {
        let fraction = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, 1.0)
        };
        let slots = (f64::from(self.full_capacity) * fraction).ceil() as u32;
        self.capacity = if fraction > 0.0 { slots.max(1) } else { 0 };
        std::iter::from_fn(|| self.start_next(rng, &mut keep)).collect()
    }

    /// Takes the server down (every arrival is rejected; queued requests are
    /// dropped and returned, so the caller can fail them) or brings it up.
    ///
    /// ```
    /// use steadfast::backoff::Rng;
    /// use steadfast_sim::server::{Arrival, Server, ServerConfig};
    /// let mut server = Server::new(&ServerConfig { concurrency: 1, ..Default::default() })?;
    /// let mut rng = Rng::with_seed(0);
    /// assert!(matches!(server.arrive(1, &mut rng), Arrival::Started(1, _)));
    /// assert!(matches!(server.arrive(2, &mut rng), Arrival::Queued));
    /// assert_eq!(server.set_up(false), vec![2]);
    /// assert_eq!(server.arrive(3, &mut rng), Arrival::Rejected(3));
    /// assert_eq!((server.busy(), server.queued(), server.is_up()), (1, 0, false));
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    pub fn set_up(&mut self, up: bool) -> Vec<R> {
        self.up = up;
        if up {
            Vec::new()
        } else {
            self.queue.drain(..).collect()
        }
    }

    /// Whether the server is up.
    #[must_use]
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Requests in service.
    #[must_use]
    pub fn busy(&self) -> u32 {
        self.busy
    }

    /// Requests waiting.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn server(concurrency: u32, queue_limit: u32) -> Server<u32> {
        Server::new(&ServerConfig {
            concurrency,
            queue_limit,
            latency: Latency::Constant(Duration::from_nanos(5)),
        })
        .unwrap()
    }

    #[test]
    fn overload_then_recovery_starts_queued_work() {
        let mut rng = Rng::with_seed(0);
        let mut s = server(4, 10);
        for i in 0..4 {
            assert_eq!(s.arrive(i, &mut rng), Arrival::Started(i, 5));
        }
        assert!(s.set_capacity(0.25, &mut rng).is_empty());
        assert_eq!(s.arrive(9, &mut rng), Arrival::Queued);
        // Three finish: still 1 busy, which is the whole reduced capacity.
        assert_eq!(s.finish(&mut rng), None);
        assert_eq!(s.finish(&mut rng), None);
        assert_eq!(s.finish(&mut rng), None);
        assert_eq!(s.arrive(10, &mut rng), Arrival::Queued);
        assert_eq!(s.set_capacity(1.0, &mut rng), vec![(9, 5), (10, 5)]);
        assert_eq!(s.busy(), 3);
    }

    #[test]
    fn down_rejects_and_drops_the_queue() {
        let mut rng = Rng::with_seed(0);
        let mut s = server(1, 10);
        assert!(matches!(s.arrive(1, &mut rng), Arrival::Started(1, _)));
        assert_eq!(s.arrive(2, &mut rng), Arrival::Queued);
        assert_eq!(s.set_up(false), vec![2]);
        assert_eq!(s.arrive(3, &mut rng), Arrival::Rejected(3));
        assert!(s.set_up(true).is_empty());
        assert!(s.is_up());
    }

    #[test]
    fn zero_concurrency_is_an_error() {
        let err = Server::<u32>::new(&ServerConfig {
            concurrency: 0,
            ..Default::default()
        });
        assert!(err.is_err());
    }
}
