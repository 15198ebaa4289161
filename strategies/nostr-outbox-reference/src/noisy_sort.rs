//! The order welshman's relays come out in: `sortBy(scoreRelay, relays)` in V8, where the key
//! function draws a fresh `Math.random()` each time it is called, so every comparison is a new
//! coin. The result depends on which comparisons V8's sort makes, so this replays them.
//!
//! V8 sorts with TimSort. Below 64 elements that is one run: the ascending or strictly
//! descending prefix is found (and reversed if descending), then the rest is inserted by binary
//! search. That is replayed exactly, comparison for comparison and draw for draw. From 64
//! elements up V8 cuts the array into runs and merges them with galloping; here the same
//! single-run procedure is applied to the whole array instead — the same kind of noisy order,
//! not V8's exact one.

use rand::{Rng, RngCore};

/// Sorts `items` as `sortBy(x => -(damped(x) · Math.random()), items)` does in V8: each
/// comparison draws for its left element, then its right one, and the one with the larger
/// `damped · draw` goes first.
pub(crate) fn noisy_sort<T: Copy>(
    items: &mut [T],
    damped: impl Fn(T) -> f64,
    rng: &mut dyn RngCore,
) {
    let n = items.len();
    if n < 2 {
        return;
    }
    // The shipped comparator: x = -(d_a · u), y = -(d_b · u'), a first when x < y.
    let mut before = |a: T, b: T| -> std::cmp::Ordering {
        let x = -(damped(a) * rng.random::<f64>());
        let y = -(damped(b) * rng.random::<f64>());
        x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
    };
    // The leading run: strictly descending (then reversed) or non-descending.
    let mut run = 2;
    let descending = before(items[1], items[0]).is_lt();
    let mut previous = items[1];
    while run < n {
        let current = items[run];
        let order = before(current, previous);
        if if descending {
            !order.is_lt()
        } else {
            order.is_lt()
        } {
            break;
        }
        previous = current;
        run += 1;
    }
    if descending {
        items[..run].reverse();
    }
    // Binary insertion of the rest.
    for start in run..n {
        let pivot = items[start];
        let (mut left, mut right) = (0, start);
        while left < right {
            let mid = left + (right - left) / 2;
            if before(pivot, items[mid]).is_lt() {
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        items.copy_within(left..start, left + 1);
        items[left] = pivot;
    }
}
