//! `outbox stats`: what the feed learned about relays, shown and edited: the relay stats and
//! the relays set aside, from either store.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use nostr_outbox_core::{DeliveryStats, RelayStats, UrlPolicy};
use nostr_outbox_runtime::store::load_kept;
use nostr_outbox_runtime::{PenaltyBox, PenaltyEntry};
use nostr_outbox_stats::kept;
use serde_json::{json, Value};

use crate::store::StoreArgs;
use crate::text::{json_safe, shown};

/// Options of `outbox stats`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One relay to show in detail (all that is known about it).
    relay: Option<String>,
    #[command(flatten)]
    keep: StoreArgs,
    /// The table's order: by relay URL, or by learned liveness (most alive first).
    #[arg(long, value_enum, default_value_t = Sort::Url)]
    sort: Sort,
    /// The same as JSON.
    #[arg(long)]
    json: bool,
    /// Forget a relay: its stats and its set-aside entry (repeatable), then save.
    #[arg(long, value_name = "RELAY")]
    forget: Vec<String>,
    /// Lift every set-aside: empty the penalty box, then save.
    #[arg(long)]
    clear_set_asides: bool,
}

/// The table's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Sort {
    /// By relay URL.
    Url,
    /// By the posterior mean of liveness, highest first.
    Liveness,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(stats(args))
}

async fn stats(args: Args) -> anyhow::Result<ExitCode> {
    let location = args.keep.location(false)?;
    if !location.exists() {
        if args.json {
            eprintln!("nothing learned yet");
            out!("{}", json!({ "relays": [] }))?;
        } else {
            out!("nothing learned yet")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let edits = !args.forget.is_empty() || args.clear_set_asides;
    // Showing never moves or writes anything; only an edit opens the store to write.
    let store = if edits {
        location.open()
    } else {
        location.open_read_only()
    };
    let loaded = store.load().await.context("reading the stats")?;
    let kept = load_kept(store.as_ref())
        .await
        .context("reading the relays set aside")?;
    for w in loaded.warnings.iter().chain(&kept.warnings) {
        eprintln!("warning: {}", shown(&w.to_string()));
    }
    let mut stats = loaded.stats;
    let mut penalties = kept.penalties;

    let now = now_secs();
    if edits {
        // A forget and a clear are stamped, so a feed that loaded before them and saves after
        // cannot bring back what they dropped (see `nostr_outbox_stats::kept`).
        let mut lifted_urls = Vec::new();
        for raw in &args.forget {
            let url = key(raw, &stats, &penalties);
            let known = stats.forget_at(&url, now) | penalties.forget(&url);
            if known {
                eprintln!("forgot {}", shown(&url));
            } else {
                eprintln!("nothing known about {}", shown(raw));
            }
            lifted_urls.push(url);
        }
        if args.clear_set_asides {
            let lifted = penalties.entries().count();
            penalties = PenaltyBox::new();
            eprintln!("lifted {lifted} set-aside entries");
        }
        store.save(&stats).await.context("saving the stats")?;
        let mut doc = serde_json::to_value(&penalties).context("encoding the relays set aside")?;
        for url in &lifted_urls {
            kept::mark_lifted(&mut doc, url, now);
        }
        if args.clear_set_asides {
            kept::mark_cleared(&mut doc, now);
        }
        store
            .save_penalties(&doc)
            .await
            .context("saving the relays set aside")?;
        store
            .save_lists(&kept.lists)
            .await
            .context("saving the relay lists")?;
        return Ok(ExitCode::SUCCESS);
    }

    if let Some(raw) = &args.relay {
        let url = key(raw, &stats, &penalties);
        let known = stats.iter().any(|(u, _)| u == url) || penalties.get(&url).is_some();
        if !known {
            eprintln!("nothing known about {}", shown(raw));
            return Ok(ExitCode::FAILURE);
        }
        let row = row(&url, &stats, &penalties, now);
        if args.json {
            out!("{}", json_safe(&pretty(&row.json())?))?;
        } else {
            detail(&row)?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    let mut rows: Vec<Row> = urls(&stats, &penalties)
        .iter()
        .map(|url| row(url, &stats, &penalties, now))
        .collect();
    if args.sort == Sort::Liveness {
        rows.sort_by(|a, b| {
            let live = |r: &Row| r.stats.map_or(0.5, |s| s.live_mean());
            live(b).total_cmp(&live(a)).then_with(|| a.url.cmp(&b.url))
        });
    }
    if args.json {
        let doc = json!({ "relays": rows.iter().map(Row::json).collect::<Vec<_>>() });
        out!("{}", json_safe(&pretty(&doc)?))?;
    } else if rows.is_empty() {
        out!("nothing learned yet")?;
    } else {
        table(&rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn pretty(value: &Value) -> std::io::Result<String> {
    serde_json::to_string_pretty(value).map_err(std::io::Error::other)
}

/// The key `raw` is kept under: as given if known, else in canonical form.
fn key(raw: &str, stats: &DeliveryStats, penalties: &PenaltyBox) -> String {
    let known = |u: &str| stats.iter().any(|(k, _)| k == u) || penalties.get(u).is_some();
    if known(raw) {
        return raw.to_string();
    }
    UrlPolicy::permissive()
        .canonicalize(raw.trim())
        .unwrap_or_else(|_| raw.to_string())
}

/// Every relay with stats or a set-aside entry, by URL.
fn urls(stats: &DeliveryStats, penalties: &PenaltyBox) -> BTreeSet<String> {
    stats
        .iter()
        .map(|(u, _)| u.to_string())
        .chain(penalties.entries().map(|(u, _)| u.to_string()))
        .collect()
}

/// What is known about one relay.
struct Row {
    url: String,
    stats: Option<RelayStats>,
    penalty: Option<PenaltyEntry>,
    /// Its set-aside deadline has passed: it is no longer left out of plans.
    expired: bool,
}

fn row(url: &str, stats: &DeliveryStats, penalties: &PenaltyBox, now: u64) -> Row {
    let penalty = penalties.get(url).cloned();
    Row {
        url: url.to_string(),
        stats: stats.iter().find(|(u, _)| *u == url).map(|(_, s)| *s),
        expired: penalty
            .as_ref()
            .and_then(|p| p.until)
            .is_some_and(|until| until <= now),
        penalty,
    }
}

/// The clock, in unix seconds (0 before 1970).
fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A set-aside deadline as shown: its time, marked when it has passed; `-` when none.
fn until(r: &Row) -> String {
    match r.penalty.as_ref().and_then(|p| p.until) {
        None => "-".into(),
        Some(t) if r.expired => format!("{} (expired)", time(t)),
        Some(t) => time(t),
    }
}

/// A finite number for JSON (`null` otherwise).
fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

impl Row {
    fn json(&self) -> Value {
        let stats = self.stats.map(|s| {
            json!({
                "liveness": num(s.live_mean()),
                "delivery": num(s.mean()),
                "completeness": num(s.completeness_mean()),
                "depth_secs": num(s.depth_secs),
                "latency_ms": s.latency_ms.map(num),
                "updated_at": s.updated_at,
                "updated": time(s.updated_at),
                "session": s.session,
                "asked": s.asked,
                "failures": s.failures,
                "alpha": num(s.alpha),
                "beta": num(s.beta),
                "live_alpha": num(s.live_alpha),
                "live_beta": num(s.live_beta),
                "kept_alpha": num(s.kept_alpha),
                "kept_beta": num(s.kept_beta),
            })
        });
        let penalty = self.penalty.as_ref().map(|p| {
            json!({
                "until": p.until,
                "set_aside_until": p.until.map(time),
                "expired": self.expired,
                "reason": p.last_reason,
                "strikes": p.strikes,
                "times": p.times,
                "misbehaved": p.misbehaved,
                "needs_sign_in": p.needs_sign_in,
                "needs_payment": p.needs_payment,
                "rate_limited": p.rate_limited,
            })
        });
        json!({ "relay": self.url, "stats": stats, "set_aside": penalty })
    }
}

/// Unix seconds in RFC 3339 (the number itself where no date can be written).
fn time(secs: u64) -> String {
    // Past 9999-12-31 RFC 3339 has no form.
    if secs > 253_402_300_799 {
        return secs.to_string();
    }
    match UNIX_EPOCH.checked_add(Duration::from_secs(secs)) {
        Some(t) => humantime::format_rfc3339_seconds(t).to_string(),
        None => secs.to_string(),
    }
}

/// A retention depth: days, or hours below a day; `-` when unknown.
fn depth(secs: f64) -> String {
    if secs.is_nan() || secs <= 0.0 {
        "-".into()
    } else if secs >= 86_400.0 {
        format!("{:.0}d", secs / 86_400.0)
    } else {
        format!("{:.0}h", secs / 3600.0)
    }
}

/// A posterior mean, `-` where nothing was learned (the uniform prior).
fn mean(alpha: f64, beta: f64) -> String {
    if alpha == 1.0 && beta == 1.0 {
        "-".into()
    } else {
        format!("{:.2}", alpha / (alpha + beta))
    }
}

fn table(rows: &[Row]) -> std::io::Result<()> {
    let width = rows
        .iter()
        .map(|r| shown(&r.url).chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 60);
    out!(
        "{:<width$}  {:>5}  {:>5}  {:>5}  {:>6}  {:<20}  {:<30}  {:>7}  {:<7}  reason",
        "relay",
        "live",
        "deliv",
        "compl",
        "depth",
        "updated",
        "set aside until",
        "strikes",
        "sign-in",
    )?;
    for r in rows {
        let (live, deliv, compl, dep, updated) = match &r.stats {
            Some(s) => (
                mean(s.live_alpha, s.live_beta),
                mean(s.alpha, s.beta),
                mean(s.kept_alpha, s.kept_beta),
                depth(s.depth_secs),
                time(s.updated_at),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
        };
        let (until, strikes, sign_in, reason) = match &r.penalty {
            Some(p) => (
                until(r),
                p.strikes.to_string(),
                yes_no(p.needs_sign_in).to_string(),
                shown(&p.last_reason),
            ),
            None => ("-".into(), "-".into(), "-".into(), String::new()),
        };
        out!(
            "{:<width$}  {live:>5}  {deliv:>5}  {compl:>5}  {dep:>6}  {updated:<20}  {until:<30}  {strikes:>7}  {sign_in:<7}  {reason}",
            shown(&r.url),
        )?;
    }
    Ok(())
}

fn detail(r: &Row) -> std::io::Result<()> {
    out!("relay            {}", shown(&r.url))?;
    match &r.stats {
        Some(s) => {
            out!(
                "liveness         {:.3}  (Beta {}, {})",
                s.live_mean(),
                s.live_alpha,
                s.live_beta
            )?;
            out!(
                "delivery         {:.3}  (Beta {}, {})",
                s.mean(),
                s.alpha,
                s.beta
            )?;
            out!(
                "completeness     {:.3}  (Beta {}, {})",
                s.completeness_mean(),
                s.kept_alpha,
                s.kept_beta
            )?;
            out!(
                "depth            {} ({} s)",
                depth(s.depth_secs),
                s.depth_secs
            )?;
            match s.latency_ms {
                Some(l) => out!("latency          {l:.0} ms")?,
                None => out!("latency          -")?,
            }
            out!("asked            {}", s.asked)?;
            out!("failures         {}", s.failures)?;
            out!(
                "updated          {} (session {})",
                time(s.updated_at),
                s.session
            )?;
        }
        None => out!("stats            none")?,
    }
    match &r.penalty {
        Some(p) => {
            out!("set aside until  {}", until(r))?;
            out!("reason           {}", shown(&p.last_reason))?;
            out!("strikes          {}", p.strikes)?;
            out!("set-asides       {} in a row", p.times)?;
            out!("misbehaved       {}", yes_no(p.misbehaved))?;
            out!("needs sign-in    {}", yes_no(p.needs_sign_in))?;
            out!("needs payment    {}", yes_no(p.needs_payment))?;
            out!("rate limited     {}", yes_no(p.rate_limited))?;
        }
        None => out!("set aside        no")?,
    }
    Ok(())
}

/// A flag as the table and the detail print it.
fn yes_no(flag: bool) -> &'static str {
    if flag {
        "yes"
    } else {
        "no"
    }
}
