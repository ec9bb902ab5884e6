//! An endpoint set under the hedger: the copies of a call go to distinct
//! endpoints while there are enough, and every pick is finished.

use std::collections::HashSet;
use std::sync::Mutex;

use super::*;
use crate::call::EndpointId;
use crate::endpoint::Endpoints;
use crate::hedge::Hedgeable;

#[tokio::test(start_paused = true)]
async fn copies_go_to_distinct_endpoints() {
    let set = Endpoints::builder()
        .seed(5)
        .outlier_detection(None)
        .build()
        .unwrap();
    for label in ["a:1", "b:1", "c:1", "d:1"] {
        set.insert(label, TokioClock.now());
    }
    let policy = HedgePolicy::builder(ms(10))
        .max_attempts(3)
        .endpoints(set.clone())
        .build()
        .unwrap();
    let seen: Arc<Mutex<Vec<EndpointId>>> = Arc::default();
    let report = {
        let seen = Arc::clone(&seen);
        (move |a: Attempt| {
            seen.lock().unwrap().push(a.endpoint.expect("picked"));
            async move {
                // Every copy is slow; the last answers first (copy n is
                // sent at 10(n - 1) ms and answers at 100 - 20n ms).
                tokio::time::sleep(ms(110 - 30 * u64::from(a.number))).await;
                Ok::<_, &str>(a.number)
            }
        })
        .hedge(policy)
        .clock(TokioClock)
        .report()
        .await
    };
    assert_eq!(report.result, Ok(3));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 3, "{seen:?}");
    // The winner's pick and the losers' (dropped) picks are all finished.
    assert!(
        set.snapshot(TokioClock.now())
            .iter()
            .all(|e| e.in_flight == 0)
    );
}
