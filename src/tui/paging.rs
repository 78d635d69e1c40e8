//! Scrolling what does not fit: a confirmation or a message (its lines wrap, the arrows move
//! them) and the help. A confirmation whose lines overflow the screen counts only once its last
//! line has been on screen: the operator confirms what they could read, all of it.

use super::app::{App, Dialog};
use super::widgets::{dialog, pager};

impl App {
    /// Scrolls the open confirmation or message by `n` rows (negative: up); false when no
    /// dialog scrolls.
    pub(super) fn scroll_dialog(&mut self, n: isize) -> bool {
        let size = self.size;
        let Some(d) = self.dialog.as_ref() else {
            return false;
        };
        let Some(body) = dialog::body(d, size) else {
            return false;
        };
        let next = (body.scroll as isize).saturating_add(n).max(0) as usize;
        let next = pager::clamp(next, body.lines.len(), body.rows);
        let end = pager::at_end(next, body.lines.len(), body.rows);
        match self.dialog.as_mut() {
            Some(Dialog::Confirm(c)) => {
                c.scroll = next;
                c.seen_end |= end;
            }
            Some(Dialog::Message { scroll, .. }) => *scroll = next,
            _ => {}
        }
        true
    }

    /// Rows of the open confirmation the operator has not had on screen yet (0 when it all
    /// fits, or its end has been shown).
    pub(super) fn unread_rows(&self) -> usize {
        let Some(d @ Dialog::Confirm(c)) = self.dialog.as_ref() else {
            return 0;
        };
        if c.seen_end {
            return 0;
        }
        dialog::body(d, self.size).map_or(0, |b| pager::below(b.scroll, b.lines.len(), b.rows))
    }

    /// Says in the open confirmation why a key did nothing.
    pub(super) fn note(&mut self, text: &str) {
        if let Some(Dialog::Confirm(c)) = self.dialog.as_mut() {
            c.note = Some(text.to_string());
        }
    }

    /// Refuses a confirmation that has not been read to its end, saying how to get there.
    pub(super) fn refuse_unread(&mut self) -> bool {
        let left = self.unread_rows();
        if left > 0 {
            let text = format!("read it all first: {left} more line(s) below (Down / PgDn / End)");
            self.note(&text);
            self.flash(text, false);
        }
        left > 0
    }

    /// Scrolls the help by `n` rows, never past its last row.
    pub(super) fn scroll_help(&mut self, n: isize) {
        let (w, h) = self.size;
        let total = super::views::help::lines(self, w).len();
        let rows = super::views::help::visible(h, total);
        let next = (self.views.help_scroll as isize).saturating_add(n).max(0) as usize;
        self.views.help_scroll = pager::clamp(next, total, rows);
    }
}
