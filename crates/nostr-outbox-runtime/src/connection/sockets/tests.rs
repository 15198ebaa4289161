use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

use super::*;
use crate::config::RuntimeConfig;

/// A relay that answers every REQ with EOSE, every EVENT with OK, and counts its sockets and
/// the CLOSEs it was sent.
struct Echo {
    url: String,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    closes: Arc<AtomicUsize>,
}

impl Echo {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let closes = Arc::new(AtomicUsize::new(0));
        let (a, o, c) = (accepted.clone(), open.clone(), closes.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let (open, closes) = (o.clone(), c.clone());
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await {
                        while let Some(Ok(Message::Text(text))) = ws.next().await {
                            let v: serde_json::Value = match serde_json::from_str(text.as_str()) {
                                Ok(v) => v,
                                Err(_) => continue,
                            };
                            let reply = match v[0].as_str() {
                                Some("REQ") => serde_json::json!(["EOSE", v[1]]),
                                Some("EVENT") => serde_json::json!(["OK", v[1]["id"], true, ""]),
                                Some("NOTICE") => serde_json::json!(["NOTICE", v[1]]),
                                Some("CLOSE") => {
                                    closes.fetch_add(1, Ordering::SeqCst);
                                    continue;
                                }
                                _ => continue,
                            };
                            if ws.send(Message::text(reply.to_string())).await.is_err() {
                                break;
                            }
                        }
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            url,
            accepted,
            open,
            closes,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// Sockets under a budget, dialled with the tests' short timeouts.
#[derive(Clone)]
struct Pool {
    sockets: Sockets,
}

impl Pool {
    fn dial(&self) -> Dial {
        RuntimeConfig::fast_for_tests().dial()
    }
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
    let mut feed = cfg
        .sockets
        .link(&relay.url, Role::Feed, cfg.dial())
        .await
        .unwrap();
    let mut lookup = cfg
        .sockets
        .link(&relay.url, Role::Lookup, cfg.dial())
        .await
        .unwrap();
    // The same subscription id on both links: each gets its own EOSE, unchanged.
    feed.send(Message::text(r#"["REQ","sub-1",{}]"#))
        .await
        .unwrap();
    lookup
        .send(Message::text(r#"["REQ","sub-1",{}]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut feed).await, r#"["EOSE","sub-1"]"#);
    assert_eq!(text(&mut lookup).await, r#"["EOSE","sub-1"]"#);
    assert!(timeout(Duration::from_millis(100), feed.recv())
        .await
        .is_err());
    // An OK goes to the link that sent the event.
    lookup
        .send(Message::text(r#"["EVENT",{"id":"abc","kind":1}]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut lookup).await, r#"["OK","abc",true,""]"#);
    assert!(timeout(Duration::from_millis(100), feed.recv())
        .await
        .is_err());
    // A frame that names no link reaches every link.
    feed.send(Message::text(r#"["NOTICE","hello"]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut feed).await, r#"["NOTICE","hello"]"#);
    assert_eq!(text(&mut lookup).await, r#"["NOTICE","hello"]"#);
    assert_eq!(relay.accepted(), 1);
    let stats = cfg.sockets.stats();
    assert_eq!((stats.dials, stats.joins, stats.open), (1, 1, 1));
}

#[tokio::test]
async fn the_budget_holds_and_a_waiting_link_takes_an_idle_socket_s_place() {
    let relays = [
        Echo::start().await,
        Echo::start().await,
        Echo::start().await,
    ];
    let cfg = cfg(SocketBudget {
        max_sockets: Some(2),
        reserve: 0,
        idle: Duration::from_secs(60),
    });
    let a = cfg
        .sockets
        .link(&relays[0].url, Role::Lookup, cfg.dial())
        .await
        .unwrap();
    let b = cfg
        .sockets
        .link(&relays[1].url, Role::Lookup, cfg.dial())
        .await
        .unwrap();
    let sockets = cfg.sockets.clone();
    let (url, c) = (relays[2].url.clone(), cfg.clone());
    let third =
        tokio::spawn(async move { sockets.link(&url, Role::Lookup, c.dial()).await.is_ok() });
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
    let relays = [Echo::start().await, Echo::start().await];
    let cfg = cfg(SocketBudget {
        max_sockets: Some(2),
        reserve: 1,
        idle: Duration::from_secs(60),
    });
    let _feed = cfg
        .sockets
        .link(&relays[0].url, Role::Feed, cfg.dial())
        .await
        .unwrap();
    let sockets = cfg.sockets.clone();
    let (url, c) = (relays[1].url.clone(), cfg.clone());
    let second_feed =
        tokio::spawn(async move { sockets.link(&url, Role::Route, c.dial()).await.is_ok() });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!second_feed.is_finished(), "a feed took the reserve");
    // A lookup gets the reserved place at once.
    let lookup = timeout(
        Duration::from_secs(1),
        cfg.sockets.link(&relays[1].url, Role::Lookup, cfg.dial()),
    )
    .await
    .expect("the reserve was free")
    .unwrap();
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
    let relays = [
        Echo::start().await,
        Echo::start().await,
        Echo::start().await,
    ];
    let cfg = cfg(SocketBudget {
        max_sockets: Some(3),
        reserve: 1,
        idle: Duration::from_secs(60),
    });
    let kept = cfg.sockets.keep(&relays[0].url);
    // Two lasting places, one kept: another relay takes the other one.
    let _routed = cfg
        .sockets
        .link(&relays[1].url, Role::Feed, cfg.dial())
        .await
        .unwrap();
    let sockets = cfg.sockets.clone();
    let (url, c) = (relays[2].url.clone(), cfg.clone());
    let waiting =
        tokio::spawn(async move { sockets.link(&url, Role::Feed, c.dial()).await.is_ok() });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!waiting.is_finished(), "a lasting link took the kept place");
    // The relay it is kept for gets it at once.
    let reader = timeout(
        Duration::from_secs(1),
        cfg.sockets.link(&relays[0].url, Role::Feed, cfg.dial()),
    )
    .await
    .expect("the kept place was free")
    .unwrap();
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
    let relays = [Echo::start().await, Echo::start().await];
    let cfg = cfg(SocketBudget {
        max_sockets: Some(2),
        reserve: 1,
        idle: Duration::from_secs(60),
    });
    let kept = cfg.sockets.keep(&relays[0].url);
    let sockets = cfg.sockets.clone();
    let (url, c) = (relays[1].url.clone(), cfg.clone());
    let waiting =
        tokio::spawn(async move { sockets.link(&url, Role::Feed, c.dial()).await.is_ok() });
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
    let mut feed = cfg
        .sockets
        .link(&relay.url, Role::Feed, cfg.dial())
        .await
        .unwrap();
    let mut lookup = cfg
        .sockets
        .link(&relay.url, Role::Lookup, cfg.dial())
        .await
        .unwrap();
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
    let mut again = cfg
        .sockets
        .link(&relay.url, Role::Lookup, cfg.dial())
        .await
        .unwrap();
    again
        .send(Message::text(r#"["REQ","x",{}]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut again).await, r#"["EOSE","x"]"#);
    assert_eq!(relay.accepted(), 2);
}

#[tokio::test]
async fn an_unused_socket_closes_after_the_idle_time_and_a_failed_dial_is_reported() {
    let relay = Echo::start().await;
    let cfg = cfg(SocketBudget {
        idle: Duration::from_millis(100),
        ..SocketBudget::unbounded()
    });
    let link = cfg
        .sockets
        .link(&relay.url, Role::Probe, cfg.dial())
        .await
        .unwrap();
    drop(link);
    wait_until("the socket closed", || relay.open() == 0).await;
    wait_until("the socket was forgotten", || cfg.sockets.stats().open == 0).await;
    let dead = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        drop(listener);
        url
    };
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
    let cfg = cfg(SocketBudget {
        idle: Duration::MAX,
        ..SocketBudget::unbounded()
    });
    let link = cfg
        .sockets
        .link(&relay.url, Role::Probe, cfg.dial())
        .await
        .unwrap();
    drop(link);
    // A bound on a hang, far above what a loaded machine needs.
    let mut again = timeout(
        Duration::from_secs(60),
        cfg.sockets.link(&relay.url, Role::Lookup, cfg.dial()),
    )
    .await
    .expect("the next link gets the socket")
    .unwrap();
    again
        .send(Message::text(r#"["REQ","x",{}]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut again).await, r#"["EOSE","x"]"#);
    assert_eq!(relay.accepted(), 1, "the unused socket was kept");
}

#[tokio::test]
async fn every_link_s_subscriptions_share_the_relay_s_limit() {
    let relay = Echo::start().await;
    let cfg = cfg(SocketBudget::unbounded());
    let mut feed = cfg
        .sockets
        .link(&relay.url, Role::Feed, cfg.dial())
        .await
        .unwrap();
    let mut lookup = cfg
        .sockets
        .link(&relay.url, Role::Lookup, cfg.dial())
        .await
        .unwrap();
    feed.limit_subscriptions(1);
    feed.send(Message::text(r#"["REQ","page-1",{}]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut feed).await, r#"["EOSE","page-1"]"#);
    // The relay holds one subscription: the lookup's REQ waits for it to close.
    lookup
        .send(Message::text(r#"["REQ","look",{}]"#))
        .await
        .unwrap();
    assert!(timeout(Duration::from_millis(150), lookup.recv())
        .await
        .is_err());
    feed.send(Message::text(r#"["CLOSE","page-1"]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut lookup).await, r#"["EOSE","look"]"#);
    // A link that leaves with a subscription open has it closed for it.
    drop(lookup);
    wait_until("the lookup's subscription closed", || {
        relay.closes.load(Ordering::SeqCst) == 2
    })
    .await;
    feed.send(Message::text(r#"["REQ","page-2",{}]"#))
        .await
        .unwrap();
    assert_eq!(text(&mut feed).await, r#"["EOSE","page-2"]"#);
}

/// A link leaving tells the pool it left before its socket hears it: a link waiting for a
/// place may have the socket closed (`CloseIdle`) while the socket still counts the leaving
/// link. That close must still happen once the link's detach arrives, not after the idle time.
#[tokio::test]
async fn a_close_asked_for_before_the_last_link_s_detach_arrives_still_closes_the_socket() {
    let relays = [Echo::start().await, Echo::start().await];
    let cfg = cfg(SocketBudget {
        max_sockets: Some(1),
        reserve: 0,
        // Far beyond the test's bound: a socket left to its idle timer stalls the waiter.
        idle: Duration::from_secs(3600),
    });
    let a = cfg
        .sockets
        .link(&relays[0].url, Role::Publish, cfg.dial())
        .await
        .unwrap();
    let socket = cfg.sockets.inner.lock().sockets[&relays[0].url].socket;
    let sockets = cfg.sockets.clone();
    let (url, c) = (relays[1].url.clone(), cfg.clone());
    let waiter =
        tokio::spawn(async move { sockets.link(&url, Role::Publish, c.dial()).await.is_ok() });
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
    let cfg = cfg(SocketBudget {
        max_sockets: Some(4),
        reserve: 0,
        idle: Duration::from_secs(3600),
    });
    let mut tasks = Vec::new();
    for i in 0..300 {
        let (c, url) = (cfg.clone(), format!("{}/{i}", relay.url));
        tasks.push(tokio::spawn(async move {
            let mut link = c.sockets.link(&url, Role::Publish, c.dial()).await.unwrap();
            let event = format!(r#"["EVENT",{{"id":"e{i}","kind":1}}]"#);
            link.send(Message::text(event)).await.unwrap();
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
