//! What the hostile servers do with each attempt: a pure function of the
//! run's seed, the call and the attempt's number, so that a run is exactly
//! repeatable and the checker knows what the server did without trusting
//! the client.

/// The faults of one run: how often, and from which seed.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub seed: u64,
    /// The share of attempts that get a fault, in `[0, 1]`.
    pub fault_rate: f64,
}

/// A `Retry-After` value a hostile HTTP server sends.
pub const RETRY_AFTERS: [&str; 8] = [
    "31536000",                      // a year
    "-1",                            // negative
    "soon",                          // garbage
    "Thu, 01 Jan 1970 00:00:00 GMT", // an HTTP-date far in the past
    "Fri, 31 Dec 9999 23:59:59 GMT", // an HTTP-date far in the future
    "0",
    "1",   // longer than a soak call's deadline
    "0.5", // not an integer
];

/// A `grpc-retry-pushback-ms` value a hostile gRPC server sends.
pub const PUSHBACKS: [&str; 7] = [
    "-1",                   // negative: A6 says do not retry
    "-9223372036854775808", // the most negative
    "garbage",              // unparseable: do not retry
    "99999999999999999999", // past any integer
    "31536000000",          // a year
    "0",
    "3", // a valid pushback, waited exactly
];

/// What an HTTP server does with one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpFault {
    /// `200 ok`.
    None,
    /// A status (retryable or final), with a `Retry-After` from
    /// [`RETRY_AFTERS`] when `hint` is set.
    Status { code: u16, hint: Option<usize> },
    /// Reads the request and never answers, until the client goes away.
    Stall,
    /// Sends a `200` head whose body trickles a byte at a time, slower than
    /// any deadline allows.
    Trickle,
    /// Resets the connection in the middle of the response head.
    ResetInHead,
    /// Sends a `200` head and part of its body, then resets.
    ResetInBody,
    /// Closes the connection without a byte of response.
    CloseBeforeHead,
}

impl HttpFault {
    /// The status the client sees, if this attempt answers with a head.
    pub fn status(self) -> Option<u16> {
        match self {
            Self::None | Self::Trickle | Self::ResetInBody => Some(200),
            Self::Status { code, .. } => Some(code),
            Self::Stall | Self::ResetInHead | Self::CloseBeforeHead => None,
        }
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "ok",
            Self::Status { hint: Some(_), .. } => "status with Retry-After",
            Self::Status { .. } => "status",
            Self::Stall => "stall",
            Self::Trickle => "trickling body",
            Self::ResetInHead => "reset in head",
            Self::ResetInBody => "reset in body",
            Self::CloseBeforeHead => "close before head",
        }
    }
}

/// What a gRPC server does with one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcFault {
    /// An OK reply.
    None,
    /// A Trailers-Only status, with a `grpc-retry-pushback-ms` from
    /// [`PUSHBACKS`] when `pushback` is set.
    Status { code: i32, pushback: Option<usize> },
    /// Sends the response head, then a failing status in the trailers: the
    /// call is committed.
    HeadThenFail { code: i32 },
    /// Sends the response head, then resets the stream.
    ResetAfterHead,
    /// Resets the stream before any response head.
    ResetBeforeHead,
    /// Never answers, until the client goes away.
    Stall,
    /// Enforces the `grpc-timeout` it received as tonic's server does:
    /// answers CANCELLED "Timeout expired" when it passes.
    EnforceTimeout,
}

impl GrpcFault {
    /// Whether the server sent a response head without a status (which
    /// commits the call: it must never be retried after this attempt).
    pub fn commits(self) -> bool {
        matches!(self, Self::HeadThenFail { .. } | Self::ResetAfterHead)
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "ok",
            Self::Status {
                pushback: Some(_), ..
            } => "status with pushback",
            Self::Status { .. } => "status",
            Self::HeadThenFail { .. } => "head then fail",
            Self::ResetAfterHead => "reset after head",
            Self::ResetBeforeHead => "reset before head",
            Self::Stall => "stall",
            Self::EnforceTimeout => "enforced timeout (CANCELLED)",
        }
    }
}

/// gRPC codes the soak uses.
pub mod code {
    pub const OK: i32 = 0;
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
}

impl Plan {
    /// A uniform draw in `[0, 1)` and a second independent word for this
    /// attempt of this call.
    fn draws(&self, call: u64, attempt: u32, salt: u64) -> (f64, u64) {
        let a =
            splitmix64(self.seed ^ splitmix64(call ^ salt) ^ u64::from(attempt).rotate_left(40));
        let b = splitmix64(a);
        // 53 random bits make an exact double in [0, 1).
        #[allow(clippy::cast_precision_loss)]
        let unit = (a >> 11) as f64 / (1_u64 << 53) as f64;
        (unit, b)
    }

    /// What the HTTP server does with attempt `attempt` (1-based) of `call`.
    pub fn http(&self, call: u64, attempt: u32) -> HttpFault {
        let (unit, word) = self.draws(call, attempt, 0x4854_5450);
        if unit >= self.fault_rate {
            return HttpFault::None;
        }
        let pick = |n: usize| usize::try_from(word >> 32).unwrap_or(0) % n;
        match word % 12 {
            0 | 1 => HttpFault::Status {
                code: 503,
                hint: None,
            },
            2 => HttpFault::Status {
                code: 503,
                hint: Some(pick(RETRY_AFTERS.len())),
            },
            3 => HttpFault::Status {
                code: 429,
                hint: Some(pick(RETRY_AFTERS.len())),
            },
            4 => HttpFault::Status {
                code: 500,
                hint: None,
            },
            5 => HttpFault::Status {
                code: 400,
                hint: None,
            },
            6 => HttpFault::Stall,
            7 => HttpFault::Trickle,
            8 | 9 => HttpFault::ResetInHead,
            10 => HttpFault::ResetInBody,
            _ => HttpFault::CloseBeforeHead,
        }
    }

    /// What the gRPC server does with attempt `attempt` (1-based) of `call`.
    pub fn grpc(&self, call: u64, attempt: u32) -> GrpcFault {
        let (unit, word) = self.draws(call, attempt, 0x4752_5043);
        if unit >= self.fault_rate {
            return GrpcFault::None;
        }
        let pick = |n: usize| usize::try_from(word >> 32).unwrap_or(0) % n;
        match word % 12 {
            0 | 1 => GrpcFault::Status {
                code: code::UNAVAILABLE,
                pushback: None,
            },
            2 => GrpcFault::Status {
                code: code::UNAVAILABLE,
                pushback: Some(pick(PUSHBACKS.len())),
            },
            3 => GrpcFault::Status {
                code: code::RESOURCE_EXHAUSTED,
                pushback: Some(pick(PUSHBACKS.len())),
            },
            4 => GrpcFault::Status {
                code: code::INVALID_ARGUMENT,
                pushback: None,
            },
            5 => GrpcFault::HeadThenFail {
                code: code::UNAVAILABLE,
            },
            6 => GrpcFault::ResetAfterHead,
            7 | 8 => GrpcFault::ResetBeforeHead,
            9 => GrpcFault::Stall,
            _ => GrpcFault::EnforceTimeout,
        }
    }

    /// A storm: every fault is a retryable failure (UNAVAILABLE or 503).
    pub fn storm(self) -> Storm {
        Storm(self)
    }
}

/// A plan whose faults are all plain retryable failures: what a retry
/// storm is made of.
#[derive(Debug, Clone, Copy)]
pub struct Storm(Plan);

impl Storm {
    pub fn http(&self, call: u64, attempt: u32) -> HttpFault {
        let (unit, _) = self.0.draws(call, attempt, 0x5354_4f52);
        if unit < self.0.fault_rate {
            HttpFault::Status {
                code: 503,
                hint: None,
            }
        } else {
            HttpFault::None
        }
    }

    pub fn grpc(&self, call: u64, attempt: u32) -> GrpcFault {
        let (unit, _) = self.0.draws(call, attempt, 0x5354_4f52);
        if unit < self.0.fault_rate {
            GrpcFault::Status {
                code: code::UNAVAILABLE,
                pushback: None,
            }
        } else {
            GrpcFault::None
        }
    }
}

/// Sebastiano Vigna's SplitMix64 finaliser: a bijection of `u64` whose
/// outputs pass BigCrush, enough to decorrelate (seed, call, attempt).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_faults_and_another_seed_others() {
        let a = Plan {
            seed: 1,
            fault_rate: 0.2,
        };
        let b = Plan { seed: 2, ..a };
        let run = |p: &Plan| (0..2000).map(|c| p.http(c, 1)).collect::<Vec<_>>();
        assert_eq!(run(&a), run(&a));
        assert_ne!(run(&a), run(&b));
    }

    #[test]
    fn the_fault_rate_holds_within_statistical_bounds() {
        let plan = Plan {
            seed: 7,
            fault_rate: 0.2,
        };
        let n = 100_000_u32;
        let faults = (0..u64::from(n))
            .filter(|&c| plan.grpc(c, 1) != GrpcFault::None)
            .count();
        // Binomial(100000, 0.2): sd = 126.5; 5 sd either side.
        assert!((19_367..=20_633).contains(&faults), "{faults} faults");
        let storm = plan.storm();
        let failed = (0..u64::from(n))
            .filter(|&c| storm.http(c, 2) != HttpFault::None)
            .count();
        assert!((19_367..=20_633).contains(&failed), "{failed} failures");
    }

    #[test]
    fn every_kind_of_fault_is_drawn() {
        let plan = Plan {
            seed: 3,
            fault_rate: 1.0,
        };
        let mut http: Vec<&str> = (0..5000).map(|c| plan.http(c, 1).name()).collect();
        http.sort_unstable();
        http.dedup();
        assert_eq!(http.len(), 7, "{http:?}");
        let mut grpc: Vec<&str> = (0..5000).map(|c| plan.grpc(c, 1).name()).collect();
        grpc.sort_unstable();
        grpc.dedup();
        assert_eq!(grpc.len(), 7, "{grpc:?}");
    }
}
