//! Terminal input on its own thread: `crossterm::event::read` blocks, so it never runs on the
//! async runtime. Keys and resizes go to the loop as Actions; the end or failure of the input
//! is an Action too, never silently ignored.

use super::action::Action;
use crossterm::event::{self, Event, KeyEventKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How often the thread looks at its stop flag while no key comes.
const POLL: Duration = Duration::from_millis(100);

/// The input thread; stops when dropped.
pub struct Input {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for Input {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // The thread sees the flag within one poll. A terminal that hung up can keep crossterm
        // busy inside its poll instead; then the thread is left behind (the process is ending)
        // rather than joined, which would hang the exit and keep the demo's cleanup waiting.
        if let Some(h) = self.handle.take() {
            let deadline = std::time::Instant::now() + POLL * 3;
            while !h.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

/// Ends the UI if the input thread dies by a panic, instead of leaving it without keys.
struct Sentinel(UnboundedSender<Action>);

impl Drop for Sentinel {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.send(Action::InputClosed(
                "the terminal input stopped unexpectedly".into(),
            ));
        }
    }
}

/// Starts reading the terminal.
pub fn spawn(tx: UnboundedSender<Action>) -> std::io::Result<Input> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name("tui-input".into())
        .spawn(move || {
            let _sentinel = Sentinel(tx.clone());
            while !flag.load(Ordering::SeqCst) {
                let action = match event::poll(POLL) {
                    Ok(false) => continue,
                    Ok(true) => match event::read() {
                        Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => Action::Key(k),
                        Ok(Event::Resize(w, h)) => Action::Resize(w, h),
                        Ok(_) => continue,
                        Err(e) => Action::InputClosed(format!("the terminal input failed: {e}")),
                    },
                    Err(e) => Action::InputClosed(format!("the terminal input failed: {e}")),
                };
                let last = matches!(action, Action::InputClosed(_));
                if tx.send(action).is_err() || last {
                    break;
                }
            }
        })?;
    Ok(Input {
        stop,
        handle: Some(handle),
    })
}
