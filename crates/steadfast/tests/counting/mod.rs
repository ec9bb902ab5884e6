//! The counting global allocator of the allocation tests: included with
//! `mod counting;` by each harness-less test binary that proves a path
//! allocates nothing (each binary gets its own allocator and statics).

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap allocations (and reallocations) the process makes while `f` runs.
pub fn allocations_during(f: impl FnOnce()) -> usize {
    let region = Region::new(GLOBAL);
    f();
    let stats = region.change();
    stats.allocations + stats.reallocations
}
