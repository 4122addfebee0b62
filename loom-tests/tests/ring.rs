//! Exhaustive interleavings of the real `RingBuffer` on tiny rings.
#![cfg(uidgen_loom)]
#![allow(clippy::unwrap_used)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use uidgen_core::{LocalIds, RingBuffer, UidError};

/// Every ID taken was put, none is taken twice, and taken + left in the ring = put.
fn check(put: &[u64], mut taken: Vec<u64>, left: Vec<u64>) {
    let mut sorted = taken.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        taken.len(),
        "an ID was taken twice: {taken:?}"
    );
    taken.extend(left);
    taken.sort_unstable();
    let mut expected = put.to_vec();
    expected.sort_unstable();
    assert_eq!(taken, expected, "IDs lost or invented");
}

fn drain(ring: &RingBuffer) -> Vec<u64> {
    let mut left = Vec::new();
    while let Some(uid) = ring.try_take() {
        left.push(uid);
    }
    left
}

/// Runs `work` on a new model thread with its own handle on the ring.
fn spawn_on<T: Send + 'static>(
    ring: &Arc<RingBuffer>,
    work: impl FnOnce(&RingBuffer) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let ring = Arc::clone(ring);
    thread::spawn(move || work(&ring))
}

/// Two consumer threads running the same takes.
fn two_consumers(
    ring: &Arc<RingBuffer>,
    take: fn(&RingBuffer) -> Vec<u64>,
) -> [thread::JoinHandle<Vec<u64>>; 2] {
    [spawn_on(ring, take), spawn_on(ring, take)]
}

/// Every ID the consumers took.
fn joined(consumers: [thread::JoinHandle<Vec<u64>>; 2]) -> Vec<u64> {
    consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect()
}

#[test]
fn one_producer_two_consumers_take_each_id_once() {
    loom::model(|| {
        let ring = Arc::new(RingBuffer::new(2, 50).unwrap());
        let producer = spawn_on(&ring, |ring| {
            let mut put = Vec::new();
            let mut batch = [1u64, 2].into_iter();
            let n = ring.put_batch(&mut batch);
            put.extend([1u64, 2].into_iter().take(n));
            if ring.put(3) {
                put.push(3);
            }
            put
        });
        let consumers = two_consumers(&ring, |ring| {
            let mut got = Vec::new();
            for _ in 0..2 {
                if let Some(uid) = ring.try_take() {
                    got.push(uid);
                }
            }
            got
        });
        let put = producer.join().unwrap();
        check(&put, joined(consumers), drain(&ring));
    });
}

#[test]
fn wrapping_producer_never_overwrites_an_unread_slot() {
    loom::model(|| {
        // Full ring: the producer can only put into a slot once a consumer has read it.
        let ring = Arc::new(RingBuffer::new(2, 50).unwrap());
        assert_eq!(ring.put_batch(&mut [1u64, 2].into_iter()), 2);
        let producer = spawn_on(&ring, |ring| {
            let mut put = Vec::new();
            for uid in [3u64, 4] {
                if ring.put_batch(&mut std::iter::once(uid)) == 1 {
                    put.push(uid);
                }
            }
            put
        });
        let consumers = two_consumers(&ring, |ring| ring.try_take().into_iter().collect());
        let mut put = vec![1, 2];
        put.extend(producer.join().unwrap());
        check(&put, joined(consumers), drain(&ring));
    });
}

/// A 4-slot ring holding 1, 2, 3; a producer puts 4 and 5 as room appears while two consumers
/// run `take`; then every ID is accounted for.
fn two_consumers_beside_a_producer(take: fn(&RingBuffer) -> Vec<u64>) {
    loom::model(move || {
        let ring = Arc::new(RingBuffer::new(4, 50).unwrap());
        assert_eq!(ring.put_batch(&mut [1u64, 2, 3].into_iter()), 3);
        let producer = spawn_on(&ring, |ring| ring.put_batch(&mut [4u64, 5].into_iter()));
        let consumers = two_consumers(&ring, take);
        let mut put = vec![1, 2, 3];
        put.extend([4u64, 5].into_iter().take(producer.join().unwrap()));
        check(&put, joined(consumers), drain(&ring));
    });
}

#[test]
fn batch_takes_claim_disjoint_runs() {
    two_consumers_beside_a_producer(|ring| {
        let mut got = Vec::new();
        ring.take_batch(&mut got, 2);
        got
    });
}

#[test]
fn local_handles_refill_disjoint_batches_in_order_beside_the_producer() {
    // Each handle claims up to 2 at once and refills when its batch runs out (a claim that
    // found one ID ready refills on the next call), racing the other handle and the put.
    two_consumers_beside_a_producer(|ring| {
        let mut local = LocalIds::new(ring, 2).unwrap();
        let mut got = Vec::new();
        for _ in 0..2 {
            got.extend(local.next_id().ok());
        }
        // What the handle still holds was claimed too: hand it out, to account for it.
        while local.held() > 0 {
            got.push(local.next_id().unwrap());
        }
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "a handle went backwards: {got:?}"
        );
        got
    });
}

#[test]
fn a_stop_racing_a_handle_ends_it_with_the_stops_reason() {
    loom::model(|| {
        let ring = Arc::new(RingBuffer::new(2, 50).unwrap());
        assert_eq!(ring.put_batch(&mut [1u64, 2].into_iter()), 2);
        let stopper = spawn_on(&ring, |ring| ring.stop("lease lost"));
        let stopped = UidError::GeneratorStopped("lease lost".into());
        // One claim takes both IDs; the stop may land before it, between the two calls, or
        // after both.
        let mut local = LocalIds::new(&ring, 2).unwrap();
        let mut refused = false;
        for expected in [1u64, 2] {
            match local.next_id() {
                Ok(uid) => {
                    assert!(!refused, "handed out {uid} after a refusal");
                    assert_eq!(uid, expected);
                }
                // A handle that sees the stop finds its reason, never a stop without one.
                Err(error) => {
                    assert_eq!(error, stopped);
                    refused = true;
                }
            }
        }
        stopper.join().unwrap();
        assert_eq!(local.next_id(), Err(stopped));
    });
}

/// A ring of `size` slots (padding below half) whose trigger counts the wake-ups it sends.
fn counting_ring(size: usize) -> (Arc<RingBuffer>, Arc<AtomicUsize>) {
    let wakes = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&wakes);
    let ring = RingBuffer::new(size, 50)
        .unwrap()
        .with_padding_trigger(Box::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
    (Arc::new(ring), wakes)
}

#[test]
fn takes_below_the_threshold_wake_the_padding_once_per_run() {
    loom::model(|| {
        let (ring, wakes) = counting_ring(4);
        assert_eq!(ring.put_batch(&mut [1u64, 2, 3, 4].into_iter()), 4);
        let consumers = two_consumers(&ring, |ring| {
            ring.try_take().unwrap();
            ring.try_take().unwrap();
            Vec::new()
        });
        joined(consumers);
        // Both consumers went below the threshold (2 of 4), but padding never started, so the
        // trigger ran exactly once.
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        ring.padding_started();
        assert!(ring.try_take().is_none());
        assert_eq!(wakes.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn padding_started_during_takes_never_loses_a_wake_up() {
    loom::model(|| {
        let (ring, wakes) = counting_ring(4);
        // A full ring drained below its threshold (2 of 4): one ID left, padding asked for once.
        assert_eq!(ring.put_batch(&mut [1u64, 2, 3, 4].into_iter()), 4);
        for _ in 0..3 {
            ring.try_take().unwrap();
        }
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        // The padding thread, woken by that request: it notes the wake-ups so far (an unpark
        // after this point would make the real thread's next `park` return at once), clears the
        // request and fills the ring as far as it sees room, as `pad` does.
        let padder = {
            let wakes = Arc::clone(&wakes);
            spawn_on(&ring, move |ring| {
                let seen = wakes.load(Ordering::SeqCst);
                ring.padding_started();
                let put = ring.put_batch(&mut [5u64, 6, 7, 8].into_iter());
                (seen, put)
            })
        };
        // Takes racing with it, which leave the ring below the threshold before, during or
        // after the run.
        let consumers = two_consumers(&ring, |ring| {
            let mut got = Vec::new();
            for _ in 0..2 {
                got.extend(ring.try_take());
            }
            got
        });
        let (seen, put) = padder.join().unwrap();
        let taken = joined(consumers);
        // Below the threshold, someone must still be on the hook to pad: either a request is
        // pending, or the padder was woken after it last started.
        if ring.len() < ring.padding_threshold() {
            assert!(
                ring.padding_requested() || wakes.load(Ordering::SeqCst) > seen,
                "wake-up lost: {} IDs left, no request pending, no wake since padding started",
                ring.len()
            );
        }
        let mut all_put = vec![1, 2, 3, 4];
        all_put.extend([5u64, 6, 7, 8].into_iter().take(put));
        check(&all_put, [vec![1, 2, 3], taken].concat(), drain(&ring));
    });
}
