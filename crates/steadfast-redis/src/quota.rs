//! [`RedisQuota`]: the quotas of a fleet kept in Redis, one key per quota
//! and limit key, moved atomically by one script call per check.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};
use steadfast::ConfigError;
use steadfast::clock::Clock;
use steadfast::rate::{BackendError, Decision, Quota, QuotaBackend, QuotaCheck};

use crate::reply;

/// The prefix of every key unless told otherwise.
pub const DEFAULT_PREFIX: &str = "steadfast:rate:";

/// The longest window (burst × interval) a quota may have here: the script
/// computes in doubles, exact below 2^53 nanoseconds (about 104 days).
const MAX_WINDOW_NANOS: u64 = 1 << 53;

/// The script, loaded once per connection and then called by its SHA.
fn script() -> Script {
    Script::new(include_str!("gcra.lua"))
}

/// Where the script reads the time.
#[derive(Clone)]
enum Time {
    /// Redis's `TIME`: one clock for every client of the fleet.
    Server,
    /// A clock of the caller's, read from `start` (tests, simulations).
    Given(Arc<dyn Fn() -> Duration + Send + Sync>),
}

/// A [`QuotaBackend`] on Redis: the generic cell rate algorithm run by a Lua
/// script inside Redis, so every instance of a fleet shares one quota per
/// key exactly (the script moves every quota of a check at once, or none).
/// Put it in a [`FleetRateLimit`](steadfast::rate::FleetRateLimit), which
/// bounds the wait for Redis, caches keys over their quota and decides what
/// happens while Redis is away.
///
/// The script is sent once per connection (`SCRIPT LOAD`) and called by its
/// SHA1 (`EVALSHA`) after that, again after Redis restarts. Each quota of a
/// key is one Redis string, `{<prefix><limit>:<key>}:<i>`, holding its
/// theoretical arrival time; it expires when the quota is full again (a key
/// set no longer used costs nothing), and the braces keep a key's quotas on
/// one slot of a cluster. Time is Redis's own `TIME`, one clock for the
/// fleet; a quota's window (burst × interval) may be up to 104 days.
///
/// The connection is a [`ConnectionManager`]: made on first use, made again
/// after Redis goes away and comes back. Build it inside a tokio runtime.
///
/// ```no_run
/// use steadfast::rate::{FleetRateLimit, Quota};
/// use steadfast_redis::RedisQuota;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = FleetRateLimit::builder(RedisQuota::open("redis://127.0.0.1:6379/")?)
///     .name("geo api")
///     .quota(Quota::per_second(100)?)
///     .fail_open(Quota::per_second(25)?) // one of four instances' share, while Redis is away
///     .build()?;
/// limit.check("api-key-1").await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisQuota {
    conn: ConnectionManager,
    script: Arc<Script>,
    prefix: Arc<str>,
    time: Time,
}

impl RedisQuota {
    /// A backend on the Redis at `url` (`redis://host:port/db`,
    /// `redis+unix:///path/to/socket`), with the defaults of
    /// [`builder`](Self::builder).
    ///
    /// # Errors
    /// The URL does not parse.
    pub fn open(url: &str) -> Result<Self, redis::RedisError> {
        Self::builder(Client::open(url)?).build()
    }

    /// A backend on `client` to configure.
    #[must_use]
    pub fn builder(client: Client) -> RedisQuotaBuilder {
        RedisQuotaBuilder {
            client,
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_millis(250),
            time: Time::Server,
        }
    }

    /// The key of quota `i` of `check`.
    fn key(&self, check: &QuotaCheck<'_>, i: usize) -> String {
        format!("{{{}{}:{}}}:{i}", self.prefix, check.limit, check.key)
    }
}

impl QuotaBackend for RedisQuota {
    async fn check(&self, check: QuotaCheck<'_>) -> Result<Decision, BackendError> {
        let mut call = self.script.prepare_invoke();
        for i in 0..check.quotas.len() {
            call.key(self.key(&check, i));
        }
        call.arg(check.cost);
        match &self.time {
            Time::Server => call.arg("").arg(""),
            Time::Given(now) => {
                let now = now();
                call.arg(now.as_secs()).arg(now.subsec_nanos())
            }
        };
        for quota in check.quotas {
            let (interval, window) = nanos(quota);
            call.arg(interval).arg(window);
        }
        let mut conn = self.conn.clone();
        let reply: redis::Value = call
            .invoke_async(&mut conn)
            .await
            .map_err(|e| BackendError::with_source("redis", e))?;
        reply::decision(&reply)
    }

    fn supports(&self, quota: &Quota) -> Result<(), ConfigError> {
        let (_, window) = nanos(quota);
        if window >= MAX_WINDOW_NANOS {
            return Err(ConfigError::new(
                "redis quota",
                "quota",
                "must have a window (burst × interval) under 2^53 ns, about 104 days",
                quota,
            ));
        }
        Ok(())
    }
}

/// A quota's interval and window, in nanoseconds, as the core's limits
/// compute them.
fn nanos(quota: &Quota) -> (u64, u64) {
    let interval = u64::try_from(quota.interval().as_nanos()).unwrap_or(u64::MAX);
    (interval, interval.saturating_mul(u64::from(quota.burst())))
}

impl fmt::Debug for RedisQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisQuota")
            .field("prefix", &self.prefix)
            .field("script_sha1", &self.script.get_hash())
            .field(
                "time",
                &match self.time {
                    Time::Server => "redis TIME",
                    Time::Given(_) => "a given clock",
                },
            )
            .finish_non_exhaustive()
    }
}

/// The configuration of a [`RedisQuota`].
pub struct RedisQuotaBuilder {
    client: Client,
    prefix: String,
    connect_timeout: Duration,
    time: Time,
}

impl fmt::Debug for RedisQuotaBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisQuotaBuilder")
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl RedisQuotaBuilder {
    /// The prefix of every key (default [`DEFAULT_PREFIX`]).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest wait for a new connection (default 250 ms). A check is
    /// bounded by its limit's timeout whatever this is; this bounds the
    /// manager's own attempt to connect behind it.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Reads the time from `clock` (nanoseconds since this call) instead of
    /// Redis's `TIME`, and sets no expiry on keys: for tests and simulations
    /// on virtual time, where every client of a key shares the one clock.
    #[must_use]
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        let start: Instant = clock.now();
        self.time = Time::Given(Arc::new(move || {
            clock.now().saturating_duration_since(start)
        }));
        self
    }

    /// The backend. It connects on its first check.
    ///
    /// # Errors
    /// The connection manager cannot be made.
    pub fn build(self) -> Result<RedisQuota, redis::RedisError> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(Duration::from_secs(1)))
            // Reconnect quickly after an outage: a check that fails while
            // the manager reconnects goes to the limit's fallback.
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(500))
            .set_number_of_retries(3);
        let conn = ConnectionManager::new_lazy_with_config(self.client, config)?;
        Ok(RedisQuota {
            conn,
            script: Arc::new(script()),
            prefix: self.prefix.into(),
            time: self.time,
        })
    }
}
