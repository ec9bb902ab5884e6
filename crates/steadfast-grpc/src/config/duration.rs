//! proto3 JSON durations: `"1.5s"`, `"0.000000001s"`, `"300s"`.

use std::time::Duration;

/// The largest duration proto3 allows: 10,000 years of seconds.
const MAX_SECONDS: u64 = 315_576_000_000;

/// Reads a proto3 JSON duration: decimal seconds with at most 9 fractional
/// digits, ending in `s`. Negative durations are refused (no field of a
/// service config takes one). Never panics, on any input.
///
/// ```
/// use std::time::Duration;
/// use steadfast_grpc::config::parse_duration;
/// assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
/// assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
/// assert!(parse_duration("100ms").is_err());
/// ```
///
/// # Errors
/// A short description of what is wrong, for the config error.
pub fn parse_duration(text: &str) -> Result<Duration, &'static str> {
    let Some(number) = text.strip_suffix('s') else {
        return Err("must be a proto3 JSON duration ending in 's', like \"0.1s\"");
    };
    if number.starts_with('-') {
        return Err("must not be negative");
    }
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (number, None),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return Err("must be decimal seconds, like \"1.5s\"");
    }
    // Leading zeros are harmless; too many digits overflow: check the range.
    let seconds = whole
        .trim_start_matches('0')
        .parse::<u64>()
        .or_else(|e| {
            if whole.bytes().all(|b| b == b'0') {
                Ok(0)
            } else {
                Err(e)
            }
        })
        .map_err(|_| "is larger than proto3 allows (315576000000s)")?;
    if seconds > MAX_SECONDS {
        return Err("is larger than proto3 allows (315576000000s)");
    }
    let nanos = match fraction {
        None => 0,
        Some(f) if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) => {
            return Err("must have 1 to 9 fractional digits");
        }
        Some(f) => {
            let digits: u32 = f
                .parse()
                .map_err(|_| "must have 1 to 9 fractional digits")?;
            // Pad to nanoseconds: "5" is 500,000,000 ns.
            digits * 10_u32.pow(9 - u32::try_from(f.len()).unwrap_or(9))
        }
    };
    Ok(Duration::new(seconds, nanos))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn reads_what_grpc_writes() {
        let cases = [
            ("0.1s", Duration::from_millis(100)),
            ("1s", Duration::from_secs(1)),
            ("1.000000001s", Duration::new(1, 1)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("120s", Duration::from_secs(120)),
            ("0s", Duration::ZERO),
            ("00.5s", Duration::from_millis(500)),
            ("315576000000s", Duration::from_secs(MAX_SECONDS)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_what_proto3_does_not_allow() {
        for text in [
            "",
            "s",
            "1",
            "1S",
            "-1s",
            "1.s",
            ".5s",
            "1.0000000001s",
            "1e3s",
            "1.5 s",
            " 1s",
            "+1s",
            "315576000001s",
            "99999999999999999999999s",
            "1,5s",
            "0x10s",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?} should be refused");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in ".{0,40}") {
            let _ = parse_duration(&text);
        }

        #[test]
        fn round_trips_seconds_and_nanos(secs in 0..=MAX_SECONDS, nanos in 0u32..1_000_000_000) {
            let text = format!("{secs}.{nanos:09}s");
            prop_assert_eq!(parse_duration(&text), Ok(Duration::new(secs, nanos)));
        }
    }
}
