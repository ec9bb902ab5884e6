//! `RedisQuota` against a real `redis-server`: the same answers as the
//! core's local limit, expiry of idle keys, Redis killed, slow and hostile.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use steadfast::clock::VirtualClock;
use steadfast::rate::{
    Decision, FleetRateLimit, FleetRefused, Quota, QuotaBackend, QuotaCheck, RateLimit,
};
use steadfast_redis::RedisQuota;
use support::Redis;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Redis and the local limit, driven by the same calls on the same virtual
/// clock, give the same answers: admitted, or refused with the same wait to
/// the nanosecond (one quota or two combined, weighted calls, costs above a
/// burst).
#[test]
fn redis_answers_as_the_local_limit_for_the_same_calls() {
    let Some(redis) = Redis::start() else { return };
    let rt = runtime();
    let client = redis::Client::open(redis.url()).unwrap();
    let case = std::sync::atomic::AtomicU64::new(0);
    let strategy = (
        1_u32..50,
        1_u32..8,
        proptest::option::of((1_u32..200, 1_u32..20)),
        proptest::collection::vec((0_u64..300_000_000, 1_u32..5), 1..60),
    );
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    runner
        .run(&strategy, |(count, burst, second, calls)| {
            let mut quotas = vec![Quota::per_second(count).unwrap().with_burst(burst).unwrap()];
            if let Some((per_minute, burst)) = second {
                quotas.push(
                    Quota::per_minute(per_minute)
                        .unwrap()
                        .with_burst(burst)
                        .unwrap(),
                );
            }
            let clock = VirtualClock::manual();
            let local = quotas
                .iter()
                .fold(RateLimit::builder(), |b, q| b.quota(*q))
                .build_with_clock(clock.clone())
                .unwrap();
            let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let backend = rt.block_on(async {
                RedisQuota::builder(client.clone())
                    .prefix(format!("parity:{case}:"))
                    .clock(clock.clone())
                    .build()
                    .unwrap()
            });
            for (gap, cost) in calls {
                clock.advance(Duration::from_nanos(gap));
                let by_redis = rt
                    .block_on(backend.check(QuotaCheck::new("p", "k", &quotas, cost)))
                    .unwrap();
                let by_local = match local.check_n(cost) {
                    Ok(()) => Decision::Admit,
                    Err(refused) => Decision::Refuse {
                        retry_after: refused.retry_after,
                    },
                };
                prop_assert_eq!(by_redis, by_local);
            }
            Ok(())
        })
        .unwrap();
}

#[tokio::test]
async fn a_full_quota_key_expires_and_its_state_is_one_string_per_quota() {
    let Some(redis) = Redis::start() else { return };
    let quota = Quota::per_second(10).unwrap().with_burst(2).unwrap();
    let backend = RedisQuota::open(&redis.url()).unwrap();
    let check = || {
        backend.check(QuotaCheck::new(
            "exp",
            "tenant",
            std::slice::from_ref(&quota),
            1,
        ))
    };
    assert_eq!(check().await.unwrap(), Decision::Admit);
    assert_eq!(check().await.unwrap(), Decision::Admit);
    let Decision::Refuse {
        retry_after: Some(wait),
    } = check().await.unwrap()
    else {
        panic!("the third call of a burst of 2 is refused")
    };
    assert!(wait <= Duration::from_millis(100), "{wait:?}");
    let key = "{steadfast:rate:exp:tenant}:0";
    let ttl: i64 = redis.command(&format!("PTTL {key}"))[1..].parse().unwrap();
    assert!(
        (1..=200).contains(&ttl),
        "the key expires when the quota is full again: {ttl}"
    );
    let value = redis.command(&format!("GET {key}"));
    assert!(value.starts_with('$'), "a string: {value}");
}

fn fleet(redis_url: &str, closed: bool, name: &'static str) -> FleetRateLimit<RedisQuota> {
    let builder = FleetRateLimit::builder(RedisQuota::open(redis_url).unwrap())
        .name(name)
        .quota(Quota::per_second(1_000).unwrap());
    let builder = if closed {
        builder.fail_closed()
    } else {
        builder.fail_open(Quota::per_second(5).unwrap())
    };
    builder.build().unwrap()
}

/// Each check within a bound far above the limit's 20 ms: none hangs.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(2), f)
        .await
        .expect("a check hung past its timeout")
}

#[tokio::test]
async fn redis_killed_mid_run_open_serves_locally_closed_refuses_and_redis_is_used_again_when_back()
{
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let open = fleet(&redis.url(), false, "open");
    let closed = fleet(&redis.url(), true, "closed");
    for _ in 0..10 {
        bounded(open.check("k")).await.unwrap();
        bounded(closed.check("k")).await.unwrap();
    }
    assert_eq!((open.stats().admitted, closed.stats().admitted), (10, 10));

    let pid = redis.pid();
    redis.kill();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    // Fails open: the local limit's 5 (its burst), then refusals with a wait.
    let mut admitted = 0;
    for _ in 0..8 {
        match bounded(open.check("k")).await {
            Ok(()) => admitted += 1,
            Err(FleetRefused::Quota(refused)) => assert!(refused.retry_after.is_some()),
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(admitted, 5);
    let stats = open.stats();
    assert_eq!(
        (
            stats.backend_errors,
            stats.local_admitted,
            stats.local_refused
        ),
        (8, 5, 3)
    );
    // Fails closed: every call refused, saying why.
    for _ in 0..3 {
        let refused = bounded(closed.check("k")).await.unwrap_err();
        assert!(
            matches!(refused, FleetRefused::Unavailable { .. }),
            "{refused}"
        );
    }
    assert_eq!(closed.stats().closed_refusals, 3);

    redis.restart();
    for limit in [&open, &closed] {
        let before = limit.stats().admitted;
        let started = std::time::Instant::now();
        while limit.stats().admitted == before {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis was not used again"
            );
            let _ = bounded(limit.check("k")).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn a_slow_redis_is_given_up_on_at_the_timeout() {
    let Some(redis) = Redis::start() else { return };
    let closed = fleet(&redis.url(), true, "slow");
    bounded(closed.check("k")).await.unwrap(); // connected, script loaded
    let port = redis.port;
    let sleeper = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"DEBUG SLEEP 0.5\r\n").unwrap();
        let mut ok = [0; 5];
        s.read_exact(&mut ok).unwrap();
        ok
    });
    tokio::time::sleep(Duration::from_millis(50)).await; // the server is asleep now
    let started = std::time::Instant::now();
    let refused = bounded(closed.check("k")).await.unwrap_err();
    let waited = started.elapsed();
    let FleetRefused::Unavailable { error, .. } = &refused else {
        panic!("{refused}")
    };
    assert!(error.is_timeout(), "{error}");
    assert!(
        waited < Duration::from_millis(400),
        "gave up after {waited:?}, not at 20 ms"
    );
    assert_eq!(closed.stats().timeouts, 1);
    assert_eq!(&sleeper.join().unwrap(), b"+OK\r\n");
    // Redis awake again: answered by it.
    bounded(closed.check("k")).await.unwrap();
}

/// A server that answers every read with `reply`.
async fn hostile(reply: &'static [u8]) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("redis://{addr}/")
}

#[tokio::test]
async fn garbled_and_hostile_replies_are_errors_never_panics_or_hangs() {
    for reply in [
        &b"+OK\r\n"[..],
        b":42\r\n",
        b"$-1\r\n",
        b"-ERR no\r\n",
        b"*2\r\n:0\r\n:-5\r\n",
        b"*2\r\n:1\r\n:7\r\n",
        b"*2\r\n:0\r\n:9000000000000000000\r\n", // a wait of 285 years
        b"*3\r\n:1\r\n:0\r\n:0\r\n",
        b"\x00\xffgarbage\r\n\r\n",
        b"*99999999999\r\n",
        b"$99999999999\r\nxx",
        b"",
    ] {
        let url = hostile(reply).await;
        let limit = fleet(&url, true, "hostile");
        let refused = bounded(limit.check("k")).await.unwrap_err();
        assert!(
            matches!(refused, FleetRefused::Unavailable { .. }),
            "{:?}: {refused}",
            String::from_utf8_lossy(reply)
        );
        assert_eq!(limit.stats().backend_errors, 1);
    }
}
