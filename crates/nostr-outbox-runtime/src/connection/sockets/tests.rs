use std::time::Duration;

use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

use nostr_outbox_fleet::{dead_url, Echo};

use super::*;
use crate::config::RuntimeConfig;

/// Sockets under a budget, dialled with the tests' short timeouts.
#[derive(Clone)]
struct Pool {
    sockets: Sockets,
}

impl Pool {
    fn dial(&self) -> Dial {
        RuntimeConfig::fast_for_tests().dial()
    }

    /// A link to `url` for `role`, which must be made.
    async fn link(&self, url: &str, role: Role) -> Link {
        self.sockets.link(url, role, self.dial()).await.unwrap()
    }

    /// A link to `url` for `role` asked for on a task of its own: whether it was made.
    fn link_later(&self, url: &str, role: Role) -> tokio::task::JoinHandle<bool> {
        let (pool, url) = (self.clone(), url.to_string());
        tokio::spawn(async move { pool.sockets.link(&url, role, pool.dial()).await.is_ok() })
    }
}

async fn echoes<const N: usize>() -> [Echo; N] {
    let mut relays = Vec::new();
    for _ in 0..N {
        relays.push(Echo::start().await);
    }
    relays.try_into().ok().unwrap()
}

/// Sends `text` on `link`, which must take it.
async fn say(link: &mut Link, text: &str) {
    link.send(Message::text(text)).await.unwrap();
}

/// At most `max_sockets`, `reserve` of them kept for short work, each closed after `idle`.
fn capped(max_sockets: usize, reserve: usize, idle: Duration) -> Pool {
    cfg(SocketBudget {
        max_sockets: Some(max_sockets),
        reserve,
        idle,
    })
}

/// No cap, each socket closed after `idle`.
fn idle_after(idle: Duration) -> Pool {
    cfg(SocketBudget {
        idle,
        ..SocketBudget::unbounded()
    })
}

fn cfg(budget: SocketBudget) -> Pool {
    Pool {
        sockets: Sockets::new(budget),
    }
}

async fn text(link: &mut Link) -> String {
    match timeout(Duration::from_secs(2), link.recv()).await {
        Ok(Some(Ok(Read::Frame(Message::Text(t))))) => t.to_string(),
        other => panic!("no frame: {other:?}"),
    }
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}

#[tokio::test]
async fn links_to_one_relay_share_its_socket_and_see_only_their_own_answers() {
    let relay = Echo::start().await;
    let cfg = cfg(SocketBudget::unbounded());
    let mut feed = cfg.link(&relay.url, Role::Feed).await;
    let mut lookup = cfg.link(&relay.url, Role::Lookup).await;
    // The same subscription id on both links: each gets its own EOSE, unchanged.
    say(&mut feed, r#"["REQ","sub-1",{}]"#).await;
    say(&mut lookup, r#"["REQ","sub-1",{}]"#).await;
    assert_eq!(text(&mut feed).await, r#"["EOSE","sub-1"]"#);
    assert_eq!(text(&mut lookup).await, r#"["EOSE","sub-1"]"#);
    assert!(timeout(Duration::from_millis(100), feed.recv())
        .await
        .is_err());
    // An OK goes to the link that sent the event.
    say(&mut lookup, r#"["EVENT",{"id":"abc","kind":1}]"#).await;
    assert_eq!(text(&mut lookup).await, r#"["OK","abc",true,""]"#);
    assert!(timeout(Duration::from_millis(100), feed.recv())
        .await
        .is_err());
    // A frame that names no link reaches every link.
    say(&mut feed, r#"["NOTICE","hello"]"#).await;
    assert_eq!(text(&mut feed).await, r#"["NOTICE","hello"]"#);
    assert_eq!(text(&mut lookup).await, r#"["NOTICE","hello"]"#);
    assert_eq!(relay.accepted(), 1);
    let stats = cfg.sockets.stats();
    assert_eq!((stats.dials, stats.joins, stats.open), (1, 1, 1));
}

#[tokio::test]
async fn the_budget_holds_and_a_waiting_link_takes_an_idle_socket_s_place() {
    let relays = echoes::<3>().await;
    let cfg = capped(2, 0, Duration::from_secs(60));
    let a = cfg.link(&relays[0].url, Role::Lookup).await;
    let b = cfg.link(&relays[1].url, Role::Lookup).await;
    let third = cfg.link_later(&relays[2].url, Role::Lookup);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        !third.is_finished(),
        "a third socket was opened beyond the budget"
    );
    assert_eq!(relays[2].accepted(), 0);
    // Leaving makes `a`'s socket idle; the waiting link has it closed and takes its place.
    drop(a);
    assert!(timeout(Duration::from_secs(2), third)
        .await
        .unwrap()
        .unwrap());
    wait_until("the idle socket closed", || relays[0].open() == 0).await;
    assert_eq!(relays[2].accepted(), 1);
    assert!(cfg.sockets.stats().peak <= 2);
    drop(b);
}

#[tokio::test]
async fn lasting_links_leave_the_reserve_to_short_work() {
    let relays = echoes::<2>().await;
    let cfg = capped(2, 1, Duration::from_secs(60));
    let _feed = cfg.link(&relays[0].url, Role::Feed).await;
    let second_feed = cfg.link_later(&relays[1].url, Role::Route);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!second_feed.is_finished(), "a feed took the reserve");
    // A lookup gets the reserved place at once.
    let lookup = timeout(
        Duration::from_secs(1),
        cfg.link(&relays[1].url, Role::Lookup),
    )
    .await
    .expect("the reserve was free");
    // The waiting feed link joins the lookup's socket instead of opening another.
    assert!(timeout(Duration::from_secs(1), second_feed)
        .await
        .unwrap()
        .unwrap());
    assert_eq!(relays[1].accepted(), 1);
    drop(lookup);
}

#[tokio::test]
async fn a_kept_place_waits_for_its_relay_and_no_other_lasting_link_takes_it() {
    let relays = echoes::<3>().await;
    let cfg = capped(3, 1, Duration::from_secs(60));
    let kept = cfg.sockets.keep(&relays[0].url);
    // Two lasting places, one kept: another relay takes the other one.
    let _routed = cfg.link(&relays[1].url, Role::Feed).await;
    let waiting = cfg.link_later(&relays[2].url, Role::Feed);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!waiting.is_finished(), "a lasting link took the kept place");
    // The relay it is kept for gets it at once.
    let reader = timeout(Duration::from_secs(1), cfg.link(&relays[0].url, Role::Feed))
        .await
        .expect("the kept place was free");
    assert!(!waiting.is_finished(), "the place is the reader's now");
    // Its socket gone (and the place no longer kept), the waiting link takes the place.
    drop(reader);
    drop(kept);
    assert!(timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the freed place was taken")
        .unwrap());
}

#[tokio::test]
async fn a_kept_place_let_go_is_free_for_anyone() {
    let relays = echoes::<2>().await;
    let cfg = capped(2, 1, Duration::from_secs(60));
    let kept = cfg.sockets.keep(&relays[0].url);
    let waiting = cfg.link_later(&relays[1].url, Role::Feed);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!waiting.is_finished(), "a lasting link took the kept place");
    drop(kept);
    assert!(timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the place let go was taken")
        .unwrap());
}

#[tokio::test]
async fn abandoning_ends_the_socket_for_every_link_and_the_next_link_dials_anew() {
    let relay = Echo::start().await;
    let cfg = cfg(SocketBudget::unbounded());
    let mut feed = cfg.link(&relay.url, Role::Feed).await;
    let mut lookup = cfg.link(&relay.url, Role::Lookup).await;
    feed.abandon("flooded".into());
    match timeout(Duration::from_secs(2), lookup.recv())
        .await
        .unwrap()
    {
        Some(Err(why)) => assert!(why.contains("flooded"), "{why}"),
        other => panic!("the other link did not hear the end: {other:?}"),
    }
    assert!(lookup
        .send(Message::text(r#"["REQ","x",{}]"#))
        .await
        .is_err());
    let mut again = cfg.link(&relay.url, Role::Lookup).await;
    say(&mut again, r#"["REQ","x",{}]"#).await;
    assert_eq!(text(&mut again).await, r#"["EOSE","x"]"#);
    assert_eq!(relay.accepted(), 2);
}

#[tokio::test]
async fn an_unused_socket_closes_after_the_idle_time_and_a_failed_dial_is_reported() {
    let relay = Echo::start().await;
    let cfg = idle_after(Duration::from_millis(100));
    let link = cfg.link(&relay.url, Role::Probe).await;
    drop(link);
    wait_until("the socket closed", || relay.open() == 0).await;
    wait_until("the socket was forgotten", || cfg.sockets.stats().open == 0).await;
    let dead = dead_url().await;
    match cfg.sockets.link(&dead, Role::Lookup, cfg.dial()).await {
        Err(DialError::Failed(_)) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a dead address connected"),
    }
    assert_eq!(cfg.sockets.stats().open, 0);
}

#[tokio::test]
async fn a_socket_never_idle_stays_open_for_the_next_link() {
    let relay = Echo::start().await;
    let cfg = idle_after(Duration::MAX);
    let link = cfg.link(&relay.url, Role::Probe).await;
    drop(link);
    // A bound on a hang, far above what a loaded machine needs.
    let mut again = timeout(Duration::from_secs(60), cfg.link(&relay.url, Role::Lookup))
        .await
        .expect("the next link gets the socket");
    say(&mut again, r#"["REQ","x",{}]"#).await;
    assert_eq!(text(&mut again).await, r#"["EOSE","x"]"#);
    assert_eq!(relay.accepted(), 1, "the unused socket was kept");
}

#[tokio::test]
async fn every_link_s_subscriptions_share_the_relay_s_limit() {
    let relay = Echo::start().await;
    let cfg = cfg(SocketBudget::unbounded());
    let mut feed = cfg.link(&relay.url, Role::Feed).await;
    let mut lookup = cfg.link(&relay.url, Role::Lookup).await;
    feed.limit_subscriptions(1);
    say(&mut feed, r#"["REQ","page-1",{}]"#).await;
    assert_eq!(text(&mut feed).await, r#"["EOSE","page-1"]"#);
    // The relay holds one subscription: the lookup's REQ waits for it to close.
    say(&mut lookup, r#"["REQ","look",{}]"#).await;
    assert!(timeout(Duration::from_millis(150), lookup.recv())
        .await
        .is_err());
    say(&mut feed, r#"["CLOSE","page-1"]"#).await;
    assert_eq!(text(&mut lookup).await, r#"["EOSE","look"]"#);
    // A link that leaves with a subscription open has it closed for it.
    drop(lookup);
    wait_until("the lookup's subscription closed", || relay.closes() == 2).await;
    say(&mut feed, r#"["REQ","page-2",{}]"#).await;
    assert_eq!(text(&mut feed).await, r#"["EOSE","page-2"]"#);
}

/// A link leaving tells the pool it left before its socket hears it: a link waiting for a
/// place may have the socket closed (`CloseIdle`) while the socket still counts the leaving
/// link. That close must still happen once the link's detach arrives, not after the idle time.
#[tokio::test]
async fn a_close_asked_for_before_the_last_link_s_detach_arrives_still_closes_the_socket() {
    let relays = echoes::<2>().await;
    // Far beyond the test's bound: a socket left to its idle timer stalls the waiter.
    let cfg = capped(1, 0, Duration::from_secs(3600));
    let a = cfg.link(&relays[0].url, Role::Publish).await;
    let socket = cfg.sockets.inner.lock().sockets[&relays[0].url].socket;
    let waiter = cfg.link_later(&relays[1].url, Role::Publish);
    // The waiter took its link number: it found no place and waits.
    wait_until("the waiter is waiting", || {
        cfg.sockets.inner.lock().next_link == 2
    })
    .await;
    // The pool hears of the leave first; the waiter has the socket told to close while the
    // socket still has the link attached.
    cfg.sockets.inner.left(&relays[0].url, socket);
    wait_until("the waiter asked the unused socket to close", || {
        cfg.sockets.inner.lock().sockets[&relays[0].url].closing
    })
    .await;
    // Only now does the socket hear the link leave.
    drop(a);
    // A bound on a hang, far above what a loaded machine needs and far below the idle time.
    let joined = timeout(Duration::from_secs(60), waiter)
        .await
        .expect("the waiter got the closed socket's place")
        .unwrap();
    assert!(joined);
    assert_eq!(relays[1].accepted(), 1);
}

/// Many short links through a small budget, on a runtime with several threads: every one gets
/// its place as the ones before it leave, none waits for a socket's idle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_short_links_through_a_small_budget_never_wait_for_the_idle_timer() {
    let relay = Echo::start().await;
    let cfg = capped(4, 0, Duration::from_secs(3600));
    let mut tasks = Vec::new();
    for i in 0..300 {
        let (c, url) = (cfg.clone(), format!("{}/{i}", relay.url));
        tasks.push(tokio::spawn(async move {
            let mut link = c.link(&url, Role::Publish).await;
            say(&mut link, &format!(r#"["EVENT",{{"id":"e{i}","kind":1}}]"#)).await;
            match link.recv().await {
                Some(Ok(Read::Frame(Message::Text(t)))) => t.to_string(),
                other => panic!("no OK: {other:?}"),
            }
        }));
    }
    // A bound on a hang, far above what a loaded machine needs and far below the idle time.
    timeout(Duration::from_secs(120), async {
        for task in tasks {
            assert!(task.await.unwrap().starts_with(r#"["OK""#));
        }
    })
    .await
    .expect("a link waited for an idle socket's timer");
    assert!(cfg.sockets.stats().peak <= 4);
}
