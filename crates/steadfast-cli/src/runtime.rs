//! The async runtime of the commands that need one (`get`, `proxy`): a
//! current-thread tokio runtime with its timer and I/O driver.

use std::future::Future;

use crate::exit::FAILURE;

/// Runs `job` to its exit status on a new current-thread runtime; if the
/// runtime cannot start, says so as `steadfast COMMAND` and returns
/// [`FAILURE`].
pub(crate) fn block_on(command: &str, job: impl Future<Output = i32>) -> i32 {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(job),
        Err(e) => {
            eprintln!("steadfast {command}: cannot start the async runtime: {e}");
            FAILURE
        }
    }
}
