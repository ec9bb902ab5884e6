//! Small configurations, so the suite runs in seconds in debug builds.
#![allow(dead_code)]

use std::time::Duration;

use steadfast_sim::SimConfig;
use steadfast_sim::herd::HerdConfig;
use steadfast_sim::metastable::MetastableConfig;
use steadfast_sim::overload::{Bounds, OverloadConfig, OverloadStrategy};
use steadfast_sim::quota::QuotaConfig;
use steadfast_sim::server::ServerConfig;
use steadfast_sim::storm::{Incident, StormConfig};
use steadfast_sim::tail::TailConfig;

pub fn small_herd() -> HerdConfig {
    HerdConfig {
        clients: 300,
        outage: Duration::from_secs(3),
        accepts_per_window: 10,
        ..HerdConfig::with_backoff(Duration::from_millis(500), Duration::from_secs(20))
            .expect("valid backoff")
    }
}

pub fn small_storm() -> StormConfig {
    StormConfig {
        clients: 20,
        call_rate: 400.0,
        duration: Duration::from_secs(12),
        server: ServerConfig {
            concurrency: 8,
            queue_limit: 8,
            latency: "exp:10ms".parse().expect("valid latency"),
        },
        incident: Incident::outage(Duration::from_secs(3), Duration::from_secs(4)),
        ..StormConfig::default()
    }
}

pub fn small_tail() -> TailConfig {
    TailConfig {
        calls: 20_000,
        ..TailConfig::default()
    }
}

pub fn small_metastable() -> MetastableConfig {
    MetastableConfig {
        call_rate: 70.0,
        duration: Duration::from_secs(30),
        trigger: Incident::overload(Duration::from_secs(10), Duration::from_secs(5), 0.3),
        server: ServerConfig {
            concurrency: 1,
            queue_limit: 200,
            latency: "exp:10ms".parse().expect("valid latency"),
        },
        ..MetastableConfig::default()
    }
}

/// A server of 20 workers (1,000 requests/s) down to 5 from 8 s to 16 s,
/// 500 calls/s.
pub fn small_overload() -> OverloadConfig {
    let server = ServerConfig {
        concurrency: 20,
        queue_limit: 500,
        latency: "exp:20ms".parse().expect("valid latency"),
    };
    OverloadConfig {
        call_rate: 500.0,
        duration: Duration::from_secs(24),
        drop: Incident::overload(Duration::from_secs(8), Duration::from_secs(8), 0.25),
        strategies: OverloadStrategy::standard(server.concurrency, Bounds::new(1, 200)),
        server,
        ..OverloadConfig::default()
    }
}

/// 20 clients sharing a quota of 100/s, 160 calls/s (uneven), for 20 s.
pub fn small_quota() -> QuotaConfig {
    QuotaConfig {
        duration: Duration::from_secs(20),
        ..QuotaConfig::default()
    }
}

pub fn small() -> SimConfig {
    SimConfig {
        herd: Some(small_herd()),
        storm: Some(small_storm()),
        metastable: Some(small_metastable()),
        tail: Some(small_tail()),
        breaker: None,
        overload: Some(small_overload()),
        quota: Some(small_quota()),
        replicas: Some(small_replicas()),
    }
}

/// One bad replica of five, 200 calls/s for 10 s.
pub fn small_replicas() -> steadfast_sim::replicas::ReplicasConfig {
    steadfast_sim::replicas::ReplicasConfig {
        call_rate: 200.0,
        duration: Duration::from_secs(10),
        ..steadfast_sim::replicas::ReplicasConfig::default()
    }
}
