//! `TreeCache`: trees by id (kept as their verified encoding, [`TreeView`]), least recently
//! used first out, bounded by total entries.
//!
//! The invariant: the entries held add up to at most the budget, except that the most
//! recently inserted tree is always kept even when it alone exceeds the budget (so a huge
//! directory is read once per use, not once per lookup). Memory therefore stays below
//! max(budget, largest directory) however many directories a walk visits.
//!
//! Trees are immutable and named by their hash, so a cached tree never goes stale; two
//! threads that miss at once both read it, and the second insert is a no-op.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use zeroclaw_bundle_store::{ObjectId, TreeView};

/// A bounded LRU of trees (their verified encodings), shared by the FUSE worker threads.
#[derive(Debug)]
pub(crate) struct TreeCache {
    inner: Mutex<Lru>,
}

#[derive(Debug)]
struct Lru {
    budget: usize,
    held: usize,
    tick: u64,
    map: HashMap<ObjectId, Slot>,
    /// tick of last use -> id; the first key is the least recently used.
    order: BTreeMap<u64, ObjectId>,
}

#[derive(Debug)]
struct Slot {
    tree: Arc<TreeView>,
    tick: u64,
    weight: usize,
}

/// What a tree costs in the budget: its entries, plus one so empty trees count.
fn weight(tree: &TreeView) -> usize {
    tree.len() + 1
}

impl TreeCache {
    /// A cache holding about `budget` tree entries in total.
    pub(crate) fn new(budget: usize) -> TreeCache {
        TreeCache {
            inner: Mutex::new(Lru {
                budget: budget.max(1),
                held: 0,
                tick: 0,
                map: HashMap::new(),
                order: BTreeMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        // A panic in another worker cannot leave the LRU half-updated in a harmful way:
        // at worst an entry is accounted twice, which only evicts early.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached tree, marked as just used.
    pub(crate) fn get(&self, id: &ObjectId) -> Option<Arc<TreeView>> {
        let mut lru = self.lock();
        lru.tick += 1;
        let now = lru.tick;
        let slot = lru.map.get_mut(id)?;
        let old = std::mem::replace(&mut slot.tick, now);
        let tree = slot.tree.clone();
        lru.order.remove(&old);
        lru.order.insert(now, *id);
        Some(tree)
    }

    /// Adds a tree, evicting the least recently used ones beyond the budget.
    pub(crate) fn insert(&self, id: ObjectId, tree: Arc<TreeView>) {
        let mut lru = self.lock();
        if lru.map.contains_key(&id) {
            return;
        }
        lru.tick += 1;
        let tick = lru.tick;
        let w = weight(&tree);
        lru.map.insert(
            id,
            Slot {
                tree,
                tick,
                weight: w,
            },
        );
        lru.order.insert(tick, id);
        lru.held += w;
        while lru.held > lru.budget && lru.map.len() > 1 {
            let Some((_, victim)) = lru.order.pop_first() else {
                break;
            };
            if let Some(slot) = lru.map.remove(&victim) {
                lru.held -= slot.weight;
            }
        }
    }

    /// (trees held, entries held), for tests.
    #[cfg(test)]
    pub(crate) fn usage(&self) -> (usize, usize) {
        let lru = self.lock();
        (lru.map.len(), lru.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zeroclaw_bundle_store::{EntryKind, Tree, TreeEntry};

    fn tree(n: usize, salt: u8) -> (ObjectId, Arc<TreeView>) {
        let entries = (0..n)
            .map(|i| TreeEntry {
                name: format!("f{i}").into_bytes(),
                kind: EntryKind::File,
                mode: 0o644,
                size: 0,
                id: ObjectId::of(&[salt]),
            })
            .collect();
        let t = Tree::from_entries(entries).unwrap();
        (ObjectId::of(&t.encode()), Arc::new(TreeView::of(&t)))
    }

    #[test]
    fn stays_within_budget_and_evicts_least_recently_used() {
        let cache = TreeCache::new(100);
        let ids: Vec<_> = (0..50u8)
            .map(|salt| {
                let (id, t) = tree(9, salt);
                cache.insert(id, t);
                id
            })
            .collect();
        let (count, held) = cache.usage();
        assert!(held <= 100, "held {held}");
        assert_eq!(count, 10);
        assert!(cache.get(&ids[0]).is_none());
        assert!(cache.get(&ids[49]).is_some());
        // Touch the oldest survivor, insert one more: the next oldest goes instead.
        assert!(cache.get(&ids[40]).is_some());
        let (id, t) = tree(9, 200);
        cache.insert(id, t);
        assert!(cache.get(&ids[40]).is_some());
        assert!(cache.get(&ids[41]).is_none());
    }

    #[test]
    fn keeps_a_single_tree_larger_than_the_budget() {
        let cache = TreeCache::new(10);
        let (small, t) = tree(3, 1);
        cache.insert(small, t);
        let (big, t) = tree(50, 2);
        cache.insert(big, t);
        assert!(cache.get(&big).is_some());
        assert!(cache.get(&small).is_none());
        assert_eq!(cache.usage(), (1, 51));
    }
}
