//! Deadlines: no copy starts past the call's deadline, given or ambient.

use std::future::IntoFuture;

use super::*;
use crate::call::StopReason;
use crate::hedge::Hedgeable;

#[tokio::test(start_paused = true)]
async fn no_copy_is_sent_that_would_start_past_the_deadline() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(5)
        .max_elapsed(ms(1200))
        .build()
        .unwrap();
    let err = s
        .op(vec![(FOREVER, Ok(0)); 5])
        .hedge(&policy)
        .classify(classify)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(s.times(), [(1, 0), (2, 500), (3, 1000)]);
    assert_eq!(s.elapsed(), ms(1200));
}

#[tokio::test(start_paused = true)]
async fn copies_run_under_the_ambient_deadline() {
    let d = crate::deadline::Deadline::after(TokioClock.now(), ms(800));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = Rc::clone(&seen);
    let hedged = (move |a: Attempt| {
        let seen = Rc::clone(&s2);
        async move {
            seen.borrow_mut()
                .push((a.number, a.deadline, crate::deadline::current()));
            tokio::time::sleep(ms(FOREVER)).await;
            Ok::<u32, ()>(a.number)
        }
    })
    .hedge(policy(3, 500));
    let err = crate::deadline::scope_async(d, hedged.into_future())
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.hedge_stats().unwrap().elapsed, ms(800));
    assert_eq!(
        *seen.borrow(),
        [(1, Some(d), Some(d)), (2, Some(d), Some(d))]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_brings_forward_a_copy_the_deadline_had_cut() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(4)
        .max_elapsed(ms(1200))
        .build()
        .unwrap();
    // Copy 4 would be due at 1500, past the deadline; copy 3 fails at 1100,
    // so copy 4 goes at once and answers in time.
    let r = s
        .op(vec![
            (FOREVER, Ok(1)),
            (FOREVER, Ok(2)),
            (100, Err(Fail::NonFatal(3))),
            (50, Ok(4)),
        ])
        .hedge(&policy)
        .classify(classify)
        .await;
    assert_eq!(r, Ok(4));
    assert_eq!(s.times(), [(1, 0), (2, 500), (3, 1000), (4, 1100)]);
}
