//! The generic cell rate algorithm, as pure arithmetic on nanoseconds.
//!
//! A quota admits `burst` cells at once and then one per `interval` (its
//! emission interval: the period over the count). Its whole state is one
//! number, the theoretical arrival time (TAT): when the quota would be
//! empty again if nothing more arrived. A call of cost `c` at `now` moves
//! it to `max(tat, now) + c × interval`, and is admitted if that is at most
//! `burst × interval` ahead of `now`. Nothing here reads a clock or shares
//! state: [`RateLimit`](super::RateLimit) does, with one compare-and-swap.

/// A quota's constants, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell {
    /// Nanoseconds per cell (the emission interval), at least 1.
    pub(crate) interval: u64,
    /// How far the TAT may run ahead of now: `burst × interval`.
    pub(crate) window: u64,
}

/// What one quota says of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Admitted now: the quota's new TAT.
    Admit(u64),
    /// Admissible in this many nanoseconds (then the TAT becomes `tat`,
    /// if the caller reserves the time).
    Later { wait: u64, tat: u64 },
    /// Never: the cost is above the burst.
    Never,
}

impl Cell {
    /// The cost of `cost` cells, in nanoseconds; `None` if above the burst.
    fn charge(self, cost: u32) -> Option<u64> {
        let charge = self.interval.checked_mul(u64::from(cost))?;
        (charge <= self.window).then_some(charge)
    }

    /// A call of `cost` at `now` against a quota at `tat`.
    pub(crate) fn step(self, tat: u64, now: u64, cost: u32) -> Step {
        let Some(charge) = self.charge(cost) else {
            return Step::Never;
        };
        let next = tat.max(now).saturating_add(charge);
        // Admitted if the quota runs at most a window ahead of now.
        let allowed_at = next.saturating_sub(self.window);
        if allowed_at <= now {
            Step::Admit(next)
        } else {
            Step::Later {
                wait: allowed_at - now,
                tat: next,
            }
        }
    }

    /// The TAT after a call of `cost` that had moved it to `tat` is given
    /// back (a combined limit whose other quota refused, a reservation
    /// cancelled): never before `now`, where a fresh quota starts.
    pub(crate) fn give_back(self, tat: u64, now: u64, cost: u32) -> u64 {
        let charge = self.interval.saturating_mul(u64::from(cost));
        tat.saturating_sub(charge).max(now)
    }

    /// Cells the quota could admit at `now`.
    pub(crate) fn remaining(self, tat: u64, now: u64) -> u64 {
        let ahead = tat.saturating_sub(now);
        self.window.saturating_sub(ahead) / self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 10 cells per second, a burst of 5.
    const CELL: Cell = Cell {
        interval: 100_000_000,
        window: 500_000_000,
    };

    #[test]
    fn a_fresh_quota_admits_its_burst_at_once_then_one_per_interval() {
        let (mut tat, now) = (0, 1_000_000_000);
        for _ in 0..5 {
            match CELL.step(tat, now, 1) {
                Step::Admit(next) => tat = next,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            CELL.step(tat, now, 1),
            Step::Later {
                wait: 100_000_000,
                tat: tat + 100_000_000
            }
        );
        assert!(matches!(
            CELL.step(tat, now + 100_000_000, 1),
            Step::Admit(_)
        ));
    }

    #[test]
    fn a_cost_above_the_burst_is_never_admitted_and_the_burst_itself_is() {
        assert_eq!(CELL.step(0, 10, 6), Step::Never);
        assert!(matches!(CELL.step(0, 10, 5), Step::Admit(_)));
        assert_eq!(CELL.step(0, 10, u32::MAX), Step::Never);
    }

    /// A reference model: the number of cells admitted in any window of
    /// `window` nanoseconds is at most `burst` + the cells the rate earns in it.
    fn reference(admitted: &[(u64, u32)], window: u64, interval: u64, burst: u64) -> bool {
        admitted.iter().enumerate().all(|(i, &(start, _))| {
            let cells: u64 = admitted[i..]
                .iter()
                .take_while(|(t, _)| *t < start + window)
                .map(|&(_, c)| u64::from(c))
                .sum();
            cells <= burst + window / interval
        })
    }

    proptest! {
        /// Over any sequence of calls, what is admitted never exceeds the
        /// burst plus what the rate earns, and a refusal's wait is exact:
        /// the same call at `now + wait` is admitted, a nanosecond earlier
        /// it is not.
        #[test]
        fn admissions_keep_the_quota_and_waits_are_exact(
            interval in 1_u64..1_000_000,
            burst in 1_u64..20,
            calls in proptest::collection::vec((0_u64..2_000_000, 1_u32..4), 1..200),
        ) {
            let cell = Cell { interval, window: interval * burst };
            let (mut tat, mut now) = (0_u64, 0_u64);
            let mut admitted = Vec::new();
            for (gap, cost) in calls {
                now += gap;
                match cell.step(tat, now, cost) {
                    Step::Admit(next) => {
                        prop_assert!(next > tat.max(now) || cost == 0);
                        tat = next;
                        admitted.push((now, cost));
                    }
                    Step::Later { wait, .. } => {
                        prop_assert!(matches!(cell.step(tat, now + wait, cost), Step::Admit(_)));
                        prop_assert!(!matches!(cell.step(tat, now + wait - 1, cost), Step::Admit(_)));
                    }
                    Step::Never => prop_assert!(u64::from(cost) > burst),
                }
            }
            prop_assert!(reference(&admitted, interval * 10, interval, burst));
        }

        /// Giving a call back restores what it took, never more than a
        /// fresh quota has.
        #[test]
        fn a_call_given_back_leaves_the_quota_as_it_was(
            interval in 1_u64..1_000_000,
            burst in 1_u64..20,
            tat in 0_u64..10_000_000,
            now in 0_u64..10_000_000,
            cost in 1_u32..4,
        ) {
            let cell = Cell { interval, window: interval * burst };
            if let Step::Admit(next) = cell.step(tat, now, cost) {
                prop_assert_eq!(cell.give_back(next, now, cost), tat.max(now));
                prop_assert_eq!(cell.remaining(cell.give_back(next, now, cost), now), cell.remaining(tat, now));
            }
        }
    }
}
