#![allow(clippy::unwrap_used)]
//! leaf_alloc_returned: segment tails handed back at a clean stop, claimed by one caller each.

mod common;

use std::collections::HashSet;

use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{Residue, ReturnedRange, Store};

fn range(tag: &str, start: i64, end: i64) -> ReturnedRange {
    ReturnedRange {
        biz_tag: tag.to_owned(),
        start,
        end,
        residue: Residue::SINGLE,
    }
}

per_db! {
    async fn returned_ranges_are_claimed_lowest_first_once_each(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let odd = ReturnedRange { residue: Residue::new(2, 1).unwrap(), ..range("order", 301, 400) };
        let written = store
            .return_ranges(&[range("order", 2500, 3001), range("order", 1200, 2001), odd.clone(),
                range("other", 5, 6)])
            .await
            .unwrap();
        assert_eq!(written, 4);
        assert_eq!(store.returned_ranges("order").await.unwrap().len(), 3);
        assert_eq!(store.claim_returned_range("order").await.unwrap(), Some(odd));
        assert_eq!(store.claim_returned_range("order").await.unwrap(), Some(range("order", 1200, 2001)));
        assert_eq!(store.claim_returned_range("order").await.unwrap(), Some(range("order", 2500, 3001)));
        assert_eq!(store.claim_returned_range("order").await.unwrap(), None);
        assert_eq!(store.returned_ranges("other").await.unwrap(), vec![range("other", 5, 6)]);
    }
}

per_db! {
    async fn ranges_without_a_number_of_their_residue_are_left_out(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let even = ReturnedRange { residue: Residue::new(2, 0).unwrap(), ..range("order", 7, 8) };
        let written = store.return_ranges(&[range("order", 9, 9), even]).await.unwrap();
        assert_eq!(written, 0);
        assert!(store.returned_ranges("order").await.unwrap().is_empty());
        assert!(store.return_ranges(&[range("bad tag", 1, 2)]).await.is_err());
    }
}

per_db! {
    async fn deleting_a_tag_forgets_its_returned_ranges(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("order", 100, None).await.unwrap();
        store.return_ranges(&[range("order", 50, 101)]).await.unwrap();
        assert!(store.delete_tag("order").await.unwrap());
        // A re-created tag starts at 1 again: the old tail would overlap its first segment.
        store.upsert_tag("order", 100, None).await.unwrap();
        assert_eq!(store.claim_returned_range("order").await.unwrap(), None);
    }
}

per_db! {
    /// Eight stores (eight pools, as eight servers would hold) claim 60 ranges at once, each
    /// until none is left: every range is claimed exactly once.
    async fn concurrent_claimers_never_get_one_range_twice(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let ranges: Vec<ReturnedRange> =
            (0..60).map(|k| range("burst", k * 10 + 1, k * 10 + 8)).collect();
        store.return_ranges(&ranges).await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let claimer = Store::connect(&url).await.unwrap();
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(range) = claimer.claim_returned_range("burst").await.unwrap() {
                    got.push(range.start);
                    assert!(got.len() <= 60, "a claim that does not remove its range");
                }
                got
            }));
        }
        let mut claimed = Vec::new();
        for task in tasks {
            claimed.extend(task.await.unwrap());
        }
        let distinct: HashSet<i64> = claimed.iter().copied().collect();
        assert_eq!(distinct.len(), claimed.len(), "a range was claimed twice: {claimed:?}");
        assert_eq!(claimed.len(), 60, "ranges left unclaimed: {claimed:?}");
        assert!(store.returned_ranges("burst").await.unwrap().is_empty());
    }
}
