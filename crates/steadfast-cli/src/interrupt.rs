//! Stopping `steadfast run` from outside: Ctrl-C (SIGINT), and on Unix also
//! SIGTERM and SIGHUP, the signals a supervisor or a closed terminal sends.
//!
//! The first such signal cancels the run's [`CancelToken`] (the retry
//! executor stops at once, even mid-wait) and is remembered: the running
//! program is sent the same signal (then killed if it lingers, see
//! [`crate::child`]), and `steadfast run` exits with `128 + N` (130 for
//! Ctrl-C), as a shell reports a process that a signal ended.
//!
//! ```
//! use steadfast_cli::interrupt::Interrupt;
//! let interrupt = Interrupt::new();
//! assert_eq!(interrupt.signal(), None);
//! interrupt.trigger(15);
//! interrupt.trigger(2); // only the first one counts
//! assert!(interrupt.token().is_cancelled());
//! assert_eq!(interrupt.signal(), Some(15));
//! assert_eq!(interrupt.exit_code(), 143);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use steadfast::CancelToken;

/// The signal number of SIGINT (Ctrl-C), also what a cancellation without a
/// signal counts as.
pub const SIGINT: i32 = 2;

/// A cancellation that remembers the signal that caused it.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    token: CancelToken,
    /// The first signal received; 0 for none.
    signal: Arc<AtomicI32>,
}

impl Interrupt {
    /// Not yet triggered.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The token the retry executor and the child's wait listen to.
    #[must_use]
    pub fn token(&self) -> &CancelToken {
        &self.token
    }

    /// Records `signal` (if it is the first) and cancels.
    pub fn trigger(&self, signal: i32) {
        let _ = self
            .signal
            .compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire);
        self.token.cancel();
    }

    /// The first signal received, if any.
    #[must_use]
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::Acquire) {
            0 => None,
            s => Some(s),
        }
    }

    /// The signal to pass on to the running program: the one received, or
    /// SIGINT for a cancellation without one.
    #[must_use]
    pub fn forward_signal(&self) -> i32 {
        self.signal().unwrap_or(SIGINT)
    }

    /// `128 + N` for signal `N` (130 for Ctrl-C).
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        128 + self.forward_signal()
    }

    /// Routes SIGINT, SIGTERM and SIGHUP to [`trigger`](Self::trigger),
    /// from a thread of its own.
    ///
    /// # Errors
    /// When the handlers cannot be installed.
    #[cfg(unix)]
    pub fn install(&self) -> std::io::Result<()> {
        use signal_hook::consts::{SIGHUP, SIGTERM};
        let mut signals =
            signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, SIGTERM, SIGHUP])?;
        let this = self.clone();
        std::thread::Builder::new()
            .name("steadfast-signals".to_owned())
            .spawn(move || {
                for signal in signals.forever() {
                    this.trigger(signal);
                }
            })?;
        Ok(())
    }

    /// Routes Ctrl-C to [`trigger`](Self::trigger).
    ///
    /// # Errors
    /// When the handler cannot be installed.
    #[cfg(not(unix))]
    pub fn install(&self) -> std::io::Result<()> {
        let this = self.clone();
        ctrlc::set_handler(move || this.trigger(SIGINT)).map_err(std::io::Error::other)
    }
}
