//! `PreciseClock` on its real timer thread: sleeps end in order and never
//! early, under a runtime or none, and dropped sleeps do not wake anyone.

use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use steadfast::clock::AsyncClock;
use steadfast_tower::PreciseClock;

#[test]
fn sleeps_end_in_order_and_never_early_without_a_runtime() {
    let clock = PreciseClock::new().expect("timer thread");
    let start = Instant::now();
    let order = futures::executor::block_on(async {
        let mut sleeps: FuturesUnordered<_> = [5_u64, 1, 3, 2, 4]
            .into_iter()
            .map(|ms| {
                let sleep = clock.sleep(Duration::from_millis(ms));
                async move {
                    sleep.await;
                    (ms, start.elapsed())
                }
            })
            .collect();
        let mut order = Vec::new();
        while let Some(done) = sleeps.next().await {
            order.push(done);
        }
        order
    });
    let ms: Vec<u64> = order.iter().map(|(ms, _)| *ms).collect();
    assert_eq!(ms, [1, 2, 3, 4, 5]);
    for (ms, at) in order {
        assert!(
            at >= Duration::from_millis(ms),
            "{ms} ms sleep ended at {at:?}"
        );
    }
}

#[tokio::test]
async fn sleeps_work_under_tokio_and_a_dropped_sleep_wakes_nobody() {
    let clock = PreciseClock::new().expect("timer thread");
    let early = clock.sleep(Duration::from_millis(1));
    drop(early);
    let start = Instant::now();
    clock.sleep(Duration::from_millis(2)).await;
    assert!(start.elapsed() >= Duration::from_millis(2));
}
