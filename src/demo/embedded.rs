//! A private `redis-server` child for the demo: a free loopback port, a temporary directory,
//! no persistence. Dropping it kills the child, waits for it and removes the directory, so a
//! demo never leaves a server or files behind (on quit, on an error and on a panic).

use crate::error::{Error, Result};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The running child and its directory.
pub struct EmbeddedRedis {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
}

/// True when `redis-server` can be started from PATH.
pub fn redis_server_available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn free_port() -> Result<u16> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::unavailable(format!("cannot find a free loopback port: {e}")))
}

fn answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

impl EmbeddedRedis {
    /// Starts a server in a new directory under `parent`.
    pub fn start(parent: &Path) -> Result<Self> {
        if !redis_server_available() {
            return Err(Error::unavailable(
                "redis-server is not on PATH: the demo runs a private one. Install it with \
                 `sudo apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis` (macOS)",
            ));
        }
        let dir = parent.join("redis");
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::unavailable(format!("cannot create '{}': {e}", dir.display())))?;
        for _ in 0..5 {
            let port = free_port()?;
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args([
                    "--daemonize",
                    "no",
                    "--protected-mode",
                    "no",
                    "--logfile",
                    "redis.log",
                ])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| Error::unavailable(format!("cannot start redis-server: {e}")))?;
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if answers(port) {
                    return Ok(EmbeddedRedis {
                        child: Some(child),
                        port,
                        dir,
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Exited (the port was taken meanwhile) or never answered: try another port.
            let _ = child.kill();
            let _ = child.wait();
        }
        Err(Error::unavailable(
            "redis-server did not start on a free port: see its log in the demo directory",
        ))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for EmbeddedRedis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
