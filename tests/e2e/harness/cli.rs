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

/// Waits for a background run (at most `limit`) and collects its output.
pub fn finish(child: Child, limit: Duration) -> Run {
    let started = Instant::now();
    let mut child = child;
    loop {
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        assert!(
            started.elapsed() < limit,
            "the command hung for more than {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        elapsed: started.elapsed(),
    };
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}
