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
    /// The key of the row the operator put the cursor on (a product, a request, an activity),
    /// in tables whose rows have one: a refresh, a re-sort or a filter moves the selection to
    /// wherever that row went, so a write key acts on the row the operator chose, never on a
    /// neighbour that slid under a fixed position.
    pub anchor: Option<String>,
    /// The anchored row is no longer among the rows: nothing is highlighted and no write acts
    /// until the operator moves the cursor.
    pub lost: bool,
    /// Columns scrolled out on the left (`h` / `l`): the first droppable ones, so that those a
    /// narrow terminal dropped on the right come into view.
    pub hscroll: usize,
    /// The most columns scrolling out brings anything into view, as the last frame measured
    /// (None before one was drawn): `l` stops there.
    pub hscroll_max: Cell<Option<usize>>,
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
        self.anchor = None;
        self.lost = false;
    }

    /// The row the cursor is on; None when its row left the table.
    pub fn row(&self) -> Option<usize> {
        (!self.lost).then_some(self.selected)
    }

    /// After the rows changed (`keys`: each row's key, in table order): the selection goes to
    /// the anchored row wherever it is now, or, when it is gone, stays put and highlights
    /// nothing; with no anchor yet, the row under the cursor becomes the anchor.
    pub fn follow<K: AsRef<str>>(&mut self, keys: &[K]) {
        let last = keys.len().saturating_sub(1);
        let found = self
            .anchor
            .as_deref()
            .map(|a| keys.iter().position(|k| k.as_ref() == a));
        match found {
            Some(Some(i)) => {
                self.selected = i;
                self.lost = false;
            }
            Some(None) => {
                self.selected = self.selected.min(last);
                self.lost = true;
            }
            None => {
                self.selected = self.selected.min(last);
                self.anchor = keys.get(self.selected).map(|k| k.as_ref().to_string());
                self.lost = false;
            }
        }
    }

    /// [`Self::follow`] for a table no write acts on (the alerts, which come and go by the
    /// dozen in an incident): when the anchored row is gone, the cursor stays where it was, on
    /// the row now there, rather than highlight nothing.
    pub fn follow_or_stay<K: AsRef<str>>(&mut self, keys: &[K]) {
        self.follow(keys);
        if self.lost {
            self.lost = false;
            self.anchor = keys.get(self.selected).map(|k| k.as_ref().to_string());
        }
    }

    /// The operator moved the cursor to a row (whose key is `key`): it is anchored there.
    pub fn anchor_on(&mut self, key: Option<&str>) {
        self.anchor = key.map(str::to_string);
        self.lost = false;
    }
}
