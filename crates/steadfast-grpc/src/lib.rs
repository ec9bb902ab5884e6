//! # steadfast-grpc
//!
//! gRPC on steadfast. This first part reads gRPC service configs (gRFC A6:
//! `methodConfig` with `retryPolicy`, `hedgingPolicy` and `timeout`, and
//! `retryThrottling`) exactly as A6 validates them, and turns them into the
//! core's policies: [`RetryPolicyConfig::to_policy`](config::RetryPolicyConfig::to_policy)
//! (the A6 backoff), [`HedgingPolicyConfig::to_policy`](config::HedgingPolicyConfig::to_policy)
//! and [`RetryThrottling::token_bucket`](config::RetryThrottling::token_bucket).
//! The tonic layer that applies them per call is not built yet.
#![warn(missing_docs)]

mod code;
pub mod config;

pub use code::{Code, UnknownCode};

/// The crate README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
