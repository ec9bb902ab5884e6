//! [`ConcurrencyLimit`]: how many attempts may be in flight at once, fixed
//! (a bulkhead) or adaptive, and its builder.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::acquire::Acquire;
use super::algorithm::{Algorithm, AlgorithmState, Window};
use super::permit::Permit;
use super::queue::{Left, Queue, ThreadWaker, Waiter};
use super::signal::Signal;
use super::window::{Sampler, WindowRule};
use crate::call::LimitRefused;
use crate::clock::{Clock, SystemClock};
use crate::config_error::ConfigError;
use crate::control::RefusingFlag;
use crate::sync::{AtomicU64, CachePadded, Ordering};

const COMPONENT: &str = "concurrency limit";

/// How many attempts may be in flight at once, shared by everything that
/// holds a clone (clones share one set of slots: a limit built once and
/// handed to every service clone, every connection, holds for all of them;
/// handing one limit to several dependencies makes them share a pool).
///
/// - **Fixed** ([`fixed`](Self::fixed)): a bulkhead of `n` slots.
/// - **Adaptive** ([`adaptive`](Self::adaptive)): an [`Algorithm`]
///   ([`Gradient2`](super::Gradient2), the default: [`ConcurrencyLimit::default`],
///   [`Aimd`](super::Aimd), [`Vegas`](super::Vegas)) moves the limit once
///   per sample window, from the latency of the attempts that finished in
///   it and the drop signals among them.
///
/// Taking a slot is one compare-and-swap on one counter, giving it back one
/// subtraction; neither allocates nor locks. A fixed limit reads no clock;
/// an adaptive one reads its clock when a slot is taken and when it is
/// given back (the attempt's latency), and closes a window (a lock no one
/// else waits on) once per window. A limit with a [queue](ConcurrencyLimitBuilder::queue)
/// touches the queue's lock only when every slot is taken or someone
/// waits.
///
/// ```
/// use steadfast::limit::{ConcurrencyLimit, Signal};
///
/// let pool = ConcurrencyLimit::fixed(2).name("payments").build()?;
/// let a = pool.try_acquire()?;
/// let b = pool.clone().try_acquire()?; // a clone shares the slots
/// let refused = pool.try_acquire().unwrap_err();
/// assert_eq!(refused.to_string(), "concurrency limit payments full: 2 in flight, limit 2");
/// a.finish(Signal::Success);
/// drop(b);
/// assert_eq!(pool.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimit(Arc<Shared>);

struct Shared {
    name: &'static str,
    in_flight: CachePadded<AtomicU64>,
    limit: AtomicU64,
    queue: Option<Queue>,
    adaptive: Option<Adaptive>,
    refusing: RefusingFlag,
    refused: AtomicU64,
    refusals: crate::telemetry::RefusalCounter,
}

/// The moving part of an adaptive limit.
struct Adaptive {
    time: Box<dyn Nanos>,
    sampler: Sampler,
    algorithm: Mutex<Box<dyn Algorithm>>,
    /// The last window closed, for `snapshot` (written at each close, under
    /// its own lock: never on a success path).
    last_window: Mutex<Option<Window>>,
    name: &'static str,
}

/// Nanoseconds on the limit's clock, precise (an attempt's latency is
/// often well under the millisecond a coarse clock would round it to).
trait Nanos: Send + Sync {
    fn nanos(&self) -> u64;
}

struct Precise<C> {
    clock: C,
    origin: Instant,
}

/// The system clock's time line read from the TSC (through quanta: scaled
/// to nanoseconds, calibrated once per process against the OS's monotonic
/// clock, which quanta reads instead where the TSC is not invariant).
struct Tsc {
    clock: quanta::Clock,
    origin: u64,
}

impl Nanos for Tsc {
    #[inline]
    fn nanos(&self) -> u64 {
        self.clock.delta_as_nanos(self.origin, self.clock.raw())
    }
}

/// The precise time base of an adaptive limit on `clock`: the TSC for the
/// system clock (a read of 9-11 ns where `Instant::now` costs 19-35 on a
/// VM), `now()` for every other clock (virtual time stays virtual).
fn precise<C: Clock>(clock: C) -> Box<dyn Nanos> {
    if (&clock as &dyn std::any::Any).is::<crate::clock::SystemClock>() {
        let tsc = quanta::Clock::new();
        let origin = tsc.raw();
        Box::new(Tsc { clock: tsc, origin })
    } else {
        Box::new(Precise {
            origin: clock.now(),
            clock,
        })
    }
}

impl<C: Clock> Nanos for Precise<C> {
    #[inline]
    fn nanos(&self) -> u64 {
        let since = self.clock.now().saturating_duration_since(self.origin);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// What a limit is doing, for telemetry.
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// let limit = ConcurrencyLimit::fixed(8).build()?;
/// let _held = limit.try_acquire()?;
/// let s = limit.snapshot();
/// assert_eq!((s.limit, s.in_flight, s.queued, s.refused, s.algorithm), (8, 1, 0, 0, None));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConcurrencyLimitSnapshot {
    /// The limit's name.
    pub name: &'static str,
    /// The limit now.
    pub limit: u32,
    /// Attempts holding a slot now.
    pub in_flight: u32,
    /// Attempts waiting in the queue now.
    pub queued: u32,
    /// Attempts refused since the limit was built.
    pub refused: u64,
    /// The adaptive algorithm's name; `None` for a fixed limit.
    pub algorithm: Option<&'static str>,
    /// The last sample window an adaptive limit closed (samples, drops,
    /// the most in flight, its average and least RTT): what its algorithm
    /// last moved the limit on. `None` before the first, and for a fixed
    /// limit.
    pub last_window: Option<Window>,
}

fn to_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl ConcurrencyLimit {
    /// A bulkhead: at most `slots` attempts in flight.
    pub fn fixed(slots: u32) -> ConcurrencyLimitBuilder {
        ConcurrencyLimitBuilder::new(Kind::Fixed(slots))
    }

    /// A limit that `algorithm` moves once per sample window.
    pub fn adaptive(algorithm: impl Algorithm) -> ConcurrencyLimitBuilder {
        ConcurrencyLimitBuilder::new(Kind::Adaptive(Box::new(algorithm)))
    }

    /// The limit's name, as its refusals and telemetry give it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// The limit now.
    #[must_use]
    pub fn limit(&self) -> u32 {
        to_u32(self.0.limit.load(Ordering::Relaxed))
    }

    /// Attempts holding a slot now.
    #[must_use]
    pub fn in_flight(&self) -> u32 {
        to_u32(self.0.in_flight.0.load(Ordering::Relaxed))
    }

    /// Whether an algorithm moves the limit.
    #[must_use]
    pub fn is_adaptive(&self) -> bool {
        self.0.adaptive.is_some()
    }

    /// The longest an attempt waits in the queue for a slot; `None` without
    /// a queue (a full limit refuses at once).
    #[must_use]
    pub fn max_queue_wait(&self) -> Option<Duration> {
        self.0.queue.as_ref().map(Queue::max_wait)
    }

    /// What the limit is doing.
    #[must_use]
    pub fn snapshot(&self) -> ConcurrencyLimitSnapshot {
        ConcurrencyLimitSnapshot {
            name: self.0.name,
            limit: self.limit(),
            in_flight: self.in_flight(),
            queued: to_u32(self.0.queue.as_ref().map_or(0, Queue::len)),
            refused: self.0.refused.load(Ordering::Relaxed),
            algorithm: self.0.adaptive.as_ref().map(|a| a.name),
            last_window: self
                .0
                .adaptive
                .as_ref()
                .and_then(|a| *a.last_window.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }

    /// What an adaptive limit's algorithm knows now (Gradient2's long and
    /// short RTT, Vegas's no-load RTT and queue, AIMD's last decision), read
    /// without changing anything; `None` for a fixed limit.
    ///
    /// ```
    /// use steadfast::limit::{AlgorithmState, ConcurrencyLimit, Vegas};
    /// let limit = ConcurrencyLimit::adaptive(Vegas::builder().build()?).build()?;
    /// assert_eq!(limit.algorithm_state(), Some(AlgorithmState::Vegas { no_load_rtt: None, queue: None }));
    /// assert_eq!(ConcurrencyLimit::fixed(4).build()?.algorithm_state(), None);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn algorithm_state(&self) -> Option<AlgorithmState> {
        let adaptive = self.0.adaptive.as_ref()?;
        let algorithm = adaptive
            .algorithm
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(algorithm.state())
    }

    /// A slot now, or the refusal: never waits, even with a queue.
    ///
    /// # Errors
    /// [`LimitRefused`] when every slot is taken.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit, LimitRefused> {
        self.try_take().ok_or_else(|| self.refusal(Duration::ZERO))
    }

    /// A slot now, if one is free; `None` is not counted as a refusal (nor
    /// reported): for an executor that will wait in the queue next, or hand
    /// the call to one that takes the slot itself.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// let limit = ConcurrencyLimit::fixed(1).build()?;
    /// let held = limit.try_take().expect("one slot is free");
    /// assert!(limit.try_take().is_none());
    /// assert_eq!(limit.snapshot().refused, 0);
    /// drop(held);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_take(&self) -> Option<Permit> {
        let in_flight = self.take_slot().ok()?;
        if self.0.refusing.get() {
            self.note_recovery(in_flight);
        }
        Some(self.permit(in_flight))
    }

    /// A slot, waiting in the queue for one if every slot is taken and the
    /// queue has room; see [`Acquire`] for who bounds the wait.
    pub fn acquire(&self) -> Acquire {
        Acquire::new(self.clone())
    }

    /// A slot, blocking the calling thread in the queue for up to
    /// `max_wait` (and at most the queue's own
    /// [`max_wait`](Self::max_queue_wait)) when every slot is taken. The
    /// wait is in real time, whatever clock the limit reads.
    ///
    /// # Errors
    /// [`LimitRefused`] when no slot came in time, or at once without a
    /// queue or with a full one.
    pub fn acquire_blocking(&self, max_wait: Duration) -> Result<Permit, LimitRefused> {
        if let Some(permit) = self.try_take() {
            return Ok(permit);
        }
        let (Some(queue), Some(waiter)) = (self.0.queue.as_ref(), self.join_queue()) else {
            return Err(self.refusal(Duration::ZERO));
        };
        let max_wait = max_wait.min(queue.max_wait());
        let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
        waiter.register(&waker);
        self.serve_queue();
        let start = Instant::now();
        loop {
            if waiter.granted() {
                return Ok(self.handed_over());
            }
            let waited = start.elapsed();
            if waited >= max_wait {
                return match self.leave(&waiter) {
                    Left::WithSlot => Ok(self.handed_over()),
                    Left::Empty => Err(self.refusal(waited)),
                };
            }
            std::thread::park_timeout(max_wait - waited);
        }
    }

    /// Takes a slot if one is free: the attempts in flight with it.
    #[inline]
    fn take_slot(&self) -> Result<u32, ()> {
        let in_flight = &self.0.in_flight.0;
        let mut current = in_flight.load(Ordering::Relaxed);
        loop {
            if current >= self.0.limit.load(Ordering::Relaxed) {
                return Err(());
            }
            match in_flight.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(to_u32(current + 1)),
                Err(now) => current = now,
            }
        }
    }

    /// The permit of a slot just taken, with `in_flight` attempts holding
    /// one: an adaptive limit notes how many, and when it started.
    #[inline]
    fn permit(&self, in_flight: u32) -> Permit {
        let started = match &self.0.adaptive {
            None => 0,
            Some(adaptive) => {
                adaptive.sampler.note_in_flight(in_flight);
                adaptive.time.nanos()
            }
        };
        Permit::new(self.clone(), started)
    }

    /// The permit of a slot the queue handed over (already counted).
    pub(super) fn handed_over(&self) -> Permit {
        self.permit(self.in_flight())
    }

    /// The refusal for now, counted; `waited` in the queue first.
    #[cold]
    #[inline(never)]
    pub(crate) fn refusal(&self, waited: Duration) -> LimitRefused {
        self.0.refused.fetch_add(1, Ordering::Relaxed);
        let refused = LimitRefused {
            by: self.0.name,
            in_flight: self.in_flight(),
            limit: self.limit(),
            waited,
        };
        if self.0.refusing.note(true, false) == Some(true) {
            tracing::info!(
                limit = self.0.name,
                in_flight = refused.in_flight,
                max = refused.limit,
                "concurrency limit started refusing"
            );
        }
        self.0.refusals.increment();
        refused
    }

    /// Lowers the refusing flag once the limit is clearly clear again
    /// (at most three quarters of its slots in use).
    #[cold]
    fn note_recovery(&self, in_flight: u32) {
        let limit = self.limit();
        let clear = u64::from(in_flight) * 4 <= u64::from(limit) * 3;
        if self.0.refusing.note(false, clear) == Some(false) {
            tracing::info!(
                limit = self.0.name,
                in_flight,
                max = limit,
                "concurrency limit recovered"
            );
        }
    }

    pub(super) fn join_queue(&self) -> Option<Arc<Waiter>> {
        self.0.queue.as_ref()?.join()
    }

    pub(super) fn leave(&self, waiter: &Arc<Waiter>) -> Left {
        match &self.0.queue {
            Some(queue) => queue.leave(waiter),
            None => Left::Empty,
        }
    }

    /// Hands free slots to the queue's waiters.
    pub(super) fn serve_queue(&self) {
        if let Some(queue) = &self.0.queue {
            queue.serve(
                || self.take_slot().is_ok(),
                || {
                    self.0.in_flight.0.fetch_sub(1, Ordering::SeqCst);
                },
            );
        }
    }

    /// Gives a slot back: the sample first (an adaptive limit), then the
    /// slot, then the queue (only when someone waits).
    #[inline]
    pub(super) fn release(&self, started: u64, signal: Signal) {
        if let Some(adaptive) = &self.0.adaptive
            && signal != Signal::Ignored
        {
            self.sample(adaptive, started, signal);
        }
        self.0.in_flight.0.fetch_sub(1, Ordering::SeqCst);
        if let Some(queue) = &self.0.queue
            && queue.len() > 0
        {
            self.serve_queue();
        }
    }

    fn sample(&self, adaptive: &Adaptive, started: u64, signal: Signal) {
        let now = adaptive.time.nanos();
        let rtt = (signal == Signal::Success).then(|| now.saturating_sub(started));
        if let Some(window) = adaptive.sampler.add(now, rtt) {
            self.close(adaptive, &window);
        }
    }

    /// The algorithm's step for a closed window, and the new limit.
    #[cold]
    #[inline(never)]
    fn close(&self, adaptive: &Adaptive, window: &Window) {
        // Only the thread that closed the window gets here; the lock is
        // shared only with `algorithm_state`, which holds it for a read: a
        // window is never skipped for it.
        let mut algorithm = adaptive
            .algorithm
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let new = algorithm.update(window);
        drop(algorithm);
        *adaptive
            .last_window
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(*window);
        let old = to_u32(self.0.limit.swap(u64::from(new), Ordering::Relaxed));
        crate::telemetry::limit_window(self.0.name, new, self.in_flight());
        crate::telemetry::limit_window_closed(
            self.0.name,
            window.samples,
            window.drops,
            window.rtt,
        );
        if new != old {
            tracing::debug!(
                limit = self.0.name,
                algorithm = adaptive.name,
                from = old,
                to = new,
                samples = window.samples,
                drops = window.drops,
                max_in_flight = window.max_in_flight,
                rtt_us = window
                    .rtt
                    .map(|r| u64::try_from(r.as_micros()).unwrap_or(u64::MAX)),
                "concurrency limit changed"
            );
            if new > old {
                self.serve_queue();
            }
        }
    }
}

impl Default for ConcurrencyLimit {
    /// The default adaptive limit: [`Gradient2`](super::Gradient2) with
    /// Netflix's published defaults (initial 20, min 20, max 200), the
    /// default window (1 s, 10 attempts), no queue, the system clock.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// let limit = ConcurrencyLimit::default();
    /// assert_eq!((limit.limit(), limit.snapshot().algorithm), (20, Some("gradient2")));
    /// ```
    fn default() -> Self {
        match Self::adaptive(super::Gradient2::default()).build() {
            Ok(limit) => limit,
            // The published defaults are valid: no configuration to refuse.
            Err(e) => unreachable!("the default limit is valid: {e}"),
        }
    }
}

impl fmt::Debug for ConcurrencyLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.snapshot(), f)
    }
}

enum Kind {
    Fixed(u32),
    Adaptive(Box<dyn Algorithm>),
}

/// Builds a [`ConcurrencyLimit`].
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::{ConcurrencyLimit, Gradient2};
///
/// let bulkhead = ConcurrencyLimit::fixed(32)
///     .name("search")
///     .queue(64, Duration::from_millis(50))
///     .build()?;
/// let adaptive = ConcurrencyLimit::adaptive(Gradient2::default())
///     .window(Duration::from_millis(500), 20)
///     .build()?;
/// assert_eq!((bulkhead.limit(), adaptive.limit()), (32, 20));
/// assert!(ConcurrencyLimit::fixed(0).build().is_err());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[must_use]
pub struct ConcurrencyLimitBuilder {
    name: &'static str,
    kind: Kind,
    queue: Option<(usize, Duration)>,
    rule: WindowRule,
}

impl fmt::Debug for ConcurrencyLimitBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("ConcurrencyLimitBuilder");
        s.field("name", &self.name);
        match &self.kind {
            Kind::Fixed(n) => s.field("fixed", n),
            Kind::Adaptive(a) => s.field("adaptive", a),
        };
        s.field("queue", &self.queue)
            .field("window", &self.rule)
            .finish()
    }
}

impl ConcurrencyLimitBuilder {
    fn new(kind: Kind) -> Self {
        Self {
            name: crate::call::DEFAULT_LIMIT_NAME,
            kind,
            queue: None,
            rule: WindowRule {
                min_time: 1_000_000_000,
                min_samples: 10,
                min_rtt: 100_000,
            },
        }
    }

    /// Names the limit in its refusals and telemetry (default
    /// `"concurrency limit"`).
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// A queue: when every slot is taken, up to `capacity` attempts wait
    /// for one, in order, each for at most `max_wait` (and never past its
    /// call's deadline). Without one (the default) a full limit refuses at
    /// once.
    pub fn queue(mut self, capacity: usize, max_wait: Duration) -> Self {
        self.queue = Some((capacity, max_wait));
        self
    }

    /// An adaptive limit's sample window: it closes, and the algorithm
    /// moves the limit, once it is at least `min_time` long and holds at
    /// least `min_samples` finished attempts (default 1 s and 10, as
    /// Netflix's windowed limit).
    pub fn window(mut self, min_time: Duration, min_samples: u32) -> Self {
        self.rule.min_time = u64::try_from(min_time.as_nanos()).unwrap_or(u64::MAX);
        self.rule.min_samples = min_samples;
        self
    }

    /// Successes faster than this are not samples for an adaptive limit
    /// (default 100 µs, as Netflix's windowed limit): a response served
    /// from a cache says nothing of the dependency's capacity. Drops are
    /// always samples.
    pub fn min_rtt(mut self, min: Duration) -> Self {
        self.rule.min_rtt = u64::try_from(min.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// The limit, on the system clock.
    ///
    /// # Errors
    /// As [`build_with_clock`](Self::build_with_clock).
    pub fn build(self) -> Result<ConcurrencyLimit, ConfigError> {
        self.build_with_clock(SystemClock)
    }

    /// The limit, timing attempts on `clock` (a
    /// [`VirtualClock`](crate::clock::VirtualClock) in tests and the
    /// simulator; a fixed limit never reads it).
    ///
    /// # Errors
    /// A [`ConfigError`] for a fixed limit of 0, a queue of capacity 0 or
    /// with a zero `max_wait`, or a window of 0 samples.
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<ConcurrencyLimit, ConfigError> {
        let queue = match self.queue {
            None => None,
            Some((0, _)) => {
                return Err(ConfigError::new(
                    COMPONENT,
                    "queue",
                    "capacity must be at least 1",
                    0,
                ));
            }
            Some((_, wait)) if wait.is_zero() => {
                return Err(ConfigError::new(
                    COMPONENT,
                    "queue",
                    "max_wait must be greater than zero",
                    wait,
                ));
            }
            Some((capacity, wait)) => Some(Queue::new(capacity, wait)),
        };
        let (limit, adaptive) = match self.kind {
            Kind::Fixed(0) => {
                return Err(ConfigError::new(
                    COMPONENT,
                    "fixed",
                    "must be at least 1 slot",
                    0,
                ));
            }
            Kind::Fixed(n) => (n, None),
            Kind::Adaptive(algorithm) => {
                if self.rule.min_samples == 0 {
                    return Err(ConfigError::new(
                        COMPONENT,
                        "window",
                        "min_samples must be at least 1",
                        0,
                    ));
                }
                let time = precise(clock);
                let adaptive = Adaptive {
                    sampler: Sampler::new(self.rule, time.nanos()),
                    time,
                    name: algorithm.name(),
                    algorithm: Mutex::new(algorithm),
                    last_window: Mutex::new(None),
                };
                let limit = adaptive
                    .algorithm
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .limit();
                (limit.max(1), Some(adaptive))
            }
        };
        crate::telemetry::limit_window(self.name, limit, 0);
        Ok(ConcurrencyLimit(Arc::new(Shared {
            name: self.name,
            in_flight: CachePadded(AtomicU64::new(0)),
            limit: AtomicU64::new(u64::from(limit)),
            queue,
            adaptive,
            refusing: RefusingFlag::new(),
            refused: AtomicU64::new(0),
            refusals: crate::telemetry::RefusalCounter::new(self.name),
        })))
    }
}
