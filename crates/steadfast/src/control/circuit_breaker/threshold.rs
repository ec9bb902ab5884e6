//! The failure-ratio threshold, exact: "opens when failures / calls >=
//! ratio" holds at every boundary for the ratio the user wrote.
//!
//! A user writes a ratio as a decimal or a quotient (`0.1`, `2.0 / 3.0`),
//! which reaches us as the nearest `f64`: a little above or below the
//! fraction meant. The threshold is that fraction: the one with the
//! smallest denominator whose `f64` is the ratio given (`0.1` is 1/10,
//! `2.0 / 3.0` is 2/3, `1.0 / 7.0` is 1/7), found on the Stern–Brocot path
//! to the `f64`'s exact value. Comparisons are then integer arithmetic.

/// A failure ratio as an exact fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Threshold {
    /// `failures / calls >= num / den`, `num <= den < 2^53`.
    Fraction { num: u64, den: u64 },
    /// The `f64` itself, `mantissa / 2^shift`, when no fraction with a
    /// denominator below 2^53 rounds to it (`shift <= 117`).
    Dyadic { mantissa: u64, shift: u32 },
    /// A ratio below 2^-64: any failure reaches it (no window holds 2^64
    /// calls).
    AnyFailure,
}

/// Denominators below this convert to `f64` exactly.
const EXACT: u128 = 1 << 53;

impl Threshold {
    /// The threshold for `ratio`, in `(0, 1]` (checked by the builder).
    pub(super) fn new(ratio: f64) -> Self {
        if ratio < 2f64.powi(-64) {
            return Self::AnyFailure;
        }
        // ratio = mantissa / 2^shift exactly.
        let bits = ratio.to_bits();
        let exponent = i32::try_from((bits >> 52) & 0x7ff).unwrap_or(0);
        let (mut mantissa, mut shift) = if exponent == 0 {
            (bits & ((1 << 52) - 1), 1074_i32)
        } else {
            ((bits & ((1 << 52) - 1)) | (1 << 52), 1075 - exponent)
        };
        while shift > 0 && mantissa % 2 == 0 {
            mantissa /= 2;
            shift -= 1;
        }
        let shift = u32::try_from(shift.max(0)).unwrap_or(0);
        match simplest(ratio, u128::from(mantissa), 1u128 << shift) {
            Some((num, den)) => Self::Fraction { num, den },
            None => Self::Dyadic { mantissa, shift },
        }
    }

    /// Whether `failures` of `calls` reach the threshold.
    #[inline]
    pub(super) fn reached(self, failures: u64, calls: u64) -> bool {
        match self {
            Self::Fraction { num, den } => {
                u128::from(failures) * u128::from(den) >= u128::from(num) * u128::from(calls)
            }
            // failures >= ceil(mantissa * calls / 2^shift), in u128:
            // mantissa * calls < 2^117 and 2^shift <= 2^117.
            Self::Dyadic { mantissa, shift } => {
                let wanted = u128::from(mantissa) * u128::from(calls);
                let need = (wanted + (1u128 << shift) - 1) >> shift;
                u128::from(failures) >= need
            }
            Self::AnyFailure => failures > 0,
        }
    }
}

/// The fraction with the smallest denominator (below 2^53) whose `f64`
/// quotient is `ratio`, which is exactly `num / den` (`den` a power of
/// two): the first Stern–Brocot node on the path to `num / den` that
/// rounds to `ratio`. Along the path, each run of steps in one direction
/// (the semiconvergents of one continued-fraction term) approaches the
/// value monotonically, so the first node of a run that rounds to `ratio`
/// is found by bisection.
fn simplest(ratio: f64, num: u128, den: u128) -> Option<(u64, u64)> {
    let rounds =
        |p: u128, q: u128| q < EXACT && ((p as f64) / (q as f64)).to_bits() == ratio.to_bits();
    // The last two convergents of num/den, p_{k-2}/q_{k-2} and
    // p_{k-1}/q_{k-1}; the run of term k is (p0 + j p1) / (q0 + j q1).
    let (mut p0, mut q0, mut p1, mut q1) = (0u128, 1u128, 1u128, 0u128);
    let (mut a, mut b) = (num, den);
    while b != 0 {
        let term = a / b;
        let at = |j: u128| (p0 + j * p1, q0 + j * q1);
        // The run's nodes that can be tested exactly (denominator below 2^53).
        let cap = match q1 {
            0 => term,
            _ => term.min((EXACT - 1).saturating_sub(q0) / q1),
        };
        if cap >= 1 && rounds(at(cap).0, at(cap).1) {
            let (mut lo, mut hi) = (1u128, cap);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let (p, q) = at(mid);
                if rounds(p, q) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            let (p, q) = at(lo);
            return Some((u64::try_from(p).ok()?, u64::try_from(q).ok()?));
        }
        if cap < term {
            // Every node from here on has a denominator of 2^53 or more.
            return None;
        }
        (p0, q0, p1, q1) = (p1, q1, at(term).0, at(term).1);
        (a, b) = (b, a % b);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_fractions_users_write_are_found() {
        for (ratio, num, den) in [
            (0.5, 1, 2),
            (1.0, 1, 1),
            (0.1, 1, 10),
            (2.0 / 3.0, 2, 3),
            (1.0 / 7.0, 1, 7),
            (0.3, 3, 10),
            (0.999, 999, 1000),
            (1.0 / 1_000_003.0, 1, 1_000_003),
        ] {
            assert_eq!(
                Threshold::new(ratio),
                Threshold::Fraction { num, den },
                "{ratio}"
            );
        }
    }

    #[test]
    fn the_issues_boundaries_hold() {
        // 20 of 30 at 2/3: equal, so it opens.
        assert!(Threshold::new(2.0 / 3.0).reached(20, 30));
        assert!(!Threshold::new(2.0 / 3.0).reached(19, 30));
        // 142,858 of 1,000,007 is below 1/7: it stays closed.
        assert!(!Threshold::new(1.0 / 7.0).reached(142_858, 1_000_007));
        assert!(Threshold::new(1.0 / 7.0).reached(142_859, 1_000_007));
        assert!(Threshold::new(0.1).reached(1, 10));
        assert!(Threshold::new(1e-30).reached(1, u64::MAX));
        assert!(!Threshold::new(1e-30).reached(0, 10));
    }

    proptest! {
        /// For any ratio written as a quotient p / q, the threshold is
        /// exactly p / q (in lowest terms) at every count.
        #[test]
        fn a_written_quotient_is_the_threshold_exactly(
            q in 1u64..2_000_000,
            p_frac in 0.0f64..=1.0,
            calls in 1u64..10_000_000_000,
            f_frac in 0.0f64..=1.0,
        ) {
            let p = ((p_frac * q as f64) as u64).clamp(1, q);
            let failures = (f_frac * calls as f64) as u64;
            let t = Threshold::new(p as f64 / q as f64);
            let exact = u128::from(failures) * u128::from(q) >= u128::from(p) * u128::from(calls);
            prop_assert_eq!(t.reached(failures, calls), exact, "{}/{}", p, q);
            // And right at the boundary: the smallest count that reaches it.
            let need = (u128::from(p) * u128::from(calls)).div_ceil(u128::from(q));
            let need = u64::try_from(need).unwrap_or(u64::MAX);
            prop_assert!(t.reached(need, calls));
            prop_assert!(need == 0 || !t.reached(need - 1, calls));
        }

        /// For any ratio at all, the fraction found rounds back to it, and
        /// the rule is monotone in the failures.
        #[test]
        fn any_ratio_gets_a_fraction_that_rounds_to_it(
            ratio in (1e-12f64..=1.0),
            calls in 1u64..u64::MAX,
            failures in any::<u64>(),
        ) {
            match Threshold::new(ratio) {
                Threshold::Fraction { num, den } => {
                    prop_assert_eq!((num as f64 / den as f64).to_bits(), ratio.to_bits());
                }
                Threshold::Dyadic { mantissa, shift } => {
                    prop_assert_eq!((mantissa as f64 / 2f64.powi(shift as i32)).to_bits(), ratio.to_bits());
                }
                Threshold::AnyFailure => prop_assert!(false, "{} is above 2^-64", ratio),
            }
            let failures = failures.min(calls);
            let t = Threshold::new(ratio);
            if t.reached(failures, calls) && failures < calls {
                prop_assert!(t.reached(failures + 1, calls));
            }
        }
    }
}
