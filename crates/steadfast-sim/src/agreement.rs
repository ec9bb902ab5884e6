//! How a scenario's numbers compare with the published result it can be held
//! against.

use serde::Serialize;

/// A published result and whether this run's numbers agree with it. The
/// verdict is computed from the run's numbers by the scenario, never fixed.
///
/// The claim is the publication's, in its words and numbers; the criterion
/// is the test this run's numbers are held to (its thresholds are the
/// simulator's, not results), and the detail gives the numbers.
///
/// ```
/// let a = steadfast_sim::Agreement {
///     source: "Example 2024",
///     claim: "x is below y".into(),
///     criterion: "x < y".into(),
///     agrees: true,
///     detail: "x = 1, y = 2".into(),
/// };
/// assert_eq!(
///     a.to_string(),
///     "Example 2024: x is below y. Counted as agreeing when x < y. This run agrees: x = 1, y = 2."
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Agreement {
    /// The publication.
    pub source: &'static str,
    /// What it found, in one sentence.
    pub claim: String,
    /// The test this run is held to, with its thresholds: "counted as
    /// agreeing when ..." (empty when the claim says it all).
    pub criterion: String,
    /// Whether this run's numbers agree.
    pub agrees: bool,
    /// The numbers behind the verdict.
    pub detail: String,
}

impl std::fmt::Display for Agreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}.", self.source, self.claim)?;
        if !self.criterion.is_empty() {
            write!(f, " Counted as agreeing when {}.", self.criterion)?;
        }
        write!(
            f,
            " This run {}: {}.",
            if self.agrees {
                "agrees"
            } else {
                "does NOT agree"
            },
            self.detail
        )
    }
}
