//! A fleet sharing one quota on Redis: tokio tasks in this process and
//! separate processes, each checking the quota before every request to a
//! real axum server on 127.0.0.1, which counts what it receives. The quota
//! holds over every window, across processes.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steadfast::rate::{FleetRateLimit, FleetRefused, Quota};
use steadfast_redis::RedisQuota;
use support::Redis;

/// 20 a second, a burst of 5: one every 50 ms.
fn quota() -> Quota {
    Quota::per_second(20).unwrap().with_burst(5).unwrap()
}

const RUN: Duration = Duration::from_millis(1_500);
const CHILD_ENV: &str = "STEADFAST_FLEET_CHILD";

/// Calls the server as fast as the shared quota allows until `until`;
/// returns the checks it made of the quota and the calls admitted.
async fn caller(redis_url: &str, server: &str, until: Instant) -> (u64, u64) {
    let limit = FleetRateLimit::builder(RedisQuota::open(redis_url).unwrap())
        .name("provider")
        .quota(quota())
        .fail_closed()
        // Generous: a loaded test machine must not turn slow answers into refusals.
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let http = reqwest::Client::new();
    let (mut asked, mut admitted) = (0, 0);
    while Instant::now() < until {
        asked += 1;
        match limit.check("").await {
            Ok(()) => {
                admitted += 1;
                http.get(server).send().await.unwrap();
            }
            Err(FleetRefused::Quota(refused)) => {
                let wait = refused.retry_after.unwrap();
                assert!(wait <= Duration::from_millis(250), "{wait:?}");
                tokio::time::sleep(wait).await;
            }
            Err(other) => panic!("{other}"),
        }
    }
    (asked, admitted)
}

/// Run as a separate process by the test below (ignored otherwise).
#[tokio::test]
#[ignore = "a child process of several_processes_and_tasks_sharing_one_redis_quota_never_exceed_it"]
async fn child_caller() {
    let Ok(args) = std::env::var(CHILD_ENV) else {
        return;
    };
    let [redis_url, server, millis]: [&str; 3] =
        args.split(' ').collect::<Vec<_>>().try_into().unwrap();
    let until = Instant::now() + Duration::from_millis(millis.parse().unwrap());
    let (asked, admitted) = caller(redis_url, server, until).await;
    println!("admitted {admitted} asked {asked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_processes_and_tasks_sharing_one_redis_quota_never_exceed_it() {
    let Some(redis) = Redis::start() else { return };
    let arrivals = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let seen = Arc::clone(&arrivals);
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            seen.lock().unwrap().push(Instant::now());
            async { "ok" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "child_caller",
                    "--ignored",
                    "--nocapture",
                    "--quiet",
                ])
                .env(
                    CHILD_ENV,
                    format!("{} {server} {}", redis.url(), RUN.as_millis()),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    let until = Instant::now() + RUN;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (url, server) = (redis.url(), server.clone());
            tokio::spawn(async move { caller(&url, &server, until).await.1 })
        })
        .collect();
    let mut by_tasks = 0;
    for task in tasks {
        by_tasks += task.await.unwrap();
    }
    let (mut by_children, mut asked_by_children) = (Vec::new(), Vec::new());
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let out = String::from_utf8_lossy(&out.stdout);
        let line = out.lines().find(|l| l.starts_with("admitted ")).unwrap();
        let words: Vec<&str> = line.split(' ').collect();
        by_children.push(words[1].parse::<u64>().unwrap());
        asked_by_children.push(words[3].parse::<u64>().unwrap());
    }

    let mut arrivals = arrivals.lock().unwrap().clone();
    arrivals.sort();
    let total = arrivals.len() as u64;
    assert_eq!(total, by_tasks + by_children.iter().sum::<u64>());
    // Every process took part: each asked the shared quota (how many of
    // its checks won the race for a turn against the other callers is up
    // to the machine's scheduling, so it is not asserted).
    assert!(
        asked_by_children.iter().all(|&n| n > 0),
        "each process asked the quota: {asked_by_children:?}"
    );
    // Over any stretch t the quota admits at most burst + t / interval; a
    // request reaches the server a little after Redis admitted it (up to
    // one interval late on a loaded machine), so two more may land inside a
    // window. Six callers each on a quota of their own would send six times
    // the rate.
    let interval = quota().interval();
    let most = |t: Duration| 5 + (t.as_nanos() / interval.as_nanos()) as u64 + 2;
    for (i, &start) in arrivals.iter().enumerate() {
        for window in [Duration::from_millis(100), Duration::from_millis(500)] {
            let inside = arrivals[i..]
                .iter()
                .take_while(|&&t| t < start + window)
                .count() as u64;
            assert!(
                inside <= most(window),
                "{inside} requests in {window:?}, at most {}",
                most(window)
            );
        }
    }
    let span = *arrivals.last().unwrap() - arrivals[0];
    assert!(total <= most(span), "{total} in {span:?}");
    // And the quota was used, not starved: most of what it allows went through.
    assert!(
        total * 2 >= most(span),
        "only {total} of {} in {span:?}",
        most(span)
    );
}
