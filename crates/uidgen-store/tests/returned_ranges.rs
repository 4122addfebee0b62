#![allow(clippy::unwrap_used)]
//! leaf_alloc_returned: segment tails handed back at a clean stop, claimed by one caller each.

mod common;

use std::collections::HashSet;

use uidgen_store::testing::{TestDb, fresh_store, run_script};
use uidgen_store::{Residue, ReturnedRange, Store};

fn range(tag: &str, start: i64, end: i64, epoch: i64) -> ReturnedRange {
    ReturnedRange {
        biz_tag: tag.to_owned(),
        start,
        end,
        residue: Residue::SINGLE,
        epoch,
    }
}

/// Create `tag` and claim one segment `[1, max_id)`, as a server would before handing numbers
/// back; the claim's epoch.
async fn claimed_to(store: &Store, tag: &str, max_id: i64) -> i64 {
    store.upsert_tag(tag, max_id - 1, None).await.unwrap();
    let claim = store.claim_segment(tag).await.unwrap();
    assert_eq!(claim.max_id, max_id);
    claim.epoch
}

per_db! {
    async fn returned_ranges_are_claimed_lowest_first_once_each(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let e = claimed_to(&store, "order", 3001).await;
        let other = claimed_to(&store, "other", 6).await;
        let range = |tag: &str, start, end| range(tag, start, end, if tag == "order" { e } else { other });
        let odd = ReturnedRange { residue: Residue::new(2, 1).unwrap(), ..range("order", 301, 400) };
        let written = store
            .return_ranges(&[range("order", 2500, 3001), range("order", 1200, 2001), odd.clone(),
                range("other", 5, 6)])
            .await
            .unwrap();
        assert_eq!(written.len(), 4);
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
        let e = claimed_to(&store, "order", 101).await;
        let even = ReturnedRange { residue: Residue::new(2, 0).unwrap(), ..range("order", 7, 8, e) };
        let written = store.return_ranges(&[range("order", 9, 9, e), even]).await.unwrap();
        assert!(written.is_empty());
        assert!(store.returned_ranges("order").await.unwrap().is_empty());
        assert!(store.return_ranges(&[range("bad tag", 1, 2, e)]).await.is_err());
    }
}

per_db! {
    async fn deleting_a_tag_forgets_its_returned_ranges(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let e = claimed_to(&store, "order", 101).await;
        assert_eq!(store.return_ranges(&[range("order", 50, 101, e)]).await.unwrap().len(), 1);
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
        let e = claimed_to(&store, "burst", 601).await;
        let ranges: Vec<ReturnedRange> =
            (0..60).map(|k| range("burst", k * 10 + 1, k * 10 + 8, e)).collect();
        assert_eq!(store.return_ranges(&ranges).await.unwrap().len(), 60);
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

per_db! {
    /// The gap the epoch closes: a server buffers `[1, 1001)`; the tag is deleted and created
    /// again (max_id 1), and its new life claims `[1, 1001)` and `[1001, 2001)`; then the old
    /// server stops cleanly and hands back `[500, 1001)`. Written, those numbers would be
    /// issued a second time by the new life. They are refused, and so are ranges of a deleted
    /// tag, ranges past the tag's `max_id` and ranges of a life that has ended meanwhile.
    async fn a_tail_from_an_earlier_life_of_the_tag_is_never_written_back(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let old = claimed_to(&store, "order", 1001).await;
        assert!(store.delete_tag("order").await.unwrap());
        assert!(store.return_ranges(&[range("order", 500, 1001, old)]).await.unwrap().is_empty());
        let new = claimed_to(&store, "order", 1001).await;
        assert!(new > old, "a new life has a new epoch: {old} -> {new}");
        store.claim_segment("order").await.unwrap();
        assert!(store.return_ranges(&[range("order", 500, 1001, old)]).await.unwrap().is_empty());
        assert_eq!(store.claim_returned_range("order").await.unwrap(), None);
        // The new life's own tails go back, and only below its max_id (2001).
        let written = store
            .return_ranges(&[range("order", 1500, 2001, new), range("order", 2001, 2500, new)])
            .await
            .unwrap();
        assert_eq!(written, vec![range("order", 1500, 2001, new)]);
        // Ranges of a tag with no row at all.
        assert!(store.return_ranges(&[range("ghost", 1, 2, 0)]).await.unwrap().is_empty());
    }
}

per_db! {
    /// A row deleted by hand and created again through uidgen: the creation starts a new life,
    /// dropping what the old one left in the table and refusing its late tails.
    async fn creating_a_tag_deleted_by_hand_drops_the_earlier_lifes_ranges(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let old = claimed_to(&store, "order", 1001).await;
        store.return_ranges(&[range("order", 900, 1001, old)]).await.unwrap();
        run_script(&store, "DELETE FROM leaf_alloc WHERE biz_tag = 'order'").await.unwrap();
        let new = claimed_to(&store, "order", 1001).await;
        assert!(new > old);
        assert!(store.returned_ranges("order").await.unwrap().is_empty());
        assert!(store.return_ranges(&[range("order", 500, 900, old)]).await.unwrap().is_empty());
        // Updating an existing tag (its step) is not a new life: its tails still go back.
        store.upsert_tag("order", 10, None).await.unwrap();
        assert_eq!(store.return_ranges(&[range("order", 500, 900, new)]).await.unwrap().len(), 1);
    }
}

per_db! {
    /// Hand-backs racing deletes and re-creations, 20 rounds on fresh tags: whatever the
    /// interleaving, no number is both in a range the table hands out afterwards and in a
    /// segment the tag's new life claimed.
    async fn hand_backs_racing_a_delete_and_recreate_never_overlap_the_new_life(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let other = Store::connect(&url).await.unwrap();
        for round in 0..20 {
            let tag = format!("race{round}");
            let old = claimed_to(&store, &tag, 1001).await;
            let tail = range(&tag, 400 + round, 1001, old);
            let returner = {
                let store = store.clone();
                tokio::spawn(async move { store.return_ranges(&[tail]).await.unwrap() })
            };
            let recreate = {
                let (other, tag) = (other.clone(), tag.clone());
                tokio::spawn(async move {
                    other.delete_tag(&tag).await.unwrap();
                    claimed_to(&other, &tag, 1001).await;
                    other.claim_segment(&tag).await.unwrap().max_id
                })
            };
            returner.await.unwrap();
            let new_max = recreate.await.unwrap();
            assert_eq!(new_max, 2001);
            // The new life owns [1, 2001); nothing below it may come back from the table.
            while let Some(back) = store.claim_returned_range(&tag).await.unwrap() {
                assert!(back.start >= new_max, "round {round}: {back:?} overlaps the new life's [1, {new_max})");
            }
        }
    }
}
