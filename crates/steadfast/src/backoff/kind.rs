//! [`Kind`]: which built-in schedule a [`Backoff`](super::value::Backoff)
//! is, with the names text configuration and errors use for it.

/// Which built-in schedule a [`Backoff`](super::value::Backoff) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Constant,
    Linear,
    Exponential,
    ShiftExponential,
    Fibonacci,
    Decorrelated,
    DecorrelatedV2,
    GrpcGo,
    GrpcA6,
    GrpcA6Legacy,
}

impl Kind {
    pub(super) const ALL: [Self; 10] = [
        Self::Constant,
        Self::Linear,
        Self::Exponential,
        Self::ShiftExponential,
        Self::Fibonacci,
        Self::Decorrelated,
        Self::DecorrelatedV2,
        Self::GrpcGo,
        Self::GrpcA6,
        Self::GrpcA6Legacy,
    ];

    pub(super) const fn name(self) -> &'static str {
        match self {
            Self::Constant => "constant",
            Self::Linear => "linear",
            Self::Exponential => "exponential",
            Self::ShiftExponential => "shift-exponential",
            Self::Fibonacci => "fibonacci",
            Self::Decorrelated => "decorrelated",
            Self::DecorrelatedV2 => "decorrelated-v2",
            Self::GrpcGo => "grpc-go",
            Self::GrpcA6 => "grpc-a6",
            Self::GrpcA6Legacy => "grpc-a6-legacy",
        }
    }

    pub(super) const fn component(self) -> &'static str {
        match self {
            Self::Constant => "constant backoff",
            Self::Linear => "linear backoff",
            Self::Exponential => "exponential backoff",
            Self::ShiftExponential => "shift-exponential backoff",
            Self::Fibonacci => "fibonacci backoff",
            Self::Decorrelated => "decorrelated backoff",
            Self::DecorrelatedV2 => "decorrelated-v2 backoff",
            Self::GrpcGo => "grpc-go backoff",
            Self::GrpcA6 => "grpc-a6 backoff",
            Self::GrpcA6Legacy => "grpc-a6-legacy backoff",
        }
    }
}
