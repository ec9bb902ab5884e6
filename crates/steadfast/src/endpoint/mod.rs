//! Endpoints: the replicas a call may go to, and their health.
//!
//! The parts, each a plain value on injected time that an endpoint set
//! (and the simulator, and a test) drives:
//!
//! - [`PeakEwma`]: an endpoint's round-trip time, peak-weighted, raised by
//!   a server's hint ([`PeakEwma::penalize`]); its load is that time ×
//!   (calls in flight + 1);
//! - [`power_of_two`]: the pick, two random eligible endpoints and the less
//!   loaded one, over any [`Candidates`];
//! - [`OutlierDetection`] and [`Detector`]: when an endpoint is taken out
//!   of the picking (ejected) and when it returns, by gRFC A50's rules (the
//!   default) or Envoy's ([`OutlierDetection::envoy`]); [`Answer`] says
//!   what an attempt's outcome counts as;
//! - [`Endpoints`]: the set a call picks from, shared by every clone, made
//!   of the parts above; a pick is a [`Picked`], finished with the
//!   attempt's [`Answer`] and the server's hint, both of which the
//!   classifier says ([`Classify::answer`](crate::Classify::answer),
//!   [`Verdict::RetryAfter`](crate::Verdict::RetryAfter): [`Picked::judge`]);
//! - [`RetryCap`]: the retries and hedged copies in flight over the set,
//!   a share of its attempts in flight with a floor (Envoy's
//!   `retry_budget`), shared by every caller: a retry over it is not sent.
//!
//! A policy given a set ([`Limits::with_endpoints`](crate::policy::Limits::with_endpoints))
//! picks an endpoint for every attempt in its gate, after the rate and
//! concurrency limits; the attempt knows it ([`Attempt::endpoint`](crate::Attempt::endpoint)),
//! a retry goes elsewhere than where the call already went while another
//! endpoint is eligible, and the attempt's outcome reaches the endpoint
//! through its ticket.
//!
//! ```
//! use std::time::Instant;
//! use steadfast::endpoint::{Detector, Event, Host, Method, OutlierDetection};
//! // Five endpoints, one failing nine calls in ten: failure percentage ejects it.
//! let mut detector = Detector::new(OutlierDetection::a50().build()?);
//! let mut hosts = vec![Host::new(); 5];
//! for (i, host) in hosts.iter_mut().enumerate() {
//!     host.set_tally(if i == 3 { 10 } else { 100 }, if i == 3 { 90 } else { 0 });
//! }
//! let mut ejected = Vec::new();
//! detector.sweep(Instant::now(), &mut hosts, |e| ejected.push(e));
//! assert!(matches!(ejected[..], [Event::Ejected { host: 3, .. }]));
//! # Ok::<(), steadfast::ConfigError>(())
//! ```

mod detector;
mod load;
mod outlier;
mod pick;
mod retry_cap;
mod set;

pub use crate::call::{Answer, EndpointId};
pub use detector::{Detector, Event, Host, Method, Unenforced};
pub use load::{DEFAULT_DECAY, DEFAULT_RTT, MAX_PENALTY, MIN_PENALTY, PeakEwma};
pub use outlier::{
    Consecutive, FailurePercentage, Model, OutlierDetection, OutlierDetectionBuilder, SuccessRate,
};
pub use pick::{Candidates, power_of_two};
pub use retry_cap::RetryCap;
pub use set::{EndpointState, Endpoints, EndpointsBuilder, InFlight, Picked};

#[cfg(all(test, not(loom)))]
mod tests;
