// Apache Curator doing what dlock-zookeeper-bench measures for dlock, for the same table
// (bench/zookeeper_bench.cpp runs it after its own figures when Java was found).
//
//   java CuratorBench CONNECT BASE ITERATIONS HANDOFFS CONTENDERS SECONDS
//                     [keys|uncontended|contended]
//
// With "keys", prints the "key value" lines of bench/peer_bench.cpp (bench/peers.sh) instead
// of rows; with "uncontended", only the first of them; with "contended", only the contention's
// (bench/peers.sh repeats both, alternating with dlock's).
//
// uncontended: InterProcessMutex acquire() + release(), ITERATIONS times.
// handoff: two clients (two sessions) take strict turns on one InterProcessMutex; each sample
//   is the time from the holder starting release() to the waiter's acquire() returning. The
//   clients are threads of this JVM, not processes.
// contended: CONTENDERS clients (one session each) acquire and release one mutex for SECONDS.
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorBench {
  private static CuratorFramework client(String connect) throws InterruptedException {
    CuratorFramework c = CuratorFrameworkFactory.newClient(
        connect, 15000, 15000, new ExponentialBackoffRetry(100, 5));
    c.start();
    c.blockUntilConnected();
    return c;
  }

  private static boolean keys = false;

  private static void printRow(String what, String key, List<Double> samples) {
    Collections.sort(samples);
    double median = samples.get(samples.size() / 2);
    double p99 = samples.get(Math.min(samples.size() - 1, (int) (0.99 * samples.size())));
    if (keys) {
      System.out.printf("%s %.2f%n", key, median);
    } else {
      System.out.printf("%-44s median %9.2f us   p99 %9.2f us   (n=%d)%n", what, median, p99,
                        samples.size());
    }
  }

  public static void main(String[] args) throws Exception {
    String connect = args[0], base = args[1];
    int iterations = Integer.parseInt(args[2]), handoffs = Integer.parseInt(args[3]);
    int contenders = Integer.parseInt(args[4]);
    double seconds = Double.parseDouble(args[5]);
    String mode = args.length > 6 ? args[6] : "";
    keys = mode.equals("keys") || mode.equals("uncontended") || mode.equals("contended");
    if (!mode.equals("contended")) uncontendedAndHandoff(connect, base, iterations, handoffs, mode);
    if (!mode.equals("uncontended")) contended(connect, base, contenders, seconds);
  }

  private static void uncontendedAndHandoff(String connect, String base, int iterations,
                                            int handoffs, String mode) throws Exception {
    try (CuratorFramework c = client(connect)) {
      InterProcessMutex mutex = new InterProcessMutex(c, base + "/uncontended");
      List<Double> samples = new ArrayList<>();
      for (int i = 0; i < iterations + iterations / 10; ++i) {  // the first tenth warms up
        long start = System.nanoTime();
        mutex.acquire();
        mutex.release();
        if (i >= iterations / 10) samples.add((System.nanoTime() - start) / 1000.0);
      }
      printRow("Curator acquire+release, uncontended", "uncontended_us", samples);
    }
    if (mode.equals("uncontended")) return;

    List<Double> handoffSamples = Collections.synchronizedList(new ArrayList<>());
    AtomicLong releaseStarted = new AtomicLong();
    AtomicInteger lastHolder = new AtomicInteger(-1);
    AtomicIntegerArray waiting = new AtomicIntegerArray(2), finished = new AtomicIntegerArray(2);
    List<Thread> turns = new ArrayList<>();
    for (int me = 0; me < 2; ++me) {
      final int self = me, peer = 1 - me;
      turns.add(new Thread(() -> {
        try (CuratorFramework c = client(connect)) {
          InterProcessMutex mutex = new InterProcessMutex(c, base + "/handoff");
          for (int i = 0; i < handoffs; ++i) {
            // Yield, not spin: on a small machine a spinning JVM thread starves the peer.
            while (i > 0 && lastHolder.get() == self && finished.get(peer) == 0) Thread.yield();
            waiting.set(self, 1);
            mutex.acquire();
            long acquired = System.nanoTime();
            waiting.set(self, 0);
            if (lastHolder.get() == peer) handoffSamples.add((acquired - releaseStarted.get()) / 1000.0);
            lastHolder.set(self);
            while (waiting.get(peer) == 0 && finished.get(peer) == 0) Thread.yield();
            Thread.sleep(3);  // as dlock's 3 ms: time for the peer to queue and set its watch
            releaseStarted.set(System.nanoTime());
            mutex.release();
          }
          finished.set(self, 1);
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      }));
    }
    for (Thread t : turns) t.start();
    for (Thread t : turns) t.join();
    printRow("Curator handoff between two clients", "handoff_us", new ArrayList<>(handoffSamples));
  }

  private static void contended(String connect, String base, int contenders, double seconds)
      throws Exception {

    AtomicLongArray grants = new AtomicLongArray(contenders);
    AtomicInteger ready = new AtomicInteger();
    AtomicLong stopAt = new AtomicLong();
    List<Thread> workers = new ArrayList<>();
    for (int i = 0; i < contenders; ++i) {
      final int self = i;
      workers.add(new Thread(() -> {
        try (CuratorFramework c = client(connect)) {
          InterProcessMutex mutex = new InterProcessMutex(c, base + "/contended");
          ready.incrementAndGet();
          while (stopAt.get() == 0) Thread.yield();
          long mine = 0;
          while (System.nanoTime() < stopAt.get()) {
            mutex.acquire();
            mutex.release();
            ++mine;
          }
          grants.set(self, mine);
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      }));
    }
    for (Thread t : workers) t.start();
    while (ready.get() < contenders) Thread.sleep(1);
    stopAt.set(System.nanoTime() + (long) (seconds * 1e9));
    for (Thread t : workers) t.join();
    long total = 0, fewest = Long.MAX_VALUE, most = 0;
    for (int i = 0; i < contenders; ++i) {
      total += grants.get(i);
      fewest = Math.min(fewest, grants.get(i));
      most = Math.max(most, grants.get(i));
    }
    if (keys) {
      System.out.printf("contended_per_s %.0f%ncontended_fewest %d%ncontended_most %d%n",
                        total / seconds, fewest, most);
    } else {
      System.out.printf("%-44s %9.0f grants/s (%d clients, %.0f s), per client %d to %d%n",
                        "Curator contended", total / seconds, contenders, seconds, fewest, most);
    }
  }
}
