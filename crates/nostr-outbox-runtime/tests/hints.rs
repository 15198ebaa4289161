//! Relay hints in the runtime: with `hints = true`, a follow with no relay list is asked on the
//! relay the reader's kind:3 names beside them; without it, only the residual asks.

use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
use nostr_outbox_fleet::*;

async fn run(hinted: &RealRelay, reader: &RealRelay, hints_on: bool) -> usize {
    let me = keys(50);
    let follow = keys(1);
    let contacts = EventBuilder::new(Kind::ContactList, "")
        .tags([Tag::parse([
            "p",
            follow.public_key().to_hex().as_str(),
            hinted.url.as_str(),
        ])
        .unwrap()])
        .finalize(&me)
        .unwrap();
    let toml = format!(
        "max_connections = 4\nhints = {hints_on}\n[strategy]\ntype = \"recall\"\nexplore = false\n"
    );
    let mut input = local_input(router(&toml), vec![follow.public_key()], [&reader.url]);
    input.hints = nostr_outbox_core::contact_list_hints(&contacts);
    let (summary, out) = start_once(input, given_lists(true)).await;
    assert_eq!(
        summary.relays.contains_key(&hinted.url),
        hints_on,
        "{:?}",
        summary.relays
    );
    out.notes.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_3_hint_reaches_a_follow_without_a_list() {
    let [hinted, reader] = RealRelay::several().await;
    hinted
        .store(&note(&keys(1), now() - 60, "where the hint says"))
        .await;
    assert_eq!(
        run(&hinted, &reader, false).await,
        0,
        "the residual alone misses it"
    );
    assert_eq!(run(&hinted, &reader, true).await, 1, "the hint finds it");
}
