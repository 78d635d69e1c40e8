//! Runs the real binary as a process, the way an operator or cron does.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The outcome of one run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// stdout as the one JSON document of `--json`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}); code {}\nstdout:\n{}\nstderr:\n{}",
                self.code, self.stdout, self.stderr
            )
        })
    }

    /// stderr as the JSON error object of `--json`.
    pub fn json_error(&self) -> serde_json::Value {
        serde_json::from_str(self.stderr.trim())
            .unwrap_or_else(|e| panic!("stderr is not one JSON object ({e}):\n{}", self.stderr))
    }

    /// Panics with both streams unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "exit code {} (wanted {code})\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    pub fn all_output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_seckill-console")
}

/// Runs `seckill-console args...` with a clean environment (no SECKILL_* from the caller).
pub fn console(args: &[&str]) -> Run {
    console_env(args, &[])
}

/// Like [`console`], with extra environment variables.
pub fn console_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(binary());
    cmd.args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("SECKILL_") {
            cmd.env_remove(&k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let out = cmd.output().expect("run seckill-console");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        elapsed: started.elapsed(),
    };
    assert!(
        !run.stderr.contains("panicked"),
        "the binary panicked:\n{}",
        run.stderr
    );
    run
}

/// Runs the binary off the async runtime's worker threads.
pub async fn console_async(args: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        console(&refs)
    })
    .await
    .expect("console task")
}

/// Starts `seckill-console args...` in the background (a load that a test samples, or a drill
/// interrupts), with a clean environment.
pub fn spawn(args: &[&str]) -> Child {
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("SECKILL_") {
            cmd.env_remove(&k);
        }
    }
    cmd.spawn().expect("spawn seckill-console")
}

/// Sends SIGTERM to a background run, as systemd stops a service.
pub fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -TERM {}", child.id());
}

/// A child's pipe read on a thread of its own, to its end: a run that writes more than a pipe
/// holds (64 KB) would otherwise block on its write and look hung.
struct Drained {
    read: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    thread: std::thread::JoinHandle<()>,
}

fn drain<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> Drained {
    let read = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = read.clone();
    let thread = std::thread::spawn(move || {
        let Some(mut p) = pipe else {
            return;
        };
        let mut buf = [0u8; 8192];
        while let Ok(n) = p.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut v) = into.lock() {
                v.extend_from_slice(&buf[..n]);
            }
        }
    });
    Drained { read, thread }
}

impl Drained {
    /// What was read, once the pipe closed or a few seconds after the run ended (a hook it
    /// started may hold the pipe open a little longer).
    fn take(self) -> String {
        let until = Instant::now() + Duration::from_secs(5);
        while !self.thread.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let bytes = self.read.lock().map(|v| v.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).to_string()
    }
}

/// Waits for a background run (at most `limit`) and collects its output.
pub fn finish(child: Child, limit: Duration) -> Run {
    let started = Instant::now();
    let mut child = child;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = loop {
        if let Some(status) = child.try_wait().ok().flatten() {
            break status;
        }
        if started.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.take();
            let tail: String = err
                .chars()
                .rev()
                .take(2000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            panic!("the command hung for more than {limit:?}; its stderr ended:\n{tail}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout.take(),
        stderr: stderr.take(),
        elapsed: started.elapsed(),
    };
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}
