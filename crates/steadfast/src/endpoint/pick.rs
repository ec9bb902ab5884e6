//! The pick: the power of two choices over the endpoints a call may use.

use crate::rng::Rng;

/// What a pick sees of a set of endpoints, by index.
pub trait Candidates {
    /// How many endpoints there are.
    fn count(&self) -> usize;
    /// Whether endpoint `i` may be picked (ready, and not ejected unless
    /// the set is in panic).
    fn eligible(&self, i: usize) -> bool;
    /// Endpoint `i`'s load: the lower, the better.
    fn load(&self, i: usize) -> f64;
}

/// Draws tried for each choice before a pick lists the eligible endpoints
/// instead: a set whose endpoints are mostly eligible picks in a few draws
/// without a pass over them all.
const DRAWS: usize = 8;

/// The power of two choices (Mitzenmacher): two distinct eligible
/// endpoints drawn at random, the one with the lower load picked (the first
/// drawn on a tie). One eligible endpoint is picked without a draw; none
/// gives `None`. Never picks an endpoint that is not eligible.
///
/// ```
/// use steadfast::backoff::Rng;
/// use steadfast::endpoint::{Candidates, power_of_two};
/// struct Three;
/// impl Candidates for Three {
///     fn count(&self) -> usize { 3 }
///     fn eligible(&self, i: usize) -> bool { i != 1 }
///     fn load(&self, i: usize) -> f64 { [5.0, 0.0, 1.0][i] }
/// }
/// let mut rng = Rng::with_seed(1);
/// for _ in 0..20 {
///     assert_eq!(power_of_two(&Three, &mut rng), Some(2)); // 1 is not eligible, 2 beats 0
/// }
/// ```
pub fn power_of_two(set: &impl Candidates, rng: &mut Rng) -> Option<usize> {
    let n = set.count();
    match n {
        0 => return None,
        1 => return set.eligible(0).then_some(0),
        _ => {}
    }
    let Some(a) = draw(set, n, rng, None) else {
        return scan(set, n, rng);
    };
    let Some(b) = draw(set, n, rng, Some(a)).or_else(|| scan_other(set, n, rng, a)) else {
        return Some(a);
    };
    Some(if set.load(b) < set.load(a) { b } else { a })
}

/// An eligible endpoint other than `not`, in at most [`DRAWS`] draws.
fn draw(set: &impl Candidates, n: usize, rng: &mut Rng, not: Option<usize>) -> Option<usize> {
    (0..DRAWS)
        .map(|_| index(rng, n))
        .find(|&i| Some(i) != not && set.eligible(i))
}

/// A pick among the eligible endpoints, found by a pass over them all.
#[cold]
fn scan(set: &impl Candidates, n: usize, rng: &mut Rng) -> Option<usize> {
    let eligible: Vec<usize> = (0..n).filter(|&i| set.eligible(i)).collect();
    match eligible.len() {
        0 => None,
        1 => Some(eligible[0]),
        m => {
            let i = index(rng, m);
            let mut j = index(rng, m - 1);
            if j >= i {
                j += 1;
            }
            let (a, b) = (eligible[i], eligible[j]);
            Some(if set.load(b) < set.load(a) { b } else { a })
        }
    }
}

/// An eligible endpoint other than `a`, found by a pass over them all.
#[cold]
fn scan_other(set: &impl Candidates, n: usize, rng: &mut Rng, a: usize) -> Option<usize> {
    let others: Vec<usize> = (0..n).filter(|&i| i != a && set.eligible(i)).collect();
    (!others.is_empty()).then(|| others[index(rng, others.len())])
}

/// A uniform index below `n` (`n` > 0).
fn index(rng: &mut Rng, n: usize) -> usize {
    // Lemire's multiply-shift: uniform enough for a pick (bias below 2^-32
    // for any set a process holds), and no division.
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}
