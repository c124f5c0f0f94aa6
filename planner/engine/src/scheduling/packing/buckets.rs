//! The pods of one re-pack grouped by signature, and how a strategy picks the next pod for a
//! claim ([`Fill`]).

use crate::scheduling::run::Run;

/// Most distinct signatures a re-pack works with ([`Buckets::new`] gives up beyond: the
/// balanced re-pack scores every signature for every pod it adds).
const BALANCED_MAX_SIGNATURES: usize = 512;

/// How a re-pack ([`super::lp_guided::lp_pack`], [`super::greedy::greedy_pack`]) picks the next
/// pod for a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fill {
    /// Largest `Σ_r share_r × free_r` (big pods that use the free room).
    DotProduct,
    /// Best aligned with the free room (cosine, rounded), then largest.
    Cosine,
}

/// The pods of one re-pack grouped by signature (largest index first within a bucket), with
/// the pool's instance types each signature fits, as a mask and as a list, and which types any
/// of them fits. `None` when some pod fits nowhere or there are too many signatures.
pub(super) struct Buckets {
    /// Per signature: its pods, largest index first.
    pub(super) buckets: Vec<(u32, Vec<u32>)>,
    /// Per bucket: which of the pool's types it fits.
    pub(super) fit: Vec<Vec<bool>>,
    /// Per bucket: the pool's types it fits, as a list.
    pub(super) fit_list: Vec<std::rc::Rc<[u32]>>,
    /// Which of the pool's types any bucket fits.
    pub(super) usable: Vec<bool>,
}

// === impl Buckets ===

impl Buckets {
    /// Groups `items` (pods of pool `p`) by signature.
    pub(super) fn new(run: &mut Run<'_, '_>, p: usize, items: &[u32]) -> Option<Self> {
        let pool = &run.s.pools[p];
        let mut grouped: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for &i in items {
            grouped
                .entry(run.items[i as usize].sig)
                .or_default()
                .push(i);
        }
        if grouped.len() > BALANCED_MAX_SIGNATURES {
            return None;
        }
        let buckets: Vec<(u32, Vec<u32>)> = grouped
            .into_iter()
            .map(|(sig, mut v)| {
                v.sort_unstable();
                v.reverse();
                (sig, v)
            })
            .collect();
        let mut fit = Vec::with_capacity(buckets.len());
        let mut fit_list = Vec::with_capacity(buckets.len());
        let mut usable = vec![false; pool.types.len()];
        for (sig, _) in &buckets {
            let types = run.pool_fit(*sig, p).ok()?;
            let mut mask = vec![false; pool.types.len()];
            for &t in types.iter() {
                mask[t as usize] = true;
                usable[t as usize] = true;
            }
            fit.push(mask);
            fit_list.push(types);
        }
        Some(Self {
            buckets,
            fit,
            fit_list,
            usable,
        })
    }
}
