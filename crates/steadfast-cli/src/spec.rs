//! Backoff specifications on the command line: `exponential:initial=100ms,max=5s,multiplier=2,jitter=full`.
//!
//! Grammar: `PRESET[:KEY=VALUE[,KEY=VALUE]...]`. Names and keys are
//! case-insensitive; blanks around keys and values are ignored; a key may
//! appear once. Keys left out take the preset's defaults.
//!
//! | preset         | keys                                          |
//! |----------------|-----------------------------------------------|
//! | `constant`     | `delay`, `jitter`                             |
//! | `linear`       | `initial`, `step`, `max`, `jitter`            |
//! | `exponential`  | `initial`, `max`, `multiplier`, `jitter`      |
//! | `fibonacci`    | `initial`, `max`, `jitter`                    |
//! | `decorrelated` | `initial`, `max`                              |
//! | `a6`           | `initial`, `max`, `multiplier`, `jitter`      |
//! | `grpc`         | `initial`, `max`, `multiplier`, `jitter`      |
//!
//! `initial` may also be written `base`, `max` as `cap`, `multiplier` as
//! `factor`, and `constant` takes `initial` as another name for `delay`.
//! Values: durations as in [`crate::duration`]; `multiplier` a number;
//! `jitter` one of `none`, `full`, `equal`, `additive:DURATION` (a uniform
//! amount in `[0, DURATION)` added to the curve, then capped at `max`: the
//! jitter of lancet and backon), or a proportional factor `0.2` (also
//! written `20%`), meaning a uniform factor in `[1 - f, 1 + f]`.
//!
//! `a6` is the gRFC A6 retry backoff and `grpc` the gRPC connection backoff.
//! Ranges (a multiplier below 1, a max below the initial delay...) are
//! checked by the core's builders when the spec is turned into a backoff.
//!
//! ```
//! use std::time::Duration;
//! use steadfast_cli::spec::{BackoffSpec, JitterSpec, Preset};
//!
//! let spec: BackoffSpec = "exponential:initial=100ms,max=5s,jitter=full".parse().unwrap();
//! assert_eq!(spec.preset, Preset::Exponential);
//! assert_eq!(spec.initial, Some(Duration::from_millis(100)));
//! assert_eq!(spec.jitter, Some(JitterSpec::Full));
//! assert_eq!(spec.to_string(), "exponential:initial=100ms,max=5s,jitter=full");
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::duration::{format_duration_exact, parse_duration};

/// A named backoff curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// The same delay every time.
    Constant,
    /// `initial + step * n`.
    Linear,
    /// `initial * multiplier^n`, capped at `max`.
    Exponential,
    /// `initial * fib(n)`, capped at `max`.
    Fibonacci,
    /// Decorrelated jitter: `min(max, U(initial, prev * 3))`.
    Decorrelated,
    /// The gRFC A6 retry backoff.
    A6,
    /// The gRPC connection backoff.
    Grpc,
}

impl Preset {
    /// Every preset, in the order the help text lists them.
    pub const ALL: [Self; 7] = [
        Self::Grpc,
        Self::Exponential,
        Self::Constant,
        Self::Linear,
        Self::Fibonacci,
        Self::Decorrelated,
        Self::A6,
    ];

    /// The name used in a spec.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Constant => "constant",
            Self::Linear => "linear",
            Self::Exponential => "exponential",
            Self::Fibonacci => "fibonacci",
            Self::Decorrelated => "decorrelated",
            Self::A6 => "a6",
            Self::Grpc => "grpc",
        }
    }

    /// The keys this preset accepts (canonical names).
    #[must_use]
    pub const fn keys(self) -> &'static [Key] {
        match self {
            Self::Constant => &[Key::Initial, Key::Jitter],
            Self::Linear => &[Key::Initial, Key::Step, Key::Max, Key::Jitter],
            Self::Exponential | Self::A6 | Self::Grpc => {
                &[Key::Initial, Key::Max, Key::Multiplier, Key::Jitter]
            }
            Self::Fibonacci => &[Key::Initial, Key::Max, Key::Jitter],
            Self::Decorrelated => &[Key::Initial, Key::Max],
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_lowercase();
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parameter of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// The first delay (`delay` for `constant`).
    Initial,
    /// The growth per retry of `linear`.
    Step,
    /// The cap on a delay.
    Max,
    /// The growth factor of `exponential`, `a6` and `grpc`.
    Multiplier,
    /// The jitter.
    Jitter,
}

impl Key {
    /// The canonical name of this key in `preset`'s spec.
    #[must_use]
    pub const fn name(self, preset: Preset) -> &'static str {
        match (self, preset) {
            (Self::Initial, Preset::Constant) => "delay",
            (Self::Initial, _) => "initial",
            (Self::Step, _) => "step",
            (Self::Max, _) => "max",
            (Self::Multiplier, _) => "multiplier",
            (Self::Jitter, _) => "jitter",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "initial" | "base" | "delay" => Self::Initial,
            "step" => Self::Step,
            "max" | "cap" => Self::Max,
            "multiplier" | "factor" => Self::Multiplier,
            "jitter" => Self::Jitter,
            _ => return None,
        })
    }
}

/// The jitter named in a spec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JitterSpec {
    /// No jitter.
    None,
    /// `U(0, v)`.
    Full,
    /// `v/2 + U(0, v/2)`.
    Equal,
    /// `v * U(1 - f, 1 + f)`.
    Proportional(f64),
    /// `v + U(0, m)`, capped at `max` (written `additive:50ms`).
    Additive(Duration),
}

impl fmt::Display for JitterSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Full => f.write_str("full"),
            Self::Equal => f.write_str("equal"),
            Self::Proportional(x) => write!(f, "{x}"),
            Self::Additive(m) => write!(f, "{ADDITIVE}{}", format_duration_exact(*m)),
        }
    }
}

/// A parsed backoff spec: the preset and the parameters given (`None` where
/// the preset's default applies).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffSpec {
    /// The curve.
    pub preset: Preset,
    /// `initial` (or `delay` for `constant`).
    pub initial: Option<Duration>,
    /// `step` (`linear` only).
    pub step: Option<Duration>,
    /// `max`.
    pub max: Option<Duration>,
    /// `multiplier`.
    pub multiplier: Option<f64>,
    /// `jitter`.
    pub jitter: Option<JitterSpec>,
}

impl BackoffSpec {
    /// The preset with every parameter at its default.
    #[must_use]
    pub const fn preset(preset: Preset) -> Self {
        Self {
            preset,
            initial: None,
            step: None,
            max: None,
            multiplier: None,
            jitter: None,
        }
    }
}

/// Why a spec did not parse; its `Display` is the user's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    input: String,
    problem: String,
}

impl SpecError {
    fn new(input: &str, problem: impl Into<String>) -> Self {
        Self {
            input: input.to_owned(),
            problem: problem.into(),
        }
    }

    /// A spec that parsed but that the core's builder refused (`problem` is
    /// the builder's message).
    #[must_use]
    pub fn rejected(input: &str, problem: impl fmt::Display) -> Self {
        Self::new(input, problem.to_string())
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid backoff {:?}: {} (expected PRESET[:KEY=VALUE,...], e.g. exponential:initial=100ms,max=5s,jitter=full; see `steadfast run --help`)",
            self.input, self.problem
        )
    }
}

impl std::error::Error for SpecError {}

fn parse_number(input: &str, key: &str, text: &str) -> Result<f64, SpecError> {
    let text = text.trim();
    // Digits, one '.', an optional exponent: no `inf`, `NaN` or signs.
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && text.as_bytes()[0] != b'-'
        && text.as_bytes()[0] != b'+';
    match text.parse::<f64>() {
        Ok(v) if plain && v.is_finite() => Ok(v),
        _ => Err(SpecError::new(
            input,
            format!("`{key}` must be a non-negative number (got {text:?})"),
        )),
    }
}

/// The prefix of an additive jitter's value: `jitter=additive:50ms`.
const ADDITIVE: &str = "additive:";

fn parse_jitter(input: &str, text: &str) -> Result<JitterSpec, SpecError> {
    let t = text.trim().to_ascii_lowercase();
    Ok(match t.as_str() {
        "none" | "off" => JitterSpec::None,
        "full" => JitterSpec::Full,
        "equal" => JitterSpec::Equal,
        _ if t.starts_with(ADDITIVE) => {
            // The original text (a unit such as `µs` is not ASCII): the
            // prefix is ASCII, so its length is the same in both.
            let amount = &text.trim()[ADDITIVE.len()..];
            let m = parse_duration(amount).map_err(|e| {
                SpecError::new(
                    input,
                    format!("`jitter=additive:` takes the largest amount to add, such as additive:50ms: {e}"),
                )
            })?;
            JitterSpec::Additive(m)
        }
        _ => {
            let (number, percent) = match t.strip_suffix('%') {
                Some(n) => (n, true),
                None => (t.as_str(), false),
            };
            let v = parse_number(input, "jitter", number).map_err(|_| {
                SpecError::new(
                    input,
                    format!(
                        "`jitter` must be none, full, equal, additive:DURATION, or a factor such as 0.2 or 20% (got {:?})",
                        text.trim()
                    ),
                )
            })?;
            JitterSpec::Proportional(if percent { v / 100.0 } else { v })
        }
    })
}

impl FromStr for BackoffSpec {
    type Err = SpecError;

    fn from_str(input: &str) -> Result<Self, SpecError> {
        let (name, params) = match input.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (input, None),
        };
        let Some(preset) = Preset::from_name(name) else {
            let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
            return Err(SpecError::new(
                input,
                format!(
                    "unknown preset {:?} (one of {})",
                    name.trim(),
                    names.join(", ")
                ),
            ));
        };
        let mut spec = Self::preset(preset);
        let Some(params) = params else {
            return Ok(spec);
        };
        if params.trim().is_empty() {
            return Err(SpecError::new(input, "nothing after ':'"));
        }
        let allowed = preset.keys();
        let allowed_names = || {
            allowed
                .iter()
                .map(|k| k.name(preset))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for item in params.split(',') {
            let Some((key_text, value)) = item.split_once('=') else {
                return Err(SpecError::new(
                    input,
                    format!("{:?} is not KEY=VALUE", item.trim()),
                ));
            };
            let key = Key::from_name(key_text)
                .filter(|k| allowed.contains(k))
                .filter(|k| {
                    // `delay` belongs to `constant` only.
                    !(key_text.trim().eq_ignore_ascii_case("delay")
                        && *k == Key::Initial
                        && preset != Preset::Constant)
                })
                .ok_or_else(|| {
                    SpecError::new(
                        input,
                        format!(
                            "{preset} takes no key {:?} (its keys: {})",
                            key_text.trim(),
                            allowed_names()
                        ),
                    )
                })?;
            let name = key.name(preset);
            let duration = |text: &str| {
                parse_duration(text).map_err(|e| SpecError::new(input, format!("`{name}`: {e}")))
            };
            let duplicate = || SpecError::new(input, format!("`{name}` is given twice"));
            match key {
                Key::Initial => {
                    if spec.initial.replace(duration(value)?).is_some() {
                        return Err(duplicate());
                    }
                }
                Key::Step => {
                    if spec.step.replace(duration(value)?).is_some() {
                        return Err(duplicate());
                    }
                }
                Key::Max => {
                    if spec.max.replace(duration(value)?).is_some() {
                        return Err(duplicate());
                    }
                }
                Key::Multiplier => {
                    if spec
                        .multiplier
                        .replace(parse_number(input, name, value)?)
                        .is_some()
                    {
                        return Err(duplicate());
                    }
                }
                Key::Jitter => {
                    if spec.jitter.replace(parse_jitter(input, value)?).is_some() {
                        return Err(duplicate());
                    }
                }
            }
        }
        Ok(spec)
    }
}

/// The canonical form, which parses back to the same spec.
impl fmt::Display for BackoffSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.preset;
        f.write_str(p.name())?;
        let mut sep = ':';
        let mut item = |f: &mut fmt::Formatter<'_>, key: Key, value: String| {
            let r = write!(f, "{sep}{}={value}", key.name(p));
            sep = ',';
            r
        };
        if let Some(d) = self.initial {
            item(f, Key::Initial, format_duration_exact(d))?;
        }
        if let Some(d) = self.step {
            item(f, Key::Step, format_duration_exact(d))?;
        }
        if let Some(d) = self.max {
            item(f, Key::Max, format_duration_exact(d))?;
        }
        if let Some(m) = self.multiplier {
            item(f, Key::Multiplier, m.to_string())?;
        }
        if let Some(j) = self.jitter {
            item(f, Key::Jitter, j.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_every_preset_bare() {
        for p in Preset::ALL {
            let spec: BackoffSpec = p.name().parse().unwrap();
            assert_eq!(spec, BackoffSpec::preset(p));
            assert_eq!(spec.to_string(), p.name());
        }
        assert_eq!(
            "  GRPC ".parse::<BackoffSpec>().unwrap().preset,
            Preset::Grpc
        );
    }

    #[test]
    fn parses_parameters_and_aliases() {
        let spec: BackoffSpec = "exponential: base = 100ms , cap=5s,factor=1.5,jitter=20%"
            .parse()
            .unwrap();
        assert_eq!(spec.initial, Some(Duration::from_millis(100)));
        assert_eq!(spec.max, Some(Duration::from_secs(5)));
        assert_eq!(spec.multiplier, Some(1.5));
        assert_eq!(spec.jitter, Some(JitterSpec::Proportional(0.2)));
        assert_eq!(
            spec.to_string(),
            "exponential:initial=100ms,max=5s,multiplier=1.5,jitter=0.2"
        );
        let c: BackoffSpec = "constant:delay=1ms".parse().unwrap();
        assert_eq!(c.initial, Some(Duration::from_millis(1)));
        assert_eq!(c.to_string(), "constant:delay=1ms");
        let l: BackoffSpec = "linear:initial=1s,step=500ms,max=10s".parse().unwrap();
        assert_eq!(l.step, Some(Duration::from_millis(500)));
    }

    #[test]
    fn parses_additive_jitter() {
        let spec: BackoffSpec = "exponential:max=5s, jitter = Additive:250µs "
            .parse()
            .unwrap();
        assert_eq!(
            spec.jitter,
            Some(JitterSpec::Additive(Duration::from_micros(250)))
        );
        assert_eq!(spec.to_string(), "exponential:max=5s,jitter=additive:250us");
        let c: BackoffSpec = "constant:delay=1s,jitter=additive:1.5s".parse().unwrap();
        assert_eq!(
            c.jitter,
            Some(JitterSpec::Additive(Duration::from_millis(1500)))
        );
        assert_eq!(c.to_string(), "constant:delay=1s,jitter=additive:1s500ms");
        let zero: BackoffSpec = "linear:jitter=additive:0s".parse().unwrap();
        assert_eq!(zero.jitter, Some(JitterSpec::Additive(Duration::ZERO)));
    }

    #[test]
    fn errors_are_specific() {
        for (input, needle) in [
            ("", "unknown preset"),
            (
                "bogus",
                "unknown preset \"bogus\" (one of grpc, exponential",
            ),
            ("exponential:", "nothing after ':'"),
            ("exponential:initial", "is not KEY=VALUE"),
            ("exponential:step=1s", "exponential takes no key \"step\""),
            ("exponential:delay=1s", "takes no key \"delay\""),
            ("decorrelated:jitter=full", "takes no key \"jitter\""),
            ("exponential:initial=1", "missing unit"),
            (
                "exponential:initial=1s,initial=2s",
                "`initial` is given twice",
            ),
            (
                "exponential:multiplier=inf",
                "must be a non-negative number",
            ),
            ("exponential:multiplier=-2", "must be a non-negative number"),
            (
                "exponential:jitter=lots",
                "`jitter` must be none, full, equal, additive:DURATION",
            ),
            (
                "exponential:jitter=additive:",
                "`jitter=additive:` takes the largest amount to add",
            ),
            ("exponential:jitter=additive:50", "missing unit"),
            ("exponential:jitter=additive:-1s", "`jitter=additive:`"),
            ("exponential:jitter=additive:lots", "`jitter=additive:`"),
            ("exponential:jitter=additive", "`jitter` must be none"),
            ("exponential:jitter=additive=5ms", "`jitter` must be none"),
            ("exponential:initial=1s,,max=2s", "is not KEY=VALUE"),
        ] {
            let err = input.parse::<BackoffSpec>().unwrap_err().to_string();
            assert!(err.contains(needle), "{input:?}: {err}");
        }
    }

    fn any_spec() -> impl Strategy<Value = BackoffSpec> {
        let d = || {
            proptest::option::of(
                (0u64..10_000_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
            )
        };
        let jitter = proptest::option::of(prop_oneof![
            Just(JitterSpec::None),
            Just(JitterSpec::Full),
            Just(JitterSpec::Equal),
            (0.0f64..10.0).prop_map(JitterSpec::Proportional),
            d().prop_filter_map("some", |m| m.map(JitterSpec::Additive)),
        ]);
        (
            proptest::sample::select(Preset::ALL.to_vec()),
            d(),
            d(),
            d(),
            proptest::option::of(0.0f64..1e6),
            jitter,
        )
            .prop_map(|(preset, initial, step, max, multiplier, jitter)| {
                let keys = preset.keys();
                let keep = |k: Key| keys.contains(&k);
                BackoffSpec {
                    preset,
                    initial: initial.filter(|_| keep(Key::Initial)),
                    step: step.filter(|_| keep(Key::Step)),
                    max: max.filter(|_| keep(Key::Max)),
                    multiplier: multiplier.filter(|_| keep(Key::Multiplier)),
                    jitter: jitter.filter(|_| keep(Key::Jitter)),
                }
            })
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = s.parse::<BackoffSpec>();
        }

        #[test]
        fn never_panics_on_near_misses(
            s in "(grpc|exponential|constant|linear|fibonacci|decorrelated|a6|x)(:[a-z=,0-9.%ms ]{0,40})?"
        ) {
            let _ = s.parse::<BackoffSpec>();
        }

        #[test]
        fn display_round_trips(spec in any_spec()) {
            let text = spec.to_string();
            prop_assert_eq!(text.parse::<BackoffSpec>(), Ok(spec), "{}", text);
        }
    }
}
