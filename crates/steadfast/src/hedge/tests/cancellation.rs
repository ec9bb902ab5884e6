//! Cancellation: a dropped or cancelled call drops every copy.

use std::future::IntoFuture;

use super::*;
use crate::call::StopReason;
use crate::cancel::CancelToken;
use crate::hedge::Hedgeable;

#[tokio::test(start_paused = true)]
async fn dropping_the_call_drops_every_copy() {
    let s = Script::new();
    let hedged = s
        .op(vec![(FOREVER, Ok(1)); 3])
        .hedge(policy(3, 100))
        .classify(classify);
    let r = tokio::time::timeout(ms(250), hedged.into_future()).await;
    assert!(r.is_err());
    assert_eq!(s.times().len(), 3);
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_the_call_mid_flight() {
    let s = Script::new();
    let token = CancelToken::new();
    let canceller = {
        let token = token.clone();
        async move {
            tokio::time::sleep(ms(700)).await;
            token.cancel();
        }
    };
    let hedged = s
        .op(vec![(FOREVER, Ok(1)); 3])
        .hedge(policy(3, 500))
        .classify(classify)
        .cancel_on(token);
    let (r, ()) = tokio::join!(hedged.into_future(), canceller);
    let err = r.unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(
        (
            err.hedge_stats().unwrap().sent,
            err.hedge_stats().unwrap().cancelled
        ),
        (2, 2)
    );
    assert_eq!(s.elapsed(), ms(700));
    assert_eq!(s.live(), 0);
}
