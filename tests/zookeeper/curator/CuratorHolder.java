// A Java process holding a lock with Apache Curator's recipes, for dlock's interoperability
// tests (tests/zookeeper/curator_interop_test.cpp).
//
//   java CuratorHolder CONNECT PATH MODE    MODE: mutex | read | write | semaphore:N | latch:ID
//
// Acquires the lock at PATH (waiting as long as it takes), prints "acquired", releases when
// stdin closes, prints "released". latch:ID takes part in the LeaderLatch election at PATH
// with participant id ID, and "acquired" means it leads. Errors go to stderr with exit
// status 1.
import java.io.InputStream;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorHolder {
  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println(
          "usage: CuratorHolder CONNECT PATH mutex|read|write|semaphore:N|latch:ID");
      System.exit(64);
    }
    String connect = args[0], path = args[1], mode = args[2];
    try (CuratorFramework client = CuratorFrameworkFactory.newClient(
             connect, 10000, 10000, new ExponentialBackoffRetry(100, 5))) {
      client.start();
      client.blockUntilConnected();
      if (mode.startsWith("latch:")) {
        LeaderLatch latch = new LeaderLatch(client, path, mode.substring("latch:".length()));
        latch.start();
        latch.await();
        holdUntilStdinCloses();
        latch.close();
      } else if (mode.startsWith("semaphore:")) {
        int max = Integer.parseInt(mode.substring("semaphore:".length()));
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, max);
        Lease lease = semaphore.acquire();
        holdUntilStdinCloses();
        semaphore.returnLease(lease);
      } else {
        InterProcessLock lock;
        if (mode.equals("mutex")) {
          lock = new InterProcessMutex(client, path);
        } else if (mode.equals("read")) {
          lock = new InterProcessReadWriteLock(client, path).readLock();
        } else if (mode.equals("write")) {
          lock = new InterProcessReadWriteLock(client, path).writeLock();
        } else {
          throw new IllegalArgumentException("unknown mode " + mode);
        }
        lock.acquire();
        holdUntilStdinCloses();
        lock.release();
      }
      System.out.println("released");
      System.out.flush();
    }
  }

  private static void holdUntilStdinCloses() throws Exception {
    System.out.println("acquired");
    System.out.flush();
    InputStream in = System.in;
    while (in.read() >= 0) {
    }
  }
}
