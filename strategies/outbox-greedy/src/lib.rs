//! Greedy.
