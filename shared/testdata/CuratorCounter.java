// CuratorCounter adds to a counter with Curator's DistributedAtomicLong, as
// a Java process sharing it with corral's shared.Counter would:
//
//	java CuratorCounter CONNECT PATH ADDS DELTA
//
// It adds DELTA to the counter at PATH, ADDS times, and prints the value it
// reads at the end.
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.retry.RetryNTimes;

public class CuratorCounter {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1];
        int adds = Integer.parseInt(args[2]);
        long delta = Long.parseLong(args[3]);
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(connect, new RetryNTimes(10, 100))) {
            client.start();
            if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not connected");
            }
            DistributedAtomicLong counter = new DistributedAtomicLong(client, path, new RetryNTimes(100000, 1));
            for (int i = 0; i < adds; i++) {
                AtomicValue<Long> v = counter.add(delta);
                if (!v.succeeded()) {
                    throw new IllegalStateException("add did not succeed");
                }
            }
            System.out.println(counter.get().postValue());
        }
    }
}
