#![allow(clippy::unwrap_used)]
//! id_order_mark (issue 33, item 1): the space's mark only rises, an order fence writes it
//! ahead of what its generator stamps, a next life starts above it, and a store that does not
//! answer stops the fence instead of letting units past an unwritten mark.

mod common;

use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{
    Clock, DefaultUidGenerator, FenceRefusal, Layout, ManualClock, TimeFence, UidGenerator,
};
use uidgen_store::testing::proxy::{Proxy, server_addr, with_addr};
use uidgen_store::testing::{TestDb, fresh_store, fresh_url};
use uidgen_store::{Store, StoreOptions};
use uidgen_worker::{MarkRaise, OrderFence, OrderOptions};

/// 2026-11-01, well inside Baidu's default layout.
const T0: u64 = 1_793_491_200_000;

fn options() -> OrderOptions {
    OrderOptions {
        lead: Duration::from_secs(10),
        max_ahead: Some(Duration::from_secs(61)),
        strict: true,
    }
}

/// Wait (in real time) until `fence`'s limit reaches `until`, for at most 10 s.
async fn limit_reaches(fence: &OrderFence, until: u64) -> u64 {
    for _ in 0..1_000 {
        let limit = fence.limit_ms();
        if limit >= until {
            return limit;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the fence's limit stayed at {} < {until}", fence.limit_ms());
}

per_db! {
    async fn the_mark_only_rises_and_is_kept_per_space(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        assert_eq!(store.order_mark("default").await.unwrap(), None);
        store.raise_order_mark(MarkRaise::new("default", "a", T0 + 5_000, T0)).await.unwrap();
        store.raise_order_mark(MarkRaise::new("default", "b", T0 + 1_000, T0)).await.unwrap(); // lower: kept
        assert_eq!(store.order_mark("default").await.unwrap(), Some(T0 + 5_000));
        store.raise_order_mark(MarkRaise::new("default", "b", T0 + 9_000, T0)).await.unwrap();
        assert_eq!(store.order_mark("default").await.unwrap(), Some(T0 + 9_000));
        assert_eq!(store.order_mark("orders").await.unwrap(), None);
        store.raise_order_mark(MarkRaise::new("orders", "c", T0, T0)).await.unwrap();
        assert_eq!(store.order_mark("orders").await.unwrap(), Some(T0));
        assert_eq!(store.order_mark("default").await.unwrap(), Some(T0 + 9_000));
        assert!(store.raise_order_mark(MarkRaise::new("", "c", T0, T0)).await.is_err());
    }
}

per_db! {
    async fn a_next_life_starts_above_every_unit_the_last_one_stamped(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = Layout::baidu_default().unwrap();
        let clock = ManualClock::new(T0);
        let first = OrderFence::open(Arc::new(store.clone()), Arc::new(clock.clone()), "default", "one",
            options()).await.unwrap();
        assert_eq!(first.start_mark_ms(), 0);
        // The first mark is written before any ID: the lead past the clock.
        assert_eq!(first.limit_ms(), T0 + 10_000);
        assert_eq!(store.order_mark("default").await.unwrap(), Some(T0 + 10_000));
        // A burst borrows 30 s ahead: the fence refuses until the writer has covered it.
        let far = T0 + 30_000;
        assert!(matches!(first.extend(far), Err(FenceRefusal::NotYet { .. })));
        let limit = limit_reaches(&first, far).await;
        assert!(store.order_mark("default").await.unwrap().unwrap() >= limit);
        // Never further ahead than the bound allows, however far the generator asked.
        assert!(limit <= T0 + 61_000, "{limit}");

        // A kill -9 writes nothing: the next life (any server) reads the mark and stamps above.
        let second = OrderFence::open(Arc::new(store.clone()), Arc::new(clock.clone()), "default", "two",
            options()).await.unwrap();
        assert!(second.start_mark_ms() >= limit);
        let generator = DefaultUidGenerator::new(layout.clone(), 2, clock.clone())
            .unwrap()
            .fenced(Arc::new(second.clone()));
        // The clock is behind the mark: the Default generator refuses rather than go below it.
        assert!(generator.next_id().is_err());
        clock.set(second.start_mark_ms() + 1);
        let limit = limit_reaches(&second, second.start_mark_ms() + 2_000).await;
        assert!(limit > second.start_mark_ms());
        let id = generator.next_id().unwrap();
        let unit = layout.decode(id).unwrap().parts.time;
        let last_unit_of_first = layout.time_at(far - 1).unwrap();
        assert!(unit > last_unit_of_first, "{unit} <= {last_unit_of_first}");
        drop(first);
    }
}

/// A fence on PostgreSQL behind a proxy the test cuts; the proxy and a clock at T0.
async fn behind_a_proxy(options: OrderOptions) -> (OrderFence, Proxy, ManualClock) {
    let url = fresh_url(TestDb::Postgres).await.unwrap();
    // Migrated directly, then used through the proxy.
    Store::connect(&url).await.unwrap().close().await;
    let proxy = Proxy::start(server_addr(&url)).await;
    let options_store = StoreOptions {
        connect_timeout: Duration::from_millis(500),
        migrate: false,
        ..StoreOptions::default()
    };
    let store = Store::connect_with(&with_addr(&url, proxy.addr), options_store)
        .await
        .unwrap();
    let clock = ManualClock::new(T0);
    let fence = OrderFence::open(
        Arc::new(store),
        Arc::new(clock.clone()),
        "default",
        "one",
        options,
    )
    .await
    .unwrap();
    (fence, proxy, clock)
}

/// Not strict (the server's setting): with the store cut off, the fence lets units past the
/// mark once a write has failed, says so, and once the store answers the mark covers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_does_not_answer_lets_a_lenient_fence_go_on_and_the_mark_catch_up() {
    let (fence, proxy, clock) = behind_a_proxy(OrderOptions {
        strict: false,
        ..options()
    })
    .await;
    let written = fence.limit_ms();
    assert!(!fence.status().past_mark);
    proxy.cut();
    clock.advance(20_000);
    let past = written + 5_000;
    let mut passed = false;
    for _ in 0..100 {
        match fence.extend(past) {
            Ok(limit) => {
                assert!(limit >= past);
                passed = true;
                break;
            }
            // Until the writer's first write against the cut store has failed.
            Err(FenceRefusal::NotYet { .. }) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(
        passed,
        "the fence never let a unit past the mark with the store cut off"
    );
    assert!(fence.status().past_mark && fence.status().failures > 0);
    assert_eq!(fence.limit_ms(), written, "no mark was accepted meanwhile");
    proxy.restore();
    limit_reaches(&fence, past).await;
    for _ in 0..100 {
        if !fence.status().past_mark {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!fence.status().past_mark, "the mark covers what went past");
}

/// Strict: cut, the limit stays where the store last accepted a mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_does_not_answer_stops_a_strict_fence() {
    let (fence, proxy, clock) = behind_a_proxy(options()).await;
    let written = fence.limit_ms();
    proxy.cut();
    clock.advance(20_000);
    for _ in 0..20 {
        let refused = fence.extend(written + 1_000);
        assert!(
            matches!(refused, Err(FenceRefusal::NotYet { .. })),
            "{refused:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        fence.limit_ms(),
        written,
        "the limit rose with the store cut off"
    );
    assert!(fence.status().failures > 0);
    proxy.restore();
    limit_reaches(&fence, written + 1_000).await;
    assert!(clock.now_millis() > written);
}
