//! Sets of exit codes on the command line: `1,2,10-20`.
//!
//! Grammar: comma-separated items, each an exit code (`0` to `255`) or an
//! inclusive range `LOW-HIGH` with `LOW <= HIGH`; blanks around items are
//! ignored. A process killed by signal `N` counts as exit code `128 + N`, as
//! in a shell's `$?`.
//!
//! ```
//! use steadfast_cli::codes::CodeSet;
//!
//! let set: CodeSet = "1,2,10-20".parse().unwrap();
//! assert!(set.contains(15) && !set.contains(3));
//! assert_eq!(set.to_string(), "1-2,10-20");
//! ```

use std::fmt;
use std::str::FromStr;

/// A set of exit codes (0 to 255).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CodeSet {
    bits: [u64; 4],
}

/// Why a set of exit codes did not parse; its `Display` is the user's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodesError {
    input: String,
    problem: String,
}

impl CodesError {
    fn new(input: &str, problem: impl Into<String>) -> Self {
        Self {
            input: input.to_owned(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for CodesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid exit codes {:?}: {} (expected a list like 1,2,10-20 of codes 0-255)",
            self.input, self.problem
        )
    }
}

impl std::error::Error for CodesError {}

impl CodeSet {
    /// The empty set.
    #[must_use]
    pub const fn new() -> Self {
        Self { bits: [0; 4] }
    }

    /// Adds `code`.
    pub fn insert(&mut self, code: u8) {
        self.bits[usize::from(code / 64)] |= 1 << (code % 64);
    }

    /// Whether `code` is in the set; codes outside 0-255 never are.
    #[must_use]
    pub fn contains(&self, code: i32) -> bool {
        match u8::try_from(code) {
            Ok(c) => self.bits[usize::from(c / 64)] & (1 << (c % 64)) != 0,
            Err(_) => false,
        }
    }

    /// Whether the set has no code.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bits == [0; 4]
    }

    /// The codes in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        (0..=u8::MAX).filter(|&c| self.contains(i32::from(c)))
    }
}

fn parse_code(input: &str, text: &str) -> Result<u8, CodesError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(CodesError::new(input, "an empty item"));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CodesError::new(
            input,
            format!("{text:?} is not an exit code"),
        ));
    }
    text.parse::<u8>()
        .map_err(|_| CodesError::new(input, format!("{text} is above 255")))
}

impl FromStr for CodeSet {
    type Err = CodesError;

    fn from_str(input: &str) -> Result<Self, CodesError> {
        if input.trim().is_empty() {
            return Err(CodesError::new(input, "empty"));
        }
        let mut set = Self::new();
        for item in input.split(',') {
            match item.split_once('-') {
                Some((low, _)) if low.trim().is_empty() => {
                    return Err(CodesError::new(
                        input,
                        format!(
                            "{:?} is not an exit code (codes run from 0 to 255; a range is LOW-HIGH)",
                            item.trim()
                        ),
                    ));
                }
                Some((_, high)) if high.trim().is_empty() => {
                    return Err(CodesError::new(
                        input,
                        format!("range {:?} has no end (a range is LOW-HIGH)", item.trim()),
                    ));
                }
                Some((low, high)) => {
                    let (low, high) = (parse_code(input, low)?, parse_code(input, high)?);
                    if low > high {
                        return Err(CodesError::new(
                            input,
                            format!("range {low}-{high} runs backwards"),
                        ));
                    }
                    for c in low..=high {
                        set.insert(c);
                    }
                }
                None => set.insert(parse_code(input, item)?),
            }
        }
        Ok(set)
    }
}

/// The canonical form: ascending, runs of two or more codes as ranges.
impl fmt::Display for CodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut codes = self.iter().peekable();
        while let Some(start) = codes.next() {
            let mut end = start;
            while let Some(&next) = codes.peek() {
                if u16::from(next) == u16::from(end) + 1 {
                    end = next;
                    codes.next();
                } else {
                    break;
                }
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_codes_and_ranges() {
        let set: CodeSet = " 1, 2 ,10-20,255".parse().unwrap();
        let codes: Vec<u8> = set.iter().collect();
        let mut expected = vec![1, 2];
        expected.extend(10..=20);
        expected.push(255);
        assert_eq!(codes, expected);
        assert!(!set.contains(-1) && !set.contains(256) && !set.contains(0));
        assert_eq!(set.to_string(), "1-2,10-20,255");
        let all: CodeSet = "0-255".parse().unwrap();
        assert_eq!(all.iter().count(), 256);
    }

    #[test]
    fn rejects_bad_lists() {
        for (input, needle) in [
            ("", "empty"),
            ("1,", "an empty item"),
            ("a", "is not an exit code"),
            ("-1", "\"-1\" is not an exit code (codes run from 0 to 255"),
            ("3-", "range \"3-\" has no end"),
            ("1-2-3", "is not an exit code"),
            ("256", "above 255"),
            ("20-10", "runs backwards"),
            ("+1", "is not an exit code"),
        ] {
            let err = input.parse::<CodeSet>().unwrap_err().to_string();
            assert!(err.contains(needle), "{input:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = s.parse::<CodeSet>();
        }

        #[test]
        fn never_panics_on_near_misses(s in "[0-9, -]{0,30}") {
            let _ = s.parse::<CodeSet>();
        }

        #[test]
        fn display_round_trips(codes in proptest::collection::vec(any::<u8>(), 1..40)) {
            let mut set = CodeSet::new();
            for c in &codes {
                set.insert(*c);
            }
            let text = set.to_string();
            prop_assert_eq!(text.parse::<CodeSet>(), Ok(set));
            for c in 0..=255u8 {
                prop_assert_eq!(set.contains(i32::from(c)), codes.contains(&c));
            }
        }
    }
}
