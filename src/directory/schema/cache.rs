//! The compiled schemas a process keeps, bounded by what they weigh, not by how many they are.
//!
//! A compiled validator's weight is an estimate from above of the memory it holds and may grow
//! ([`super::Prepared::weight`], given the checking threads): its patterns' compiled size, once for the validator and once
//! more for each checking thread's matching caches, plus a share per byte of the schema's own
//! text. The cache keeps the most recently used validators whose weights add up to at most its
//! budget (`PARLEY_SCHEMA_CACHE_MIB`); a validator heavier than the whole budget is used for
//! the check at hand and not kept.

use std::sync::Arc;

use lru::LruCache;

use super::Prepared;

/// A schema's key: the SHA-256 of its text.
pub type Key = [u8; 32];

/// Compiled validators, least recently used out first, within a byte budget.
pub struct Cache {
    entries: LruCache<Key, Arc<Prepared>>,
    budget: usize,
    held: usize,
    /// The threads that match patterns (each may grow a cache per pattern).
    threads: usize,
}

impl Cache {
    /// An empty cache that holds at most `budget` bytes of validators checked by `threads`
    /// threads.
    pub fn new(budget: usize, threads: usize) -> Cache {
        Cache { entries: LruCache::unbounded(), budget, held: 0, threads }
    }

    /// The validator of `key`, if kept (it becomes the most recently used).
    pub fn get(&mut self, key: &Key) -> Option<Arc<Prepared>> {
        self.entries.get(key).cloned()
    }

    /// Keeps `prepared` under `key`, dropping the least recently used until the weights fit.
    pub fn put(&mut self, key: Key, prepared: Arc<Prepared>) {
        let weight = prepared.weight(self.threads);
        if weight > self.budget {
            return;
        }
        if let Some(old) = self.entries.put(key, prepared) {
            self.held -= old.weight(self.threads);
        }
        self.held += weight;
        while self.held > self.budget {
            match self.entries.pop_lru() {
                Some((_, dropped)) => self.held -= dropped.weight(self.threads),
                None => break,
            }
        }
    }

    /// What the kept validators weigh, bytes.
    pub fn held(&self) -> usize {
        self.held
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_budget_is_in_bytes() {
        let small = Arc::new(Prepared::compile(&json!({"type": "string"})).unwrap());
        let heavy = Arc::new(Prepared::compile(&json!({"properties": {"a": {"pattern": "^\\p{L}{4}$"}}})).unwrap());
        let (small_w, heavy_w) = (small.weight(2), heavy.weight(2));
        assert!(heavy_w > 10 * small_w, "{heavy_w} vs {small_w}");
        let mut cache = Cache::new(heavy_w + 3 * small_w, 2);
        for i in 0..3u8 {
            cache.put([i; 32], small.clone());
        }
        cache.put([9; 32], heavy.clone());
        assert!(cache.held() <= heavy_w + 3 * small_w);
        assert!(cache.get(&[9; 32]).is_some());
        // Another heavy one pushes out the older entries, never past the budget.
        cache.put([10; 32], heavy.clone());
        assert!(cache.held() <= heavy_w + 3 * small_w);
        assert!(cache.get(&[9; 32]).is_none());
        // Heavier than the whole budget: not kept.
        let mut tiny = Cache::new(small_w, 2);
        tiny.put([1; 32], heavy);
        assert!(tiny.len() == 0 && tiny.held() == 0);
    }
}
