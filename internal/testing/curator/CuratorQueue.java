// CuratorQueue drives Apache Curator's DistributedQueue for the queue
// benchmarks of corral: the Go side (package curator) starts it, sends it
// one command a line on standard input and reads one answer a line on
// standard output. Every answer is "ok" and numbers, or "err" and a reason.
//
//	put PATH PRODUCERS ITEMS MODE
//	                          PRODUCERS threads share ITEMS puts into the
//	                          queue at PATH (Curator's put: MODE "bg" in
//	                          the background, Curator's default; "fg" in
//	                          the foreground, each put returning once
//	                          its item is stored), then flushPuts:
//	                          "ok ITEMS NANOS PEAK SUMNANOS", where PEAK is
//	                          the most puts in flight at once and SUMNANOS
//	                          the sum of every put's time in flight (over
//	                          NANOS: the mean in flight, by Little's law).
//	drain PATH ITEMS          starts a consumer on the queue at PATH and
//	                          waits until it consumed ITEMS: "ok ITEMS NANOS",
//	                          timed from its start (its first listing
//	                          included) to the last item consumed.
//	quit                      closes the client and exits.
//
// Every put's data is the same 7 bytes, "payload", as corral's benchmarks
// put. The JVM runs with its defaults: what a Curator user gets.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.MultiItem;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueuePutListener;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorQueue {
    private static final byte[] PAYLOAD = "payload".getBytes(StandardCharsets.UTF_8);

    // An item remembers when its put began, so that the put listener can
    // add up the time each put spent in flight.
    private static final class Item {
        final long start = System.nanoTime();
    }

    private static final QueueSerializer<Item> SERIALIZER = new QueueSerializer<Item>() {
        @Override
        public byte[] serialize(Item item) {
            return PAYLOAD;
        }

        // Never null: Curator takes a null item for the end of a
        // message's items, and would hand the consumer nothing.
        @Override
        public Item deserialize(byte[] bytes) {
            return new Item();
        }
    };

    private final CuratorFramework client;

    private CuratorQueue(String servers) {
        client = CuratorFrameworkFactory.newClient(servers, new ExponentialBackoffRetry(100, 3));
        client.start();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: CuratorQueue host:port");
            System.exit(2);
        }
        CuratorQueue cq = new CuratorQueue(args[0]);
        if (!cq.client.blockUntilConnected(60, TimeUnit.SECONDS)) {
            System.out.println("err no connection within 60 s");
            System.exit(1);
        }
        System.out.println("ok ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split("\\s+");
            String answer;
            try {
                switch (f[0]) {
                    case "put":
                        answer = cq.put(f[1], Integer.parseInt(f[2]), Integer.parseInt(f[3]), f[4].equals("bg"));
                        break;
                    case "drain":
                        answer = cq.drain(f[1], Integer.parseInt(f[2]));
                        break;
                    case "quit":
                        cq.client.close();
                        System.out.println("ok bye");
                        return;
                    default:
                        answer = "err unknown command " + f[0];
                }
            } catch (Exception e) {
                answer = "err " + e.toString().replace('\n', ' ');
            }
            System.out.println(answer);
        }
        cq.client.close();
    }

    private String put(String path, int producers, int items, boolean background) throws Exception {
        DistributedQueue<Item> queue = QueueBuilder.builder(client, null, SERIALIZER, path)
                .putInBackground(background).buildQueue();
        AtomicInteger inFlight = new AtomicInteger();
        AtomicInteger peak = new AtomicInteger();
        LongAdder flightNanos = new LongAdder();
        queue.getPutListenerContainer().addListener(new QueuePutListener<Item>() {
            @Override
            public void putCompleted(Item item) {
                flightNanos.add(System.nanoTime() - item.start);
                inFlight.decrementAndGet();
            }

            @Override
            public void putMultiCompleted(MultiItem<Item> items) {
            }
        });
        queue.start();
        AtomicReference<Exception> failed = new AtomicReference<>();
        Thread[] threads = new Thread[producers];
        long start = System.nanoTime();
        for (int p = 0; p < producers; p++) {
            int mine = items / producers + (p < items % producers ? 1 : 0);
            threads[p] = new Thread(() -> {
                try {
                    for (int i = 0; i < mine; i++) {
                        int now = inFlight.incrementAndGet();
                        peak.accumulateAndGet(now, Math::max);
                        queue.put(new Item());
                    }
                } catch (Exception e) {
                    failed.compareAndSet(null, e);
                }
            });
            threads[p].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        boolean flushed = queue.flushPuts(5, TimeUnit.MINUTES);
        long took = System.nanoTime() - start;
        queue.close();
        if (failed.get() != null) {
            throw failed.get();
        }
        if (!flushed) {
            return "err flushPuts timed out";
        }
        return "ok " + items + " " + took + " " + peak.get() + " " + flightNanos.sum();
    }

    private String drain(String path, int items) throws Exception {
        CountDownLatch left = new CountDownLatch(items);
        QueueConsumer<Item> consumer = new QueueConsumer<Item>() {
            @Override
            public void consumeMessage(Item item) {
                left.countDown();
            }

            @Override
            public void stateChanged(CuratorFramework client, ConnectionState state) {
            }
        };
        DistributedQueue<Item> queue = QueueBuilder.builder(client, consumer, SERIALIZER, path).buildQueue();
        long start = System.nanoTime();
        queue.start();
        boolean all = left.await(2, TimeUnit.MINUTES);
        long took = System.nanoTime() - start;
        queue.close();
        if (!all) {
            return "err drained " + (items - left.getCount()) + " of " + items + " in 2 minutes";
        }
        return "ok " + items + " " + took;
    }
}
