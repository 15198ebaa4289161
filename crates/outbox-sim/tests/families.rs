//! World families: the existing families' worlds stay exactly as they were, and each newer
//! family's worlds show the feature it is for.

use outbox_sim::{generate_in, Family, Profile, World};

/// FNV-1a over a world's canonical file: any change to an event, relay, list, cap, monitor
/// entry or mention changes it.
fn fingerprint(world: &World) -> (usize, usize, u64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in world.to_json().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (world.events().len(), world.relays().len(), h)
}

/// The small worlds of the first four families for seeds 1 and 2, as (events, relays, FNV-1a
/// of the world file), recorded before any later knob existed. Knobs added since default to
/// values that draw nothing, so these must never move.
const PINNED: [(Family, u64, (usize, usize, u64)); 8] = [
    (Family::Default, 1, (18_869, 328, 2_706_445_123_754_673_669)),
    (
        Family::Default,
        2,
        (30_681, 315, 12_757_837_304_926_086_016),
    ),
    (Family::Decay, 1, (17_254, 203, 13_315_185_523_018_748_931)),
    (Family::Decay, 2, (14_735, 273, 6_925_053_574_220_951_234)),
    (
        Family::Amnesia,
        1,
        (19_766, 309, 13_240_361_449_304_894_120),
    ),
    (Family::Amnesia, 2, (15_494, 333, 9_471_958_127_064_029_888)),
    (Family::Churn, 1, (19_832, 318, 2_253_399_534_002_275_908)),
    (Family::Churn, 2, (19_917, 320, 5_270_684_251_522_018_764)),
];

#[test]
fn the_first_families_worlds_are_unchanged() {
    for (family, seed, pinned) in PINNED {
        let world = generate_in(family, Profile::Small, seed);
        assert_eq!(fingerprint(&world), pinned, "{family} seed {seed}");
    }
}
