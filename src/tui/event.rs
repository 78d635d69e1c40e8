//! Terminal input on its own thread: `crossterm::event::read` blocks, so it never runs on the
//! async runtime. Keys and resizes go to the loop as Actions; the end or failure of the input
//! is an Action too, never silently ignored.

use super::action::Action;
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
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

/// A terminal sends Alt+key as Esc then the key, so an Esc typed just before a key (Esc to
/// close a form, then `0` for the event log) arrives as Alt+`0` when both bytes land in one
/// read. The console binds no Alt key, so such a key is split back into the Esc and the plain
/// key the operator typed; otherwise the form would take the `0` as a digit and stay open.
fn split_alt(k: KeyEvent) -> (Option<KeyEvent>, KeyEvent) {
    if k.modifiers.contains(KeyModifiers::ALT) && matches!(k.code, KeyCode::Char(_)) {
        let esc = KeyEvent::new_with_kind(KeyCode::Esc, KeyModifiers::NONE, k.kind);
        let plain = KeyEvent::new_with_kind(k.code, k.modifiers - KeyModifiers::ALT, k.kind);
        (Some(esc), plain)
    } else {
        (None, k)
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
                        Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                            let (esc, key) = split_alt(k);
                            if let Some(esc) = esc
                                && tx.send(Action::Key(esc)).is_err()
                            {
                                break;
                            }
                            Action::Key(key)
                        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alt_key_is_the_esc_typed_before_it() {
        let alt0 = KeyEvent::new(KeyCode::Char('0'), KeyModifiers::ALT);
        let (esc, key) = split_alt(alt0);
        assert_eq!(esc.map(|e| e.code), Some(KeyCode::Esc));
        assert_eq!(key.code, KeyCode::Char('0'));
        assert!(key.modifiers.is_empty());
        let plain = KeyEvent::new(KeyCode::Char('5'), KeyModifiers::NONE);
        assert_eq!(split_alt(plain), (None, plain));
        let alt_up = KeyEvent::new(KeyCode::Up, KeyModifiers::ALT);
        assert_eq!(split_alt(alt_up), (None, alt_up));
    }
}
