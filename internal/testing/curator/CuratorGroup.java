// CuratorGroup drives Apache Curator's GroupMember for corral's group
// interoperability test: the Go side (package curator) starts it, sends it
// one command a line on standard input and reads one answer a line on
// standard output. Every answer is "ok" and what was asked, or "err" and a
// reason. Values travel in hexadecimal ("-" for none), so that any bytes
// fit a line.
//
//	join PATH ID VALUE        starts a GroupMember with id ID and payload
//	                          VALUE in the group at PATH: "ok".
//	set ID VALUE              setThisData(VALUE) of member ID: "ok".
//	members ID WANT           waits, up to 20 s, until member ID's
//	                          getCurrentMembers() is WANT, and answers
//	                          "ok" and the members it has then, as
//	                          "id=VALUE" sorted and joined by "," ("-"
//	                          for none); WANT is written the same way.
//	                          GroupMember offers no event to wait on: the
//	                          program looks at its cache every 10 ms.
//	leave ID                  closes member ID: "ok".
//	quit                      closes the client and exits.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorGroup {
    private final CuratorFramework client;
    private final Map<String, GroupMember> members = new HashMap<>();

    private CuratorGroup(String servers) {
        client = CuratorFrameworkFactory.newClient(servers, new ExponentialBackoffRetry(100, 3));
        client.start();
    }

    private static byte[] unhex(String s) {
        if (s.equals("-")) {
            return new byte[0];
        }
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    private static String hex(byte[] b) {
        if (b == null || b.length == 0) {
            return "-";
        }
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }

    private static String render(Map<String, byte[]> current) {
        if (current.isEmpty()) {
            return "-";
        }
        StringBuilder s = new StringBuilder();
        for (Map.Entry<String, byte[]> e : new TreeMap<>(current).entrySet()) {
            if (s.length() > 0) {
                s.append(',');
            }
            s.append(e.getKey()).append('=').append(hex(e.getValue()));
        }
        return s.toString();
    }

    private GroupMember member(String id) {
        GroupMember m = members.get(id);
        if (m == null) {
            throw new IllegalArgumentException("no member " + id);
        }
        return m;
    }

    private String await(String id, String want) throws InterruptedException {
        GroupMember m = member(id);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        String got = render(m.getCurrentMembers());
        while (!got.equals(want) && System.nanoTime() < deadline) {
            Thread.sleep(10);
            got = render(m.getCurrentMembers());
        }
        return got.equals(want) ? "ok " + got : "err timeout: members " + got;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: CuratorGroup host:port");
            System.exit(2);
        }
        CuratorGroup g = new CuratorGroup(args[0]);
        if (!g.client.blockUntilConnected(60, TimeUnit.SECONDS)) {
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
                    case "join": {
                        GroupMember m = new GroupMember(g.client, f[1], f[2], unhex(f[3]));
                        m.start();
                        g.members.put(f[2], m);
                        answer = "ok joined";
                        break;
                    }
                    case "set":
                        g.member(f[1]).setThisData(unhex(f[2]));
                        answer = "ok set";
                        break;
                    case "members":
                        answer = g.await(f[1], f[2]);
                        break;
                    case "leave":
                        g.member(f[1]).close();
                        g.members.remove(f[1]);
                        answer = "ok left";
                        break;
                    case "quit":
                        for (GroupMember m : g.members.values()) {
                            m.close();
                        }
                        g.client.close();
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
        for (GroupMember m : g.members.values()) {
            m.close();
        }
        g.client.close();
    }
}
