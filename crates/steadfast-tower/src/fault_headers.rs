//! Envoy's fault headers (`x-envoy-fault-*`), read once for every
//! protocol's server chaos layer: the delay a request asks for and the
//! share of requests it asks to delay or abort. The abort's value is the
//! protocol's (an HTTP status, a gRPC code): each layer reads its own
//! abort header and says here whether it found one.
//!
//! What Envoy's fault filter says of them, and what is kept: an integer
//! value (surrounding whitespace allowed), the first value of a header
//! that appears more than once, a percentage in `0..=100`. A value that
//! does not parse is ignored, as if the header were absent; a delay is
//! capped by the layer's `max_delay`. The rates asked are capped by the
//! configured ones when the layer draws them
//! ([`Chaos::draw_asked`](steadfast::chaos::Chaos::draw_asked)).
//!
//! ```
//! use std::time::Duration;
//! use http::HeaderMap;
//! use steadfast::chaos::InjectionRate;
//! use steadfast_tower::fault_headers::{self, DELAY_HEADER, DELAY_PERCENT_HEADER};
//!
//! let mut headers = HeaderMap::new();
//! headers.insert(DELAY_HEADER, "250".parse()?);
//! headers.insert(DELAY_PERCENT_HEADER, "not a number".parse()?);
//! let asked = fault_headers::asked(&headers, Duration::from_millis(100), false);
//! // Capped at 100 ms; the garbage percentage means "the configured rate".
//! assert_eq!(asked.delay, Some((Duration::from_millis(100), None)));
//! assert!(asked.abort.is_none());
//!
//! headers.insert(DELAY_PERCENT_HEADER, "40".parse()?);
//! let asked = fault_headers::asked(&headers, Duration::from_secs(1), true);
//! assert_eq!(asked.delay, Some((Duration::from_millis(250), Some(InjectionRate::percent(40)?))));
//! assert_eq!(asked.abort, Some(None)); // an abort, at the configured rate
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::Duration;

use http::HeaderMap;
use steadfast::chaos::{Asked, InjectionRate};

/// The header asking for an abort with this HTTP status (200..=599); a gRPC
/// server reads it too (Envoy prefers it to the gRPC code's header).
pub const ABORT_HTTP_HEADER: &str = "x-envoy-fault-abort-request";
/// The header giving the share of requests to abort, in percent (0..=100).
pub const ABORT_PERCENT_HEADER: &str = "x-envoy-fault-abort-request-percentage";
/// The header asking for a delay of this many milliseconds.
pub const DELAY_HEADER: &str = "x-envoy-fault-delay-request";
/// The header giving the share of requests to delay, in percent (0..=100).
pub const DELAY_PERCENT_HEADER: &str = "x-envoy-fault-delay-request-percentage";

/// The longest delay a request may ask for, unless a layer is set otherwise.
pub const DEFAULT_MAX_ASKED_DELAY: Duration = Duration::from_secs(10);

/// The non-negative integer in the (first) header `name`, if it is there
/// and parses.
///
/// ```
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-envoy-fault-abort-grpc-request", " 14 ".parse()?);
/// assert_eq!(steadfast_tower::fault_headers::number(&headers, "x-envoy-fault-abort-grpc-request"), Some(14));
/// headers.insert("x-envoy-fault-abort-grpc-request", "-1".parse()?);
/// assert_eq!(steadfast_tower::fault_headers::number(&headers, "x-envoy-fault-abort-grpc-request"), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub fn number(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// The percentage (0..=100) in the header `name`, as a rate, if it is
/// there and parses.
///
/// ```
/// use steadfast::chaos::InjectionRate;
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-envoy-fault-abort-request-percentage", "25".parse()?);
/// let name = steadfast_tower::fault_headers::ABORT_PERCENT_HEADER;
/// assert_eq!(steadfast_tower::fault_headers::percent(&headers, name), Some(InjectionRate::percent(25)?));
/// headers.insert(name, "101".parse()?);
/// assert_eq!(steadfast_tower::fault_headers::percent(&headers, name), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub fn percent(headers: &HeaderMap, name: &str) -> Option<InjectionRate> {
    InjectionRate::percent(u32::try_from(number(headers, name)?).ok()?).ok()
}

/// The HTTP status an abort header asks for, if it is one (200..=599):
/// what Envoy accepts in [`ABORT_HTTP_HEADER`].
///
/// ```
/// use steadfast_tower::fault_headers::{ABORT_HTTP_HEADER, abort_status};
/// let mut headers = http::HeaderMap::new();
/// headers.insert(ABORT_HTTP_HEADER, "503".parse()?);
/// assert_eq!(abort_status(&headers), Some(503));
/// headers.insert(ABORT_HTTP_HEADER, "199".parse()?);
/// assert_eq!(abort_status(&headers), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub fn abort_status(headers: &HeaderMap) -> Option<u16> {
    number(headers, ABORT_HTTP_HEADER)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (200..=599).contains(s))
}

/// The faults `headers` ask for: a delay (its milliseconds capped by
/// `max_delay`) at the share [`DELAY_PERCENT_HEADER`] asks, and, when
/// `abort` (the layer found a valid abort header of its protocol), an
/// abort at the share [`ABORT_PERCENT_HEADER`] asks. A share that is
/// absent or does not parse is `None`: the configured rate. Garbage is
/// ignored, never an error.
#[must_use]
pub fn asked(headers: &HeaderMap, max_delay: Duration, abort: bool) -> Asked {
    let mut asked = Asked::nothing();
    if let Some(ms) = number(headers, DELAY_HEADER) {
        asked.delay = Some((
            Duration::from_millis(ms).min(max_delay),
            percent(headers, DELAY_PERCENT_HEADER),
        ));
    }
    if abort {
        asked.abort = Some(percent(headers, ABORT_PERCENT_HEADER));
    }
    asked
}
