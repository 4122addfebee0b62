// Baidu's Java CachedUidGenerator, unchanged, measured the way benches/generators.rs measures
// uidgen's `next_id_{1,2}_thread/uidgen_cached`: threads started together, each taking IDs in a
// loop, IDs per second over all of them. Built and run by scripts/bench-baidu-java.sh against the
// upstream sources and Debian's Spring, commons-lang and slf4j jars; nothing of Baidu's is kept
// in this repository.
//
// Baidu's default reject-take policy throws when the ring is empty; a service would retry, so
// the loop does, as the Rust bench's waiting policy waits.

import com.baidu.fsg.uid.exception.UidGenerateException;
import com.baidu.fsg.uid.impl.CachedUidGenerator;

import java.util.Arrays;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

public final class BaiduBench {
    /** Keeps the JIT from dropping the IDs. */
    static final AtomicLong SINK = new AtomicLong();

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 4.0;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;

        CachedUidGenerator generator = new CachedUidGenerator();
        generator.setWorkerIdAssigner(() -> 1L);
        // uidgen's `baidu` preset: Baidu's 1/28/22/13 widths from a recent epoch (Baidu's own
        // 2016 epoch ran out of 28-bit seconds on 2024-11-20, and its start-up refuses it).
        generator.setTimeBits(28);
        generator.setWorkerBits(22);
        generator.setSeqBits(13);
        generator.setEpochStr("2026-01-01");
        generator.afterPropertiesSet();

        for (int threads = 1; threads <= 2; threads++) {
            run(generator, threads, 1.0); // JIT warm-up, as criterion's warm-up
            double[] rates = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                rates[r] = run(generator, threads, seconds);
            }
            Arrays.sort(rates);
            // One line per row, in the shape scripts/bench-side-by-side.sh reads: name, IDs/s.
            System.out.printf("next_id_%d_thread/baidu_java_cached %.0f (rounds: %s)%n",
                    threads, rates[rounds / 2], Arrays.toString(rates));
        }
        generator.destroy();
        if (SINK.get() == 42) {
            System.out.println();
        }
    }

    /** IDs per second of `threads` threads taking for `seconds`. */
    static double run(CachedUidGenerator generator, int threads, double seconds) throws Exception {
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        long[] counts = new long[threads];
        Thread[] workers = new Thread[threads];
        long[] window = new long[2];
        long span = (long) (seconds * 1e9);
        for (int t = 0; t < threads; t++) {
            final int index = t;
            workers[t] = new Thread(() -> {
                try {
                    start.await();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                long deadline = System.nanoTime() + span;
                long n = 0;
                long acc = 0;
                while (true) {
                    for (int i = 0; i < 4096; i++) {
                        try {
                            acc ^= generator.getUID();
                            n++;
                        } catch (UidGenerateException empty) {
                            Thread.onSpinWait();
                        }
                    }
                    if (System.nanoTime() >= deadline) {
                        break;
                    }
                }
                counts[index] = n;
                SINK.addAndGet(acc);
            });
            workers[t].start();
        }
        start.await();
        window[0] = System.nanoTime();
        for (Thread worker : workers) {
            worker.join();
        }
        window[1] = System.nanoTime();
        long total = Arrays.stream(counts).sum();
        return total / ((window[1] - window[0]) / 1e9);
    }
}
