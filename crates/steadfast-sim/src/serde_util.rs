//! Serde helpers: durations as seconds (f64) in JSON.

use std::time::Duration;

use serde::Serializer;

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `serialize_with` signature
pub(crate) fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

#[allow(clippy::ref_option)] // serde's `serialize_with` signature
pub(crate) fn opt_secs<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}
