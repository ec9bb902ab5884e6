//! What the layer benches share: one call through a tower service as users
//! make it (readied, then called, awaited on the runtime).
#![allow(dead_code)]

use std::fmt::Debug;
use std::hint::black_box;

use tokio::runtime::Runtime;
use tower::{Service, ServiceExt};

/// A current-thread tokio runtime with its timer and I/O driver.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Readies `svc` and calls it with `1` on `rt`; the answer, kept from the
/// optimiser.
pub fn call<S>(rt: &Runtime, svc: &mut S) -> S::Response
where
    S: Service<u64>,
    S::Error: Debug,
{
    rt.block_on(async {
        let ready = svc.ready().await.expect("ready");
        black_box(ready.call(1).await.expect("answered"))
    })
}
