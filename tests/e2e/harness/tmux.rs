//! A private tmux server for driving the real binary in a terminal, as an operator does.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A private tmux server (its own socket), killed when dropped.
pub struct Tmux {
    pub socket: String,
}

impl Tmux {
    /// A private server `name-<pid>` with one session "tui" of `cols` x `rows` running
    /// `command` in a shell.
    pub fn start(name: &str, cols: u16, rows: u16, command: &str) -> Self {
        let tmux = Tmux {
            socket: format!("{name}-{}", std::process::id()),
        };
        let (cols, rows) = (cols.to_string(), rows.to_string());
        let out = tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "tui",
            "-x",
            &cols,
            "-y",
            &rows,
            command,
        ]);
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("tmux cannot run ({e}): install it with `apt-get install -y tmux`")
            })
    }

    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "tui"]).stdout).into()
    }

    pub fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "tui", keys]);
    }

    /// Waits until the screen satisfies `ok`; returns how long it took.
    pub fn wait(&self, what: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> Duration {
        let started = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < timeout,
                "waited {timeout:?} for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}
