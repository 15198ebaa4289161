//! A world prepared for the simulator: the route table a client would build from its lists,
//! each follow's declared write relays, and each relay's events in the order it answers.

use nostr_outbox_core::{seen_on_hints, DeliveryStats, Hint, RouteTable, UrlPolicy};

use nostr_outbox_world::World;

/// A world prepared for scoring: the client's route table and each follow's declared write
/// relays as world relay ids.
#[derive(Debug)]
pub struct SimWorld {
    /// The world.
    pub world: World,
    /// How the world's relay URLs were read (as a live client would).
    pub policy: UrlPolicy,
    /// The route table a client builds from the world's lists (`AuthorId(i)` is follow `i`).
    pub table: RouteTable,
    /// Per follow, the declared write relays (newest list, no marker counts as write) that
    /// exist in the world, as world relay ids.
    declared: Vec<Vec<u32>>,
    /// Per route-table relay, its world relay id (`None`: not in the world, never answers).
    table_to_world: Vec<Option<u32>>,
    /// Per world relay, the events it stores as (`created_at`, event index), newest first and
    /// by id within a second: the order a relay answers in, sorted once.
    relay_events: Vec<Vec<(u64, u32)>>,
    /// Per follow, its rank in public-key order (the order a REQ filter lists authors in).
    key_rank: Vec<u32>,
}

impl SimWorld {
    /// The world relay of route-table relay `relay` (`None`: not in the world, never
    /// answers).
    pub fn world_relay(&self, relay: nostr_outbox_core::RelayId) -> Option<u32> {
        self.table_to_world[relay.index()]
    }

    /// Whether world relay `relay` is one of follow `author`'s declared write relays.
    pub fn is_declared(&self, author: u32, relay: u32) -> bool {
        self.declared
            .get(author as usize)
            .is_some_and(|d| d.contains(&relay))
    }

    /// Prepares a world with the default URL policy.
    pub fn new(world: World) -> Self {
        Self::with_policy(world, &UrlPolicy::default())
    }

    /// Prepares a world; lists go through `policy` exactly as live. Declared write relays are
    /// read with the same policy but without its list-length cap (the cap is a client choice,
    /// not what the author declared).
    pub fn with_policy(world: World, policy: &UrlPolicy) -> Self {
        let table = world.route_table(policy);
        let uncapped = UrlPolicy {
            max_write_relays: usize::MAX,
            ..policy.clone()
        };
        let full = world.route_table(&uncapped);
        let declared = full
            .authors()
            .map(|a| {
                full.write_relays(a)
                    .iter()
                    .filter_map(|&r| world.relay_id(full.url(r)))
                    .collect()
            })
            .collect();
        let table_to_world = table
            .relays()
            .map(|r| world.relay_id(table.url(r)))
            .collect();
        let mut relay_events: Vec<Vec<(u64, u32)>> = vec![Vec::new(); world.relays().len()];
        for (i, e) in world.events().iter().enumerate() {
            for &r in world.event_relays(e) {
                if world.relays()[r as usize].exists {
                    relay_events[r as usize].push((e.created_at, i as u32));
                }
            }
        }
        let events = world.events();
        for list in &mut relay_events {
            list.sort_unstable_by(|a, b| {
                b.0.cmp(&a.0)
                    .then_with(|| events[a.1 as usize].id.cmp(&events[b.1 as usize].id))
            });
        }
        let mut by_key: Vec<u32> = (0..world.follows.len() as u32).collect();
        by_key.sort_unstable_by_key(|&a| world.follows[a as usize]);
        let mut key_rank = vec![0u32; by_key.len()];
        for (rank, &a) in by_key.iter().enumerate() {
            key_rank[a as usize] = rank as u32;
        }
        Self {
            policy: policy.clone(),
            world,
            table,
            declared,
            table_to_world,
            relay_events,
            key_rank,
        }
    }

    /// The events world relay `relay` stores, as (`created_at`, index into
    /// [`World::events`]), newest first and by id ascending within a second.
    pub fn relay_events(&self, relay: u32) -> &[(u64, u32)] {
        self.relay_events
            .get(relay as usize)
            .map_or(&[], |v| v.as_slice())
    }

    /// A follow's rank in public-key order (how a REQ filter orders its authors).
    pub fn key_rank(&self, author: u32) -> u32 {
        self.key_rank
            .get(author as usize)
            .copied()
            .unwrap_or(u32::MAX)
    }

    /// A follow's declared write relays that exist in the world.
    pub fn declared(&self, author: u32) -> &[u32] {
        &self.declared[author as usize]
    }

    /// The hints a client that knows them gives its route table at a session's start: the
    /// world's `hints`, and the relays `stats` saw each follow's notes arrive on
    /// ([`nostr_outbox_core::seen_on_hints`]).
    pub fn client_hints(&self, stats: &DeliveryStats) -> Vec<Hint> {
        let mut hints = self.world.hints().to_vec();
        hints.extend(seen_on_hints(stats, self.policy.max_write_relays));
        hints
    }

    /// The route table of a client that knows relay hints, at a session's start: the lists,
    /// then [`client_hints`](Self::client_hints), through the world's policy. Follows keep
    /// their ids ([`SimWorld::table`]'s); relays are matched by URL.
    pub fn hinted_table(&self, stats: &DeliveryStats) -> RouteTable {
        let seen = seen_on_hints(stats, self.policy.max_write_relays);
        self.world.route_table_with_hints(&self.policy, &seen)
    }
}
