//! Helpers shared by the core's integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use uidgen_core::UidGenerator;

/// Take `per_thread` IDs on each of `threads` threads at once and return them all, sorted.
pub fn hammer<G: UidGenerator + 'static>(
    generator: Arc<G>,
    threads: usize,
    per_thread: usize,
) -> Vec<u64> {
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let generator = Arc::clone(&generator);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut ids = Vec::with_capacity(per_thread);
                for _ in 0..per_thread {
                    ids.push(generator.next_id().expect("next_id"));
                }
                ids
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("hammer thread panicked"))
        .collect();
    all.sort_unstable();
    all
}

/// Assert a sorted list holds no ID twice, naming the first duplicate.
pub fn assert_no_duplicates(sorted: &[u64]) {
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        let dups = sorted.windows(2).filter(|w| w[0] == w[1]).count();
        panic!("{dups} duplicate IDs, first {}", w[0]);
    }
}

/// Assert every ID decodes under the generator's layout to `worker`.
pub fn assert_worker<G: UidGenerator>(generator: &G, ids: &[u64], worker: u64) {
    for &id in ids {
        let parts = generator.parse(id).expect("decodes").parts;
        assert_eq!(
            parts.worker, worker,
            "id {id} decodes to worker {}",
            parts.worker
        );
    }
}
