//! The terminal: raw mode and the alternate screen on the way in, both undone on every way
//! out: a normal return, an error (the [`Guard`] drops), a panic on the UI thread (the hook
//! restores before the message prints), SIGTERM / SIGHUP (the loop quits normally).

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::thread::ThreadId;

/// True while the terminal is in raw mode on the alternate screen.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The thread that draws. A panic in the UI code there ends the UI; a panic elsewhere (a
/// tokio task, which tokio contains; the input thread, which then ends the UI through its
/// channel) must not tear the screen down under a running UI.
static UI_THREAD: Mutex<Option<ThreadId>> = Mutex::new(None);
static HOOK: Once = Once::new();

pub type Tui = Terminal<CrosstermBackend<Stdout>>;

/// Restores the terminal when dropped.
pub struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Enters raw mode and the alternate screen; the returned guard restores them.
pub fn enter() -> io::Result<(Tui, Guard)> {
    install_panic_hook();
    if let Ok(mut t) = UI_THREAD.lock() {
        *t = Some(std::thread::current().id());
    }
    crossterm::terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let guard = Guard;
    crossterm::execute!(
        io::stdout(),
        crossterm::terminal::EnterAlternateScreen,
        crossterm::cursor::Hide
    )?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;
    Ok((terminal, guard))
}

/// Leaves the alternate screen and raw mode, shows the cursor; does nothing when not active,
/// so every exit path may call it.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(
            io::stdout(),
            crossterm::terminal::LeaveAlternateScreen,
            crossterm::cursor::Show
        );
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

fn on_ui_thread() -> bool {
    UI_THREAD
        .lock()
        .ok()
        .and_then(|t| *t)
        .is_some_and(|id| id == std::thread::current().id())
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Inside a tokio task, even on the UI thread of a current-thread runtime, it is a
            // background panic: the UI code itself runs in `block_on`, outside any task.
            let background = tokio::task::try_id().is_some() || !on_ui_thread();
            if ACTIVE.load(Ordering::SeqCst) && background {
                // Printing now would scribble over the screen: the message waits for the exit.
                super::logs::keep(format!("a background task panicked: {info}"));
                return;
            }
            restore();
            super::logs::capture(false);
            previous(info);
        }));
    });
}
