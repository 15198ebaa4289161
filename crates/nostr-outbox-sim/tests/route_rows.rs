//! The bench's route table: each world's last session, mean ± SE over worlds.

use nostr_outbox_sim::{
    route_rows, InboxScore, PublishScore, RouteRecord, RouteSessionScore, Window, NAIVE_LABEL,
    ROUTES_LABEL,
};
use nostr_outbox_world::Profile;

fn session(session: u32, routed: u64, naive: u64, reached: u64) -> RouteSessionScore {
    RouteSessionScore {
        session,
        inbox: vec![InboxScore {
            window: Window::Y1,
            available: 10,
            routed,
            naive,
        }],
        publish: PublishScore {
            notes: 2,
            tagged: 4,
            no_read_relays: 1,
            routed: reached,
            naive: 1,
            routed_targets: 6,
            naive_targets: 2,
        },
        inbox_relays: 5,
        naive_inbox_relays: 3,
        violations: 0,
    }
}

#[test]
fn rows_take_the_last_session_of_each_world() {
    let records = vec![
        RouteRecord {
            profile: Profile::Small,
            seed: 1,
            sessions: vec![session(0, 0, 0, 0), session(1, 8, 2, 4)],
        },
        RouteRecord {
            profile: Profile::Small,
            seed: 2,
            sessions: vec![session(0, 0, 0, 0), session(1, 6, 2, 2)],
        },
    ];
    let rows = route_rows(&records, &[Window::Y1]);
    assert_eq!(rows.len(), 2);
    let (routes, naive) = (&rows[0], &rows[1]);
    assert_eq!(
        (routes.label.as_str(), naive.label.as_str()),
        (ROUTES_LABEL, NAIVE_LABEL)
    );
    let inbox = routes.window(Window::Y1).unwrap().inbox_recall;
    assert_eq!(inbox.n, 2);
    assert!((inbox.mean - 0.7).abs() < 1e-12, "{inbox:?}");
    assert!((inbox.se - 0.1).abs() < 1e-12, "{inbox:?}");
    assert!((naive.window(Window::Y1).unwrap().inbox_recall.mean - 0.2).abs() < 1e-12);
    assert!((routes.publish_reach.mean - 0.75).abs() < 1e-12);
    assert!((naive.publish_reach.mean - 0.25).abs() < 1e-12);
    assert_eq!(
        (routes.inbox_relays.mean, naive.inbox_relays.mean),
        (5.0, 3.0)
    );
    assert_eq!(
        (routes.publish_relays.mean, naive.publish_relays.mean),
        (3.0, 1.0)
    );
    assert!(route_rows(&[], &[Window::Y1]).is_empty());
}
