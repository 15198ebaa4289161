//! The bench's route table: per world, the inbox and publish scores of every session
//! ([`RouteRecord`]), and over worlds, one row for the routes library and one for the naive
//! client ([`RouteRow`]), from the last session, mean ± SE over worlds.

use serde::Serialize;

use crate::mean::MeanSe;
use crate::routes::{RouteSessionScore, NAIVE_LABEL, ROUTES_LABEL};
use crate::window::Window;
use nostr_outbox_world::Profile;

/// The route scores of one world.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteRecord {
    /// The world's profile.
    pub profile: Profile,
    /// The world's seed.
    pub seed: u64,
    /// Every session.
    pub sessions: Vec<RouteSessionScore>,
}

/// Inbox recall in one window, over worlds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RouteRowWindow {
    /// The window.
    pub window: Window,
    /// Inbox recall in the last session, mean ± SE over worlds with a mention available.
    pub inbox_recall: MeanSe,
}

/// One client's routes over worlds: the routes library's, or the naive client's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteRow {
    /// `routes` or `naive`.
    pub label: String,
    /// Inbox recall per window, shortest first.
    pub windows: Vec<RouteRowWindow>,
    /// Publish reach in the last session, mean ± SE over worlds with a tagged person.
    pub publish_reach: MeanSe,
    /// Relays the inbox asked.
    pub inbox_relays: MeanSe,
    /// Relays a tagged note was sent to, mean per note.
    pub publish_relays: MeanSe,
}

impl RouteRow {
    /// The window `w`, if scored.
    pub fn window(&self, w: Window) -> Option<&RouteRowWindow> {
        self.windows.iter().find(|x| x.window == w)
    }
}

/// The two rows (routes, then naive) over `records`, from each world's last session.
pub fn route_rows(records: &[RouteRecord], windows: &[Window]) -> Vec<RouteRow> {
    if records.is_empty() {
        return Vec::new();
    }
    let mut windows = windows.to_vec();
    windows.sort();
    windows.dedup();
    let last: Vec<&RouteSessionScore> = records.iter().filter_map(|r| r.sessions.last()).collect();
    let over = |f: &dyn Fn(&RouteSessionScore) -> Option<f64>| {
        MeanSe::of(&last.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
    };
    let per_note = |targets: u64, notes: u64| (notes > 0).then(|| targets as f64 / notes as f64);
    // The route's row, or the naive client's: the same figures of the other side of each score.
    let row = |label: &str, naive: bool| RouteRow {
        label: label.to_string(),
        windows: windows
            .iter()
            .map(|&w| RouteRowWindow {
                window: w,
                inbox_recall: over(&|s| {
                    let inbox = s.inbox(w)?;
                    if naive {
                        inbox.naive_recall()
                    } else {
                        inbox.recall()
                    }
                }),
            })
            .collect(),
        publish_reach: over(&|s| {
            if naive {
                s.publish.naive_reach()
            } else {
                s.publish.reach()
            }
        }),
        inbox_relays: over(&|s| {
            let relays = if naive {
                s.naive_inbox_relays
            } else {
                s.inbox_relays
            };
            Some(relays as f64)
        }),
        publish_relays: over(&|s| {
            let p = &s.publish;
            let targets = if naive {
                p.naive_targets
            } else {
                p.routed_targets
            };
            per_note(targets, p.notes)
        }),
    };
    vec![row(ROUTES_LABEL, false), row(NAIVE_LABEL, true)]
}
