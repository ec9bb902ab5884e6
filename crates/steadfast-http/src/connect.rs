//! Connecting within the attempt's deadline, so that an attempt the
//! deadline cuts off while its connection is still being made is known to
//! have sent nothing.
//!
//! reqwest makes a new connection inside the attempt's future, where the
//! attempt's deadline is the ambient one ([`steadfast::deadline::current`]);
//! this connector layer ends the connect there with [`ConnectCutOff`]. The
//! attempt then fails with a connect error rather than being dropped by
//! its timer, and the call's [`Error`](crate::Error) does not count it:
//! the server never saw it.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use steadfast::clock::DefaultClock;
use tower_service::Service;

/// The error a connect ends with when the attempt's deadline passes first.
///
/// ```
/// use steadfast_http::ConnectCutOff;
/// assert_eq!(
///     ConnectCutOff.to_string(),
///     "the deadline passed while connecting: nothing was sent"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectCutOff;

impl fmt::Display for ConnectCutOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the deadline passed while connecting: nothing was sent")
    }
}

impl StdError for ConnectCutOff {}

/// Whether `error` (or an error it wraps) is a [`ConnectCutOff`].
pub(crate) fn is_cut_off(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<ConnectCutOff>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// A connector layer for reqwest (`reqwest::ClientBuilder::connector_layer`)
/// that ends a connection attempt at the ambient deadline with
/// [`ConnectCutOff`].
///
/// The client that [`ClientBuilder::build`](crate::ClientBuilder::build)
/// makes has it; a `reqwest::Client` of your own
/// ([`ClientBuilder::reqwest_client`](crate::ClientBuilder::reqwest_client))
/// needs it added, or an attempt cut off while connecting is counted as
/// sent (reqwest cannot tell).
///
/// ```
/// let reqwest = reqwest::Client::builder()
///     .connector_layer(steadfast_http::ConnectWithinDeadline)
///     .build()?;
/// let client = steadfast_http::Client::builder().reqwest_client(reqwest).build()?;
/// # let _ = client;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectWithinDeadline;

impl<S> tower_layer::Layer<S> for ConnectWithinDeadline {
    type Service = DeadlineConnector<S>;

    fn layer(&self, inner: S) -> DeadlineConnector<S> {
        DeadlineConnector { inner }
    }
}

/// The connector [`ConnectWithinDeadline`] makes.
#[derive(Debug, Clone)]
pub struct DeadlineConnector<S> {
    inner: S,
}

type BoxError = Box<dyn StdError + Send + Sync>;

impl<S, Target> Service<Target> for DeadlineConnector<S>
where
    S: Service<Target, Error = BoxError>,
    S::Future: Send + 'static,
    S::Response: 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, target: Target) -> Self::Future {
        // A connect is rare beside the calls a pooled connection serves:
        // one box per connect, none per call.
        let deadline = steadfast::deadline::current();
        let connect = self.inner.call(target);
        match deadline {
            None => Box::pin(connect),
            Some(d) => Box::pin(async move {
                match steadfast::deadline::timeout_at(DefaultClock::default(), d, connect).await {
                    Ok(connected) => connected,
                    Err(_) => Err(Box::new(ConnectCutOff) as BoxError),
                }
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(Box<dyn StdError + Send + Sync>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("wrapped")
        }
    }

    impl StdError for Wrapper {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn a_cut_off_is_found_however_deep_it_is_wrapped() {
        let deep = Wrapper(Box::new(Wrapper(Box::new(ConnectCutOff))));
        assert!(is_cut_off(&deep));
        let other = Wrapper(Box::new(std::io::Error::other("refused")));
        assert!(!is_cut_off(&other));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connect_past_the_ambient_deadline_is_cut_off_and_one_within_it_is_not() {
        use std::time::Duration;
        use steadfast::clock::Clock;
        let slow = tower::service_fn(|wait: Duration| async move {
            tokio::time::sleep(wait).await;
            Ok::<_, BoxError>("connected")
        });
        let mut connector = tower_layer::Layer::layer(&ConnectWithinDeadline, slow);
        let d = steadfast::Deadline::after(DefaultClock::default().now(), Duration::from_secs(1));
        let late = steadfast::deadline::scope(d, || connector.call(Duration::from_secs(2)));
        let err = late.await.expect_err("cut off at the deadline");
        assert!(err.is::<ConnectCutOff>());
        let d = steadfast::Deadline::after(DefaultClock::default().now(), Duration::from_secs(1));
        let soon = steadfast::deadline::scope(d, || connector.call(Duration::from_millis(10)));
        assert_eq!(soon.await.expect("connected in time"), "connected");
        // Without an ambient deadline, nothing changes.
        let free = connector.call(Duration::from_secs(5)).await;
        assert_eq!(free.expect("connected"), "connected");
    }
}
