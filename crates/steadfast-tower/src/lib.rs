//! # steadfast-tower
//!
//! The [steadfast](steadfast) toolkit as tower middleware.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod attempt;
mod control;
pub mod deadline;
pub mod hedge;
mod policy;
mod prepare;
pub mod replay;
pub mod retry;
mod timer;

pub use control::{Control, ControlError, ControlFuture, ControlLayer};
pub use deadline::{DeadlineLayer, ServerDeadlineLayer, SetDeadlineHeaderLayer};
pub use hedge::{HedgeLayer, HedgeService};
pub use retry::{RetryLayer, RetryService};
pub use timer::{PreciseClock, PreciseSleep};
