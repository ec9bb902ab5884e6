//! The kinds of fallback: a trait for each executor, and the three stock
//! answers (a static value, a function, a backup service).

use std::future::{Future, Ready, ready};
use std::sync::Arc;

use super::Failure;
use crate::call::RetryError;

/// A fallback that answers at once: what the blocking executor takes
/// (and, through [`AsyncFallback`], the async executors too).
///
/// Return `failure.into_result()` to decline and hand the failure on.
pub trait Fallback<T, E> {
    /// The call's result, for a call that failed.
    ///
    /// # Errors
    /// The error the call returns instead: the failure's own to decline,
    /// or one of the fallback's making.
    fn fall_back(&self, failure: Failure<T, E>) -> Result<T, RetryError<E>>;
}

/// A fallback whose answer is a future (a backup service, say): what the
/// async executors and the integrations take. The stock [`Fallback`]s
/// ([`value`], [`from_fn`]) are ones too, answering at once; a type of your
/// own implements whichever its executors need.
pub trait AsyncFallback<T, E> {
    /// The future of the answer.
    type Future: Future<Output = Result<T, RetryError<E>>>;

    /// Starts answering for a call that failed.
    fn fall_back_async(&self, failure: Failure<T, E>) -> Self::Future;
}

/// An [`AsyncFallback`] for a [`Fallback`] type: its answer, ready at once.
macro_rules! answers_at_once {
    ($ty:ident<$p:ident> where $($bound:tt)*) => {
        impl<T, E, $p> AsyncFallback<T, E> for $ty<$p> where $($bound)* {
            type Future = Ready<Result<T, RetryError<E>>>;

            #[inline]
            fn fall_back_async(&self, failure: Failure<T, E>) -> Self::Future {
                ready(Fallback::fall_back(self, failure))
            }
        }
    };
}

impl<T, E, X: Fallback<T, E> + ?Sized> Fallback<T, E> for Arc<X> {
    #[inline]
    fn fall_back(&self, failure: Failure<T, E>) -> Result<T, RetryError<E>> {
        (**self).fall_back(failure)
    }
}

impl<T, E, X: AsyncFallback<T, E> + ?Sized> AsyncFallback<T, E> for Arc<X> {
    type Future = X::Future;

    #[inline]
    fn fall_back_async(&self, failure: Failure<T, E>) -> Self::Future {
        (**self).fall_back_async(failure)
    }
}

/// A static value: every failed call returns a clone of it. Made by [`value`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<V>(V);

/// A fallback that answers every failed call with a clone of `v`.
///
/// ```
/// use steadfast::fallback::{self, Failure, Fallback};
/// let f = fallback::value(Vec::<u8>::new());
/// let answer = f.fall_back(Failure::<Vec<u8>, ()>::from_result(Ok(vec![5, 0, 3])));
/// assert_eq!(answer.unwrap(), Vec::<u8>::new());
/// ```
#[must_use]
pub fn value<V: Clone>(v: V) -> Value<V> {
    Value(v)
}

impl<T: Clone, E> Fallback<T, E> for Value<T> {
    #[inline]
    fn fall_back(&self, _: Failure<T, E>) -> Result<T, RetryError<E>> {
        Ok(self.0.clone())
    }
}

impl<T: Clone, E> AsyncFallback<T, E> for Value<T> {
    type Future = Ready<Result<T, RetryError<E>>>;

    #[inline]
    fn fall_back_async(&self, _: Failure<T, E>) -> Self::Future {
        ready(Ok(self.0.clone()))
    }
}

/// A fallback computed from the failure. Made by [`from_fn`].
#[derive(Debug, Clone, Copy)]
pub struct FromFn<F>(F);

/// A fallback computed from the failure by `f`: from the last response,
/// the error, the reason the call stopped.
///
/// ```
/// use steadfast::fallback::{self, Failure, Fallback};
/// use steadfast::{RetryError, StopReason};
/// // A permanent error is handed on; anything else becomes a default.
/// let f = fallback::from_fn(|failure: Failure<u32, &'static str>| match failure.reason() {
///     StopReason::Permanent => failure.into_result(),
///     _ => Ok(0),
/// });
/// let exhausted = RetryError::new(StopReason::Exhausted, Some("busy"), 3, Default::default());
/// assert_eq!(f.fall_back(Failure::from_result(Err(exhausted))).unwrap(), 0);
/// let permanent = RetryError::new(StopReason::Permanent, Some("no such key"), 1, Default::default());
/// assert!(f.fall_back(Failure::from_result(Err(permanent))).is_err());
/// ```
#[must_use]
pub fn from_fn<F>(f: F) -> FromFn<F> {
    FromFn(f)
}

impl<T, E, F> Fallback<T, E> for FromFn<F>
where
    F: Fn(Failure<T, E>) -> Result<T, RetryError<E>>,
{
    #[inline]
    fn fall_back(&self, failure: Failure<T, E>) -> Result<T, RetryError<E>> {
        (self.0)(failure)
    }
}

answers_at_once!(FromFn<F> where F: Fn(Failure<T, E>) -> Result<T, RetryError<E>>);

/// A fallback that asks a backup service. Made by [`backup`].
#[derive(Debug, Clone, Copy)]
pub struct Backup<F>(F);

/// A fallback whose answer is the future `f` makes from the failure: a
/// call to a backup service, a read of a cache.
///
/// ```
/// use steadfast::fallback::{self, AsyncFallback, Failure};
/// use steadfast::RetryError;
/// # futures::executor::block_on(async {
/// let replica = fallback::backup(|_: Failure<String, std::io::Error>| async {
///     Ok::<_, RetryError<std::io::Error>>("from the replica".to_owned())
/// });
/// let answer = replica.fall_back_async(Failure::from_result(Ok(String::new()))).await;
/// assert_eq!(answer.unwrap(), "from the replica");
/// # });
/// ```
#[must_use]
pub fn backup<F>(f: F) -> Backup<F> {
    Backup(f)
}

impl<T, E, F, Fut> AsyncFallback<T, E> for Backup<F>
where
    F: Fn(Failure<T, E>) -> Fut,
    Fut: Future<Output = Result<T, RetryError<E>>>,
{
    type Future = Fut;

    #[inline]
    fn fall_back_async(&self, failure: Failure<T, E>) -> Fut {
        (self.0)(failure)
    }
}
