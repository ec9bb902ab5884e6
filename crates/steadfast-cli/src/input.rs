//! The standard input of `steadfast run`'s attempts.
//!
//! A program that reads its standard input consumes it: a second attempt
//! would read nothing. So a piped (or redirected) standard input is read
//! into memory before the first attempt, up to a limit, and *replayed* to
//! every attempt through a pipe of its own. Input larger than the limit, or
//! any input with `--stdin=once`, goes to the first attempt only (what was
//! already read, then the rest as it comes), and the run is not retried: a
//! retry would see a different input. A terminal is inherited by every
//! attempt, as without steadfast.
//!
//! ```
//! use std::io::Cursor;
//! use steadfast_cli::input::{Input, StdinMode};
//!
//! let input = Input::prepare(StdinMode::Replay, 1024, false, Cursor::new(b"data".to_vec()))?;
//! assert_eq!(input.replay_buffer(), Some(&b"data"[..]));
//! assert_eq!(input.not_replayable(), None);
//!
//! let big = Input::prepare(StdinMode::Replay, 2, false, Cursor::new(b"data".to_vec()))?;
//! assert!(big.not_replayable().unwrap().contains("larger than"));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{self, Read, Write};
use std::process::{ChildStdin, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

/// `--stdin`: how a non-terminal standard input reaches the attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum StdinMode {
    /// Read it into memory (up to `--stdin-limit`) and give every attempt the same input.
    #[default]
    Replay,
    /// Pass it through to the first attempt only, and never retry.
    Once,
}

/// The default of `--stdin-limit`: 16 MiB.
pub const DEFAULT_LIMIT: u64 = 16 << 20;

/// Parses a size in bytes for `--stdin-limit`: a whole number with an
/// optional binary unit, `B`, `K`/`KiB`, `M`/`MiB` or `G`/`GiB` (any case).
///
/// ```
/// use steadfast_cli::input::parse_size;
/// assert_eq!(parse_size("16MiB"), Ok(16 << 20));
/// assert_eq!(parse_size("512k"), Ok(512 << 10));
/// assert_eq!(parse_size("0"), Ok(0));
/// assert!(parse_size("1.5M").unwrap_err().contains("whole number"));
/// ```
///
/// # Errors
/// A message naming the input and the rule.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = |rule: &str| {
        format!(
            "invalid size {text:?}: {rule} (expected a whole number of bytes with an optional unit B, K, M, G, KiB, MiB or GiB, e.g. 16MiB)"
        )
    };
    let trimmed = text.trim();
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = trimmed.split_at(digits);
    if number.is_empty() {
        return Err(bad("it must start with a whole number"));
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ if unit.starts_with('.') => return Err(bad("a size is a whole number")),
        _ => return Err(bad("unknown unit")),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| bad("too large"))
}

/// The attempts' standard input, prepared once per run.
#[derive(Debug)]
pub struct Input {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// Every attempt inherits steadfast's standard input (a terminal).
    Inherit,
    /// Every attempt gets these bytes, then end of file.
    Replay(Arc<[u8]>),
    /// The first attempt gets steadfast's standard input; later ones none.
    Once {
        /// Why no retry is possible, for the user.
        why: &'static str,
        /// What was already read (over the limit), sent before the rest;
        /// `None` once the first attempt has taken it.
        pending: Mutex<Option<Vec<u8>>>,
    },
}

impl Input {
    /// Every attempt inherits standard input (for tests and terminals).
    #[must_use]
    pub const fn inherit() -> Self {
        Self {
            kind: Kind::Inherit,
        }
    }

    /// Prepares the input from `stdin` (steadfast's own standard input):
    /// inherited when `terminal`; otherwise, in [`StdinMode::Replay`], read
    /// up to `limit` bytes, replayed when it ended within them and passed on
    /// once when it did not.
    ///
    /// # Errors
    /// When reading `stdin` fails.
    pub fn prepare(
        mode: StdinMode,
        limit: u64,
        terminal: bool,
        stdin: impl Read,
    ) -> io::Result<Self> {
        if terminal {
            return Ok(Self::inherit());
        }
        if mode == StdinMode::Once {
            return Ok(Self {
                kind: Kind::Once {
                    why: "--stdin=once passes standard input to the first attempt only",
                    pending: Mutex::new(Some(Vec::new())),
                },
            });
        }
        let mut buffer = Vec::new();
        stdin
            .take(limit.saturating_add(1))
            .read_to_end(&mut buffer)?;
        let within = u64::try_from(buffer.len()).is_ok_and(|n| n <= limit);
        let kind = if within {
            Kind::Replay(buffer.into())
        } else {
            Kind::Once {
                why: "standard input is larger than --stdin-limit, so it goes to the first attempt only",
                pending: Mutex::new(Some(buffer)),
            }
        };
        Ok(Self { kind })
    }

    /// Why the run cannot be retried (`None`: it can).
    #[must_use]
    pub fn not_replayable(&self) -> Option<&'static str> {
        match &self.kind {
            Kind::Once { why, .. } => Some(why),
            _ => None,
        }
    }

    /// The bytes every attempt gets, when the input is replayed.
    #[must_use]
    pub fn replay_buffer(&self) -> Option<&[u8]> {
        match &self.kind {
            Kind::Replay(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// What the next attempt's standard input is set to; then give the
    /// spawned child's pipe to [`feed`](Self::feed).
    #[must_use]
    pub fn stdio(&self) -> Stdio {
        match &self.kind {
            Kind::Inherit => Stdio::inherit(),
            Kind::Replay(_) => Stdio::piped(),
            Kind::Once { pending, .. } => match &*lock(pending) {
                // Nothing read yet: the first attempt reads steadfast's own
                // standard input directly.
                Some(prefix) if prefix.is_empty() => Stdio::inherit(),
                Some(_) => Stdio::piped(),
                None => Stdio::null(),
            },
        }
    }

    /// Writes the attempt's input into `pipe` (the child's standard input,
    /// when [`stdio`](Self::stdio) asked for a pipe) from a thread of its
    /// own, which ends when everything is written or the child closes its
    /// end (it exited, or does not read).
    pub fn feed(&self, pipe: Option<ChildStdin>) {
        let source = match &self.kind {
            Kind::Inherit => None,
            Kind::Replay(bytes) => Some(Source::Bytes(Arc::clone(bytes))),
            Kind::Once { pending, .. } => lock(pending).take().map(Source::PrefixThenStdin),
        };
        let (Some(mut pipe), Some(source)) = (pipe, source) else {
            return;
        };
        // The thread is not joined: a child that leaves its input unread
        // but open (a background grandchild) must not hold up the run.
        let spawned = std::thread::Builder::new()
            .name("steadfast-stdin".to_owned())
            .spawn(move || {
                // A child that stops reading closes the pipe: a write error
                // (EPIPE) just ends the feeding.
                let _ = match source {
                    Source::Bytes(bytes) => pipe.write_all(&bytes),
                    Source::PrefixThenStdin(prefix) => pipe
                        .write_all(&prefix)
                        .and_then(|()| io::copy(&mut io::stdin().lock(), &mut pipe).map(drop)),
                };
            });
        // Without a thread the pipe is dropped: the child reads end of file.
        drop(spawned);
    }
}

enum Source {
    Bytes(Arc<[u8]>),
    PrefixThenStdin(Vec<u8>),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size(" 7 "), Ok(7));
        assert_eq!(parse_size("3 GiB"), Ok(3 << 30));
        assert_eq!(parse_size("2b"), Ok(2));
        for (bad, needle) in [
            ("", "whole number"),
            ("M", "whole number"),
            ("-1", "whole number"),
            ("1.5M", "whole number"),
            ("10 TB", "unknown unit"),
            ("99999999999999999999", "too large"),
            ("18446744073709551615K", "too large"),
        ] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains(needle), "{bad:?}: {err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_size_never_panics(s in ".*") {
            let _ = parse_size(&s);
        }

        #[test]
        fn whole_numbers_of_each_unit_parse(n in 0u64..1 << 30, unit in 0usize..4) {
            let (suffix, shift) = [("", 0), ("K", 10), ("MiB", 20), ("g", 30)][unit];
            proptest::prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n << shift));
        }
    }

    #[test]
    fn a_terminal_is_inherited() {
        let input = Input::prepare(StdinMode::Replay, 10, true, Cursor::new(vec![1; 100])).unwrap();
        assert_eq!(input.not_replayable(), None);
        assert_eq!(input.replay_buffer(), None);
    }

    #[test]
    fn input_up_to_the_limit_is_replayed() {
        let input =
            Input::prepare(StdinMode::Replay, 4, false, Cursor::new(b"abcd".to_vec())).unwrap();
        assert_eq!(input.replay_buffer(), Some(&b"abcd"[..]));
        let empty = Input::prepare(StdinMode::Replay, 4, false, Cursor::new(Vec::new())).unwrap();
        assert_eq!(empty.replay_buffer(), Some(&b""[..]));
    }

    #[test]
    fn input_over_the_limit_goes_once() {
        let input =
            Input::prepare(StdinMode::Replay, 3, false, Cursor::new(b"abcd".to_vec())).unwrap();
        assert!(input.not_replayable().unwrap().contains("--stdin-limit"));
        let zero = Input::prepare(StdinMode::Replay, 0, false, Cursor::new(b"a".to_vec())).unwrap();
        assert!(zero.not_replayable().is_some());
    }

    #[test]
    fn once_reads_nothing_itself() {
        struct Untouchable;
        impl Read for Untouchable {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                panic!("--stdin=once must not read standard input");
            }
        }
        let input = Input::prepare(StdinMode::Once, 10, false, Untouchable).unwrap();
        assert!(input.not_replayable().unwrap().contains("--stdin=once"));
    }

    #[test]
    fn read_errors_are_reported() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("bad descriptor"))
            }
        }
        assert!(Input::prepare(StdinMode::Replay, 10, false, Broken).is_err());
    }
}
