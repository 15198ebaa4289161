//! The look of every table the commands print.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};

/// An empty table in the style of every table the commands print.
pub(crate) fn styled_table() -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table
}

/// A cell aligned right: a number.
pub(crate) fn right(text: impl std::fmt::Display) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}
