//! `steadfast schedule`: the delays a backoff schedule gives, computed the
//! way the retry policy draws them (a fresh [`ScheduleState`] and an
//! [`Rng`] seeded with the seed), so `steadfast run --seed S` waits exactly
//! the delays that `steadfast schedule --seed S` prints.

use std::io::Write;
use std::time::Duration;

use steadfast::backoff::{Rng, Schedule, ScheduleState};

use crate::cli::ScheduleArgs;
use crate::plot::{self, Series};
use crate::{exit, table};

/// The most delays one `steadfast schedule` computes (samples x attempts),
/// so that a typo cannot ask for terabytes.
pub const MAX_DELAYS: u64 = 20_000_000;

/// The first `retries` delays of `schedule` under `seed` (fewer when the
/// schedule runs out).
#[must_use]
pub fn delays<S: Schedule + ?Sized>(schedule: &S, seed: u64, retries: u32) -> Vec<Duration> {
    let mut state = ScheduleState::new();
    let mut rng = Rng::with_seed(seed);
    (0..retries)
        .map_while(|_| schedule.next_delay(&mut state, &mut rng))
        .collect()
}

/// Runs `steadfast schedule`; returns the exit code.
pub fn run(args: &ScheduleArgs) -> i32 {
    let schedule = match crate::backoff::build(&args.backoff, None) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("steadfast: {e}");
            return exit::USAGE;
        }
    };
    let samples = args.samples.unwrap_or(1);
    if u64::from(samples) * u64::from(args.attempts) > MAX_DELAYS {
        eprintln!(
            "steadfast: --samples {samples} with --attempts {} is too much work: keep samples x attempts within {MAX_DELAYS}",
            args.attempts
        );
        return exit::USAGE;
    }
    // The plot file first: a path that cannot be written must not cost
    // the whole computation and a printed table before it fails.
    let created = match args.plot.as_deref().map(plot::prepare).transpose() {
        Ok(created) => created.unwrap_or(false),
        Err(e) => {
            eprintln!("steadfast: {e}");
            return exit::FAILURE;
        }
    };
    let seed = args.seed.unwrap_or_else(|| Rng::from_entropy().next_u64());
    let retries = args.attempts - 1;
    let spec = args.backoff.to_string();
    let mut out = std::io::stdout().lock();
    let (written, drawn) = match args.samples {
        None => {
            let rows = table::rows(&delays(&schedule, seed, retries));
            (
                table::write_rows(&mut out, args.format, &spec, seed, &rows),
                args.plot.as_ref().map(|path| {
                    plot::plot(
                        path,
                        &format!("{spec} (seed {seed})"),
                        Series::Single(&rows),
                    )
                    .map(|()| path)
                }),
            )
        }
        Some(samples) => {
            let runs: Vec<Vec<Duration>> = (0..samples)
                .map(|i| delays(&schedule, seed.wrapping_add(u64::from(i)), retries))
                .collect();
            let rows = table::envelope(&runs);
            (
                table::write_envelope(&mut out, args.format, &spec, seed, samples, &rows),
                args.plot.as_ref().map(|path| {
                    plot::plot(
                        path,
                        &format!("{spec} ({samples} seeds)"),
                        Series::Envelope(&rows),
                    )
                    .map(|()| path)
                }),
            )
        }
    };
    if let (Some(Err(_)), Some(path), true) = (&drawn, &args.plot, created) {
        // Nothing worth keeping: the empty file `prepare` made.
        let _ = std::fs::remove_file(path);
    }
    let flushed = written.and_then(|()| out.flush());
    if let Err(e) = flushed {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return 0;
        }
        eprintln!("steadfast: cannot write the schedule: {e}");
        return exit::FAILURE;
    }
    match drawn {
        Some(Err(e)) => {
            eprintln!("steadfast: {e}");
            exit::FAILURE
        }
        _ => 0,
    }
}
