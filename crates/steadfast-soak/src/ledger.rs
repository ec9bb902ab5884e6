//! What a server saw: every attempt of every call, in order, and what it
//! did with it. The checker judges each call's outcome against this record,
//! never against what the client says of itself.

use std::collections::HashMap;
use std::sync::Mutex;

/// One attempt as the server received it.
#[derive(Debug, Clone, Copy)]
pub struct Received<F> {
    /// What the server did with it.
    pub fault: F,
    /// Whether it was a non-idempotent request (an HTTP POST).
    pub post: bool,
    /// The `grpc-previous-rpc-attempts` header, if any.
    pub previous: Option<u32>,
}

/// Every attempt of every call a server received.
#[derive(Debug)]
pub struct Ledger<F> {
    calls: Mutex<HashMap<u64, Vec<Received<F>>>>,
}

impl<F> Default for Ledger<F> {
    fn default() -> Self {
        Self {
            calls: Mutex::new(HashMap::new()),
        }
    }
}

impl<F: Copy> Ledger<F> {
    /// Records an attempt of `call`; `decide` picks its fault from its
    /// number (1 for the first the server saw).
    pub fn receive(
        &self,
        call: u64,
        post: bool,
        previous: Option<u32>,
        decide: impl FnOnce(u32) -> F,
    ) -> F {
        let mut calls = self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let attempts = calls.entry(call).or_default();
        let number = u32::try_from(attempts.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        let fault = decide(number);
        attempts.push(Received {
            fault,
            post,
            previous,
        });
        fault
    }

    /// Every attempt of `call` the server received, in order.
    pub fn attempts(&self, call: u64) -> Vec<Received<F>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&call)
            .cloned()
            .unwrap_or_default()
    }

    /// Attempts received in all.
    pub fn total(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(Vec::len)
            .sum()
    }
}
