//! A table's selection, scroll position and filter: the part of a view's state every table
//! shares (each view owns one).

use std::cell::Cell;

/// Selection, scroll position and filter of one table.
#[derive(Debug, Default)]
pub struct TableCursor {
    pub selected: usize,
    /// The first visible row. Rendering keeps the selection in view and remembers where it
    /// scrolled to (a `Cell`, so views stay functions of `&App`, like ratatui's TableState).
    pub offset: Cell<usize>,
    pub filter: String,
}

impl TableCursor {
    /// The first row to draw so that `selected` is visible in `height` rows, scrolling as
    /// little as possible from the last frame.
    pub fn window(&self, len: usize, height: usize) -> usize {
        if height == 0 || len == 0 {
            self.offset.set(0);
            return 0;
        }
        let selected = self.selected.min(len - 1);
        let mut offset = self.offset.get().min(len.saturating_sub(height));
        if selected < offset {
            offset = selected;
        } else if selected >= offset + height {
            offset = selected + 1 - height;
        }
        self.offset.set(offset);
        offset
    }
}

/// Case-insensitive "contains" of an already lower-cased needle.
pub fn matches(hay: &str, needle_lower: &str) -> bool {
    needle_lower.is_empty() || hay.to_lowercase().contains(needle_lower)
}

impl TableCursor {
    /// The filter, lower-cased for [`matches()`].
    pub fn needle(&self) -> String {
        self.filter.to_lowercase()
    }

    /// Keeps the selection inside `len` rows.
    pub fn clamp(&mut self, len: usize) {
        self.selected = self.selected.min(len.saturating_sub(1));
    }

    /// Back to the first row, scrolled to the top (a new activity).
    pub fn reset(&mut self) {
        self.selected = 0;
        self.offset.set(0);
    }
}
