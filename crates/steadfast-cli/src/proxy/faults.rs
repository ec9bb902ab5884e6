//! The proxy's fault plan: which faults, at which rates, and the draw of
//! one connection's faults from the seed and the connection's number.

use std::fmt;
use std::time::Duration;

use steadfast::chaos::{Chaos, InjectionRate};

use super::ProxyArgs;

/// What `steadfast proxy` injects, checked once at the start.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// The seed of every draw.
    pub seed: u64,
    /// The share of connections closed at once.
    pub refuse: InjectionRate,
    /// The share of connections reset, and how long after the client's
    /// first bytes.
    pub reset: InjectionRate,
    /// How long after the client's first bytes a reset happens.
    pub reset_after: Duration,
    /// The share of connections stalled.
    pub stall: InjectionRate,
    /// How long a stalled connection is held (`None`: until the client
    /// closes it).
    pub stall_for: Option<Duration>,
    /// The latency added (to each chunk from the server; in HTTP mode
    /// before each response), its jitter, and its share.
    pub latency: Option<(Duration, Duration, InjectionRate)>,
    /// The bandwidth limit in bytes a second, and its share.
    pub bandwidth: Option<(u64, InjectionRate)>,
    /// HTTP mode: the injected status, its share, and its `Retry-After`.
    pub status: Option<(u16, InjectionRate, Option<Duration>)>,
    /// HTTP mode.
    pub http: bool,
}

/// A fault plan the command line cannot have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError(String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

impl FaultPlan {
    /// The plan `args` describe, with a random seed unless `--seed`.
    ///
    /// # Errors
    /// A fault of HTTP mode without `--http`, or one of TCP mode with it.
    pub fn from_args(args: &ProxyArgs) -> Result<Self, PlanError> {
        if !args.http && args.status.is_some() {
            return Err(PlanError(
                "--status answers HTTP requests: add --http (the proxy then speaks HTTP/1.1)"
                    .to_owned(),
            ));
        }
        if args.http && args.bandwidth.is_some() {
            return Err(PlanError(
                "--bandwidth shapes a TCP stream: leave out --http to use it".to_owned(),
            ));
        }
        Ok(Self {
            seed: args.seed.unwrap_or_else(|| fastrand::u64(..)),
            refuse: args.refuse.unwrap_or(InjectionRate::NEVER),
            reset: args.reset.unwrap_or(InjectionRate::NEVER),
            reset_after: args.reset_after.unwrap_or(Duration::ZERO),
            stall: args.stall.unwrap_or(InjectionRate::NEVER),
            stall_for: args.stall_for,
            latency: args.latency.map(|d| {
                (
                    d,
                    args.jitter.unwrap_or(Duration::ZERO),
                    args.latency_rate.unwrap_or(InjectionRate::ALWAYS),
                )
            }),
            bandwidth: args
                .bandwidth
                .map(|b| (b, args.bandwidth_rate.unwrap_or(InjectionRate::ALWAYS))),
            status: args.status.map(|s| {
                (
                    s,
                    args.status_rate.unwrap_or(InjectionRate::ALWAYS),
                    args.retry_after,
                )
            }),
            http: args.http,
        })
    }

    /// The faults of connection number `n` (counted from 0 in the order
    /// they were accepted): each fault rolled with its own draw, from a
    /// generator seeded by the plan's seed and `n` alone, so the same seed
    /// gives connection `n` the same faults on every run.
    #[must_use]
    pub fn connection(&self, n: u64) -> ConnectionFaults {
        let mut rng = connection_rng(self.seed, n);
        // Every draw is made, hit or not, in a fixed order: what one fault
        // rolls never depends on the rates of the others.
        let refuse = self.refuse.hits(rng.u64(..));
        let stall = self.stall.hits(rng.u64(..));
        let reset = self.reset.hits(rng.u64(..));
        let latency = rng.u64(..);
        let bandwidth = rng.u64(..);
        let kind = if refuse {
            Some(ConnectionFault::Refuse)
        } else if stall {
            Some(ConnectionFault::Stall(self.stall_for))
        } else if reset {
            Some(ConnectionFault::Reset(self.reset_after))
        } else {
            None
        };
        // In HTTP mode the latency is per request (the chaos value's).
        let latency = match self.latency {
            Some((delay, jitter, rate)) if !self.http && rate.hits(latency) => {
                Some((delay, jitter))
            }
            _ => None,
        };
        ConnectionFaults {
            kind,
            latency,
            bandwidth: self
                .bandwidth
                .and_then(|(b, rate)| rate.hits(bandwidth).then_some(b)),
            rng,
        }
    }

    /// HTTP mode's per-request faults, as the core's chaos value (the
    /// server chaos layer of steadfast-http drives it): the latency before
    /// a response and the injected status, each at its rate, seeded by
    /// the plan's seed; switched off when no request fault is asked for
    /// (or in TCP mode).
    ///
    /// # Errors
    /// None in practice: every rate was checked when parsed.
    pub fn request_chaos(&self) -> Result<Chaos, steadfast::ConfigError> {
        let asked = self.http && (self.latency.is_some() || self.status.is_some());
        let mut builder = Chaos::builder().enabled(asked).seed(self.seed);
        if let Some((delay, jitter, rate)) = self.latency {
            builder = builder.latency(rate.get(), delay).jitter(jitter);
        }
        if let Some((_, rate, _)) = self.status {
            builder = builder.outcome(rate.get(), || ());
        }
        builder.build()
    }
}

/// The generator of connection `n`'s draws.
fn connection_rng(seed: u64, n: u64) -> fastrand::Rng {
    // A splitmix64 step spreads consecutive connection numbers over the
    // generator's whole seed space.
    let mut z = seed ^ n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    fastrand::Rng::with_seed(z ^ (z >> 31))
}

/// The fault that decides a connection's fate, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionFault {
    /// Closed at once, before a byte is read.
    Refuse,
    /// Nothing forwarded; closed after the duration, or when the client
    /// closes it.
    Stall(Option<Duration>),
    /// Reset (RST) this long after the client's first bytes.
    Reset(Duration),
}

/// One connection's faults, and the generator of its jitter.
#[derive(Debug)]
pub struct ConnectionFaults {
    /// The fault that decides its fate.
    pub kind: Option<ConnectionFault>,
    /// The latency (and jitter) added to each chunk from the server.
    pub latency: Option<(Duration, Duration)>,
    /// The bandwidth limit, bytes a second, of what the server sends.
    pub bandwidth: Option<u64>,
    rng: fastrand::Rng,
}

impl ConnectionFaults {
    /// The delay of the next chunk: the latency plus a uniform 0..jitter
    /// (the core chaos value's rule); zero without a latency.
    pub fn next_delay(&mut self) -> Duration {
        match self.latency {
            None => Duration::ZERO,
            Some((delay, jitter)) if jitter.is_zero() => delay,
            Some((delay, jitter)) => {
                let nanos = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
                delay.saturating_add(Duration::from_nanos(self.rng.u64(..nanos)))
            }
        }
    }

    /// Whether anything of the data path is shaped (latency or bandwidth).
    #[must_use]
    pub fn shapes_data(&self) -> bool {
        self.latency.is_some() || self.bandwidth.is_some()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: ProxyArgs,
    }

    fn plan(flags: &[&str]) -> Result<FaultPlan, PlanError> {
        let mut argv = vec!["proxy", "--to", "127.0.0.1:9", "--seed", "7"];
        argv.extend_from_slice(flags);
        FaultPlan::from_args(&Wrap::try_parse_from(argv).unwrap().args)
    }

    /// How many of `n` connections `pick` says were hit.
    fn count(plan: &FaultPlan, n: u64, pick: impl Fn(&ConnectionFaults) -> bool) -> u64 {
        (0..n).filter(|&i| pick(&plan.connection(i))).count() as u64
    }

    /// Whether `hits` of `n` draws is within five standard deviations of
    /// the rate `p`.
    #[allow(clippy::cast_precision_loss)]
    fn within_bounds(hits: u64, n: u64, p: f64) -> bool {
        let mean = n as f64 * p;
        let sigma = (n as f64 * p * (1.0 - p)).sqrt();
        (hits as f64 - mean).abs() <= 5.0 * sigma
    }

    #[test]
    fn each_fault_hits_its_rate_over_100k_connections() {
        const N: u64 = 100_000;
        let p = plan(&[
            "--refuse",
            "0.1",
            "--stall",
            "0.2",
            "--reset",
            "0.3",
            "--latency",
            "10ms",
            "--latency-rate",
            "0.4",
            "--bandwidth",
            "1KiB",
            "--bandwidth-rate",
            "0.5",
        ])
        .unwrap();
        let refused = count(&p, N, |f| f.kind == Some(ConnectionFault::Refuse));
        assert!(within_bounds(refused, N, 0.1), "refused {refused}");
        // A stronger fault wins: a stall only where no refusal was drawn,
        // a reset only where neither was (each rolled independently).
        let stalled = count(&p, N, |f| matches!(f.kind, Some(ConnectionFault::Stall(_))));
        assert!(within_bounds(stalled, N, 0.9 * 0.2), "stalled {stalled}");
        let reset = count(&p, N, |f| matches!(f.kind, Some(ConnectionFault::Reset(_))));
        assert!(within_bounds(reset, N, 0.9 * 0.8 * 0.3), "reset {reset}");
        let slowed = count(&p, N, |f| f.latency.is_some());
        assert!(within_bounds(slowed, N, 0.4), "slowed {slowed}");
        let throttled = count(&p, N, |f| f.bandwidth.is_some());
        assert!(within_bounds(throttled, N, 0.5), "throttled {throttled}");
        // Independent draws compound: both data faults on about 0.4 * 0.5.
        let both = count(&p, N, |f| f.latency.is_some() && f.bandwidth.is_some());
        assert!(within_bounds(both, N, 0.2), "both {both}");
    }

    #[test]
    fn one_fault_draws_the_same_whatever_the_others_rates() {
        let alone = plan(&["--reset", "0.3"]).unwrap();
        let with_more = plan(&[
            "--reset",
            "0.3",
            "--latency",
            "1ms",
            "--latency-rate",
            "0.9",
        ])
        .unwrap();
        for n in 0..2_000 {
            assert_eq!(alone.connection(n).kind, with_more.connection(n).kind);
        }
    }

    #[test]
    fn the_same_seed_repeats_and_another_differs() {
        let a = plan(&["--refuse", "0.5"]).unwrap();
        let b = plan(&["--refuse", "0.5"]).unwrap();
        let fates = |p: &FaultPlan| (0..256).map(|n| p.connection(n).kind).collect::<Vec<_>>();
        assert_eq!(fates(&a), fates(&b));
        let mut c = a.clone();
        c.seed = 8;
        assert_ne!(fates(&a), fates(&c));
    }

    #[test]
    fn no_fault_asked_means_none_injected() {
        let p = plan(&[]).unwrap();
        for n in 0..10_000 {
            let f = p.connection(n);
            assert_eq!(f.kind, None);
            assert!(!f.shapes_data());
        }
        assert!(!p.request_chaos().unwrap().is_on());
    }

    #[test]
    fn jitter_stays_within_its_range() {
        let p = plan(&["--latency", "100ms", "--jitter", "20ms"]).unwrap();
        let mut f = p.connection(0);
        let delays: Vec<Duration> = (0..10_000).map(|_| f.next_delay()).collect();
        let (lo, hi) = (Duration::from_millis(100), Duration::from_millis(120));
        assert!(delays.iter().all(|d| (lo..hi).contains(d)));
        // Spread over the range, not stuck at one end.
        assert!(delays.iter().any(|d| *d < Duration::from_millis(102)));
        assert!(delays.iter().any(|d| *d > Duration::from_millis(118)));
        let mut fixed = plan(&["--latency", "5ms"]).unwrap().connection(3);
        assert_eq!(fixed.next_delay(), Duration::from_millis(5));
    }

    #[test]
    fn http_only_and_tcp_only_faults_are_refused_in_the_other_mode() {
        assert!(
            plan(&["--status", "503"])
                .unwrap_err()
                .to_string()
                .contains("--http")
        );
        assert!(plan(&["--http", "--bandwidth", "1KiB"]).is_err());
        let http = plan(&["--http", "--status", "503", "--latency", "5ms"]).unwrap();
        // HTTP mode's latency is per request: no connection gets it.
        assert!(http.connection(0).latency.is_none());
        let chaos = http.request_chaos().unwrap();
        assert!(chaos.is_on());
        assert_eq!(chaos.outcome_rate(), InjectionRate::ALWAYS);
    }
}
