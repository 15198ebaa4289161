//! `outbox world`: generate world files and show their headline facts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nostr_outbox_sim::{generate_in, world_stats, Family, Profile, World};

/// Options of `outbox world`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: WorldCommand,
}

#[derive(Debug, clap::Subcommand)]
enum WorldCommand {
    /// Generate an `outbox-world/1` file, deterministic for (profile, seed).
    Generate {
        /// small (≈200 follows), medium (≈450), large (≈1,800) or huge (≈2,800).
        #[arg(long, default_value = "medium")]
        profile: Profile,
        /// World seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How the knobs are drawn: default, or a family drawing them per seed (decay, amnesia,
        /// churn, skew, indexed, sparse, dense, hinted, tail; `outbox bench --help` says what
        /// each moves).
        #[arg(long, default_value = "default")]
        family: Family,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Show a world file's headline facts (list coverage, liveness, events per window).
    Stats {
        /// The world file.
        file: PathBuf,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        WorldCommand::Generate {
            profile,
            seed,
            family,
            out,
        } => {
            let world = generate_in(family, profile, seed);
            world
                .write_path(&out)
                .with_context(|| format!("writing {}", out.display()))?;
            eprintln!(
                "{}: {} follows, {} relays, {} events → {}",
                crate::text::escape(&world.name),
                world.follows.len(),
                world.relays().len(),
                world.events().len(),
                out.display()
            );
        }
        WorldCommand::Stats { file } => {
            let world =
                World::read_path(&file).with_context(|| format!("reading {}", file.display()))?;
            let s = world_stats(&world);
            let pct = |x: f64| format!("{:.1}%", x * 100.0);
            out!("world              {}", crate::text::escape(&s.name))?;
            out!("follows            {}", s.follows)?;
            out!("without a list     {}", pct(s.no_list_share))?;
            out!("listed relays      {}", s.listed_relays)?;
            out!("  alive            {}", pct(s.listed_alive_share))?;
            out!("  refusing reads   {}", pct(s.listed_refusing_share))?;
            out!("live relays up     {} per session", pct(s.live_up_share))?;
            out!(
                "top relay in       {} of lists",
                pct(s.top_relay_list_share)
            )?;
            out!("median write list  {}", s.median_write_relays)?;
            out!("events             {}", s.events)?;
            out!(
                "  7d / 1yr / 3yr   {} / {} / {}",
                s.events_by_window[0],
                s.events_by_window[1],
                s.events_by_window[2]
            )?;
            out!("silent for 7 days  {}", pct(s.silent_7d_share))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
