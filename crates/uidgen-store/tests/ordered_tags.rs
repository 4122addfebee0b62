#![allow(clippy::unwrap_used)]
//! leaf_alloc_ordered (issue 35): an ordered tag's lease goes to one holder at a time, a new
//! term begins only once the last lease ran out by the database's clock, only the holder of the
//! current term claims the tag's segments, each new term's segment lies above every number
//! claimed before, and nothing of an ordered tag is handed back.

mod common;

use std::time::Duration;

use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{Lead, Residue, ReturnedRange, StoreError};

const LEASE: Duration = Duration::from_millis(1_500);

fn term_of(lead: &Lead) -> i64 {
    match lead {
        Lead::Leading { tag, .. } => tag.term,
        Lead::Follower(tag) => panic!("expected to lead, {tag:?}"),
    }
}

per_db! {
    async fn one_holder_at_a_time_and_a_new_term_only_after_the_lease(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("order", 100, None).await.unwrap();
        // Not ordered yet: nobody leads it, and plain claims go on.
        assert!(matches!(
            store.lead_ordered("order", "a", "http://a:1", LEASE, Duration::ZERO).await,
            Err(StoreError::NotOrdered(_))
        ));
        assert_eq!(store.claim_segment("order").await.unwrap().range(), 1..101);
        assert!(store.mark_ordered("order").await.unwrap());
        assert!(!store.mark_ordered("order").await.unwrap());
        // Marked: a plain claim is refused from now on.
        assert!(matches!(store.claim_segment("order").await, Err(StoreError::TagOrdered(_))));

        // No term may begin before the tag settled.
        let early = store
            .lead_ordered("order", "a", "http://a:1", LEASE, Duration::from_secs(60))
            .await
            .unwrap();
        assert!(matches!(early, Lead::Follower(ref tag) if tag.term == 0 && !tag.led()));

        let a = store.lead_ordered("order", "a", "http://a:1", LEASE, Duration::ZERO).await.unwrap();
        assert!(matches!(a, Lead::Leading { new_term: true, .. }));
        let term = term_of(&a);
        assert_eq!(term, 1);
        // b sees a's lease and is told where to forward.
        match store.lead_ordered("order", "b", "http://b:1", LEASE, Duration::ZERO).await.unwrap() {
            Lead::Follower(tag) => {
                assert_eq!((tag.term, tag.holder.as_str(), tag.address.as_str()),
                    (1, "a", "http://a:1"));
                assert!(tag.led());
            }
            other => panic!("b must follow: {other:?}"),
        }
        // a renews: same term.
        let renewed = store.lead_ordered("order", "a", "http://a:1", LEASE, Duration::ZERO)
            .await.unwrap();
        assert!(matches!(renewed, Lead::Leading { new_term: false, .. }));
        assert_eq!(term_of(&renewed), term);

        // Only the leader of the current term claims, above every number claimed before.
        assert!(matches!(
            store.claim_ordered_segment("order", "b", term, None).await,
            Err(StoreError::LeadLost { .. })
        ));
        let first = store.claim_ordered_segment("order", "a", term, None).await.unwrap();
        assert_eq!(first.range(), 101..201);

        // a stops renewing: b begins term 2 once the lease ran out, not before.
        tokio::time::sleep(LEASE + Duration::from_millis(300)).await;
        let b = store.lead_ordered("order", "b", "http://b:1", LEASE, Duration::ZERO).await.unwrap();
        assert!(matches!(b, Lead::Leading { new_term: true, .. }));
        assert_eq!(term_of(&b), 2);
        // a's term is over: it claims nothing more, and its renewal makes it a follower.
        assert!(matches!(
            store.claim_ordered_segment("order", "a", term, None).await,
            Err(StoreError::LeadLost { current: 2, .. })
        ));
        assert!(matches!(
            store.lead_ordered("order", "a", "http://a:1", LEASE, Duration::ZERO).await.unwrap(),
            Lead::Follower(_)
        ));
        let second = store.claim_ordered_segment("order", "b", 2, Some(500)).await.unwrap();
        assert!(second.range().start >= first.range().end, "{second:?}");
        assert_eq!(second.range(), 201..701);

        // A clean stop ends the lease at once: the next term need not wait.
        assert!(store.resign_ordered("order", "b", 2).await.unwrap());
        assert!(!store.resign_ordered("order", "b", 1).await.unwrap());
        let a = store.lead_ordered("order", "a", "http://a:1", LEASE, Duration::ZERO).await.unwrap();
        assert_eq!(term_of(&a), 3);
        assert!(matches!(
            store.claim_ordered_segment("order", "b", 2, None).await,
            Err(StoreError::LeadLost { .. })
        ));

        // Unmarked: plain again, and the leases are gone.
        assert!(store.unmark_ordered("order").await.unwrap());
        assert!(store.ordered_tags().await.unwrap().is_empty());
        assert!(store.claim_segment("order").await.unwrap().range().start >= 701);
        assert!(matches!(
            store.claim_ordered_segment("order", "a", 3, None).await,
            Err(StoreError::NotOrdered(_))
        ));
    }
}

per_db! {
    async fn an_ordered_tag_gets_nothing_handed_back_and_loses_what_was(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("order", 100, None).await.unwrap();
        let claim = store.claim_segment("order").await.unwrap();
        let tail = |start| ReturnedRange {
            biz_tag: "order".into(),
            start,
            end: claim.max_id,
            residue: Residue::SINGLE,
            epoch: claim.epoch,
        };
        assert_eq!(store.return_ranges(&[tail(50)]).await.unwrap().len(), 1);
        // Marking drops the waiting tail: it lies below max_id, a leader must start above.
        store.mark_ordered("order").await.unwrap();
        assert_eq!(store.returned_ranges("order").await.unwrap(), vec![]);
        // A server that still buffered a segment of it hands nothing back.
        assert!(store.return_ranges(&[tail(80)]).await.unwrap().is_empty());
        assert!(store.claim_returned_range("order").await.unwrap().is_none());
    }
}

per_db! {
    async fn unknown_and_group_tags_cannot_be_ordered_and_a_delete_unmarks(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        assert!(matches!(store.mark_ordered("nope").await, Err(StoreError::UnknownTag(_))));
        assert!(matches!(store.mark_ordered("").await, Err(StoreError::InvalidInput(_))));
        store.upsert_group_tag("grouped", 100, None, Residue::new(2, 1).unwrap()).await.unwrap();
        assert!(matches!(store.mark_ordered("grouped").await, Err(StoreError::InvalidInput(_))));
        store.upsert_tag("order", 100, None).await.unwrap();
        store.mark_ordered("order").await.unwrap();
        assert!(store.lead_ordered("order", "", "http://a:1", LEASE, Duration::ZERO).await.is_err());
        assert!(store.delete_tag("order").await.unwrap());
        assert!(store.ordered_tags().await.unwrap().is_empty());
        store.upsert_tag("order", 100, None).await.unwrap();
        assert!(store.claim_segment("order").await.is_ok());
    }
}

per_db! {
    async fn servers_racing_for_a_lapsed_lease_begin_one_term_each_time(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("order", 10, None).await.unwrap();
        store.mark_ordered("order").await.unwrap();
        let short = Duration::from_millis(1_000);
        for round in 1..=3 {
            let mut racers = Vec::new();
            for holder in ["a", "b", "c", "d"] {
                let store = store.clone();
                racers.push(tokio::spawn(async move {
                    store
                        .lead_ordered("order", holder, "http://x:1", short, Duration::ZERO)
                        .await
                        .unwrap()
                }));
            }
            let mut leaders = 0;
            for racer in racers {
                if let Lead::Leading { tag, new_term } = racer.await.unwrap() {
                    leaders += 1;
                    assert!(new_term);
                    assert_eq!(tag.term, round);
                }
            }
            assert_eq!(leaders, 1, "round {round}: exactly one racer leads");
            tokio::time::sleep(short + Duration::from_millis(300)).await;
        }
    }
}
