//! `filter_decomposition`: per follow, the first N write relays in list order (rust-nostr).

use outbox_core::config::ConfigIssue;
use outbox_core::{PlanInput, Selection, Selector, StrategyConfig};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::{default_per_author, per_author, validate_per_author, DEFAULT_PER_AUTHOR};

/// `[strategy] type = "filter_decomposition"`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterDecompositionConfig {
    /// Relays each follow keeps, from the front of its list (also the per-author cap).
    #[serde(default = "default_per_author")]
    pub per_author: usize,
}

impl Default for FilterDecompositionConfig {
    fn default() -> Self {
        Self {
            per_author: DEFAULT_PER_AUTHOR,
        }
    }
}

#[typetag::serde(name = "filter_decomposition")]
impl StrategyConfig for FilterDecompositionConfig {
    fn validate(&self) -> Vec<ConfigIssue> {
        validate_per_author(self.per_author).into_iter().collect()
    }

    fn build(&self) -> Box<dyn Selector> {
        Box::new(FilterDecomposition::new(self.per_author))
    }
}

outbox_core::register_strategy! {
    name: "filter_decomposition",
    summary: "per follow, the first N write relays in list order (rust-nostr)",
    example: "type = \"filter_decomposition\"\nper_author = 3\n",
}

/// The filter-decomposition selector. Uses no randomness and no learned stats.
#[derive(Debug)]
pub struct FilterDecomposition {
    per_author: usize,
}

impl FilterDecomposition {
    /// Keeps the first `per_author` relays of each list.
    pub fn new(per_author: usize) -> Self {
        Self {
            per_author: per_author.max(1),
        }
    }
}

impl Selector for FilterDecomposition {
    fn name(&self) -> &str {
        "filter_decomposition"
    }

    fn per_author_cap(&self) -> Option<usize> {
        Some(self.per_author)
    }

    fn select(&mut self, input: &PlanInput<'_>, _rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        let url_rank = per_author::url_ranks(table);
        per_author::select(
            table,
            self.per_author,
            input.max_connections,
            &url_rank,
            |author, out| out.extend_from_slice(table.write_relays(author)),
        )
    }
}
