//! A real `redis-server` for the tests: started on a port the OS picked
//! (and a unix socket) in a temporary directory, stopped by its PID.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
pub struct Redis {
    child: Option<Child>,
    dir: tempfile::TempDir,
    pub port: u16,
}

/// Whether the tests must find `redis-server` (CI sets it): otherwise a
/// machine without it skips the Redis tests, saying so.
fn required() -> bool {
    std::env::var_os("STEADFAST_REQUIRE_REDIS").is_some() || std::env::var_os("CI").is_some()
}

impl Redis {
    /// A new server, or `None` if `redis-server` is not installed here and
    /// the tests may skip (they may not on CI).
    pub fn start() -> Option<Self> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                !required(),
                "redis-server is not installed (apt-get install redis-server)"
            );
            eprintln!("SKIPPED: redis-server is not installed (apt-get install redis-server)");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut redis = Self {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            port,
        };
        redis.spawn();
        Some(redis)
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .args(["--enable-debug-command", "yes"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while !self.answers() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the server answers `PING`.
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server's PID.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Kills the server (by its PID) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (empty: nothing is saved).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Sends one command in the inline protocol and returns the first line
    /// of the reply.
    pub fn command(&self, command: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(format!("{command}\r\n").as_bytes()).unwrap();
        let mut reply = Vec::new();
        let mut byte = [0];
        while s.read_exact(&mut byte).is_ok() && byte[0] != b'\n' {
            reply.push(byte[0]);
        }
        String::from_utf8_lossy(&reply).trim_end().to_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
