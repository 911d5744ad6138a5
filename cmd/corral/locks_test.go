package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// locksDoc is the JSON corral locks prints.
type locksDoc struct {
	Path    string           `json:"path"`
	Recipes []inspect.Report `json:"recipes"`
}

func decodeLocks(t *testing.T, line string) locksDoc {
	t.Helper()
	var d locksDoc
	if err := json.Unmarshal([]byte(line), &d); err != nil {
		t.Fatalf("corral locks --json printed %q: %v", line, err)
	}
	return d
}

// pids returns the process IDs of the holders and the waiters of the only
// recipe of d, 0 where a contender has no identity.
func pids(d locksDoc) (holders, waiters []int) {
	if len(d.Recipes) != 1 {
		return nil, nil
	}
	for _, c := range d.Recipes[0].Holders {
		if c.Identity != nil {
			holders = append(holders, c.Identity.PID)
		}
	}
	for _, c := range d.Recipes[0].Waiters {
		if c.Identity != nil {
			waiters = append(waiters, c.Identity.PID)
		}
	}
	return holders, waiters
}

// TestLocks: corral locks shows the holder and the waiter of a lock held by
// other corral processes, with their pids and labels, as a table and as
// JSON; with --watch it follows the hand-over.
func TestLocks(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		holder := start(t, "lock", "--store", srv.url, "--label", "first", "/e2e/locks/deploy", "--", "sh", "-c", "echo held; exec sleep 600")
		holder.line(t)
		waiter := start(t, "lock", "--store", srv.url, "--label", "second", "/e2e/locks/deploy", "--", "sh", "-c", "echo held; exec sleep 600")
		waitChildren(t, srv, "/e2e/locks/deploy", 2)
		hpid, wpid := holder.cmd.Process.Pid, waiter.cmd.Process.Pid
		host, _ := os.Hostname()

		table := start(t, "locks", "--store", srv.url, "/e2e")
		header := table.line(t)
		if !strings.HasPrefix(header, "PATH") || !strings.Contains(header, "WHO") {
			t.Errorf("corral locks header = %q", header)
		}
		for _, want := range []struct {
			role, label string
			pid         int
		}{{"holder", "first", hpid}, {"waiter", "second", wpid}} {
			l := table.line(t)
			f := strings.Fields(l)
			if len(f) < 8 || f[0] != "/e2e/locks/deploy" || f[1] != "lock" || f[2] != want.role || f[3] != "exclusive" ||
				!strings.Contains(l, host+" pid "+strconv.Itoa(want.pid)+` "`+want.label+`"`) {
				t.Errorf("corral locks row = %q; want the %s, pid %d, label %s", l, want.role, want.pid, want.label)
			}
		}
		if code := table.exit(t); code != 0 {
			t.Fatalf("corral locks exit %d\n%s", code, table.stderr)
		}

		js := start(t, "locks", "--store", srv.url, "--json", "/e2e/locks")
		d := decodeLocks(t, js.line(t))
		if h, w := pids(d); len(h) != 1 || h[0] != hpid || len(w) != 1 || w[0] != wpid {
			t.Errorf("corral locks --json: holders %v, waiters %v; want [%d], [%d]", h, w, hpid, wpid)
		}
		if r := d.Recipes[0]; r.Path != "/e2e/locks/deploy" || r.Kind != inspect.Lock || r.Waiters[0].Identity.Label != "second" {
			t.Errorf("corral locks --json = %+v", r)
		}
		js.exit(t)

		watch := start(t, "locks", "--store", srv.url, "--watch", "--json", "/e2e/locks")
		first := decodeLocks(t, watch.line(t))
		if h, _ := pids(first); len(h) != 1 || h[0] != hpid {
			t.Fatalf("corral locks --watch: first holders %v; want [%d]", h, hpid)
		}
		if g := first.Recipes[0].Holders[0].Granted; !g.IsZero() {
			t.Errorf("corral locks --watch: a holder already holding when first seen was granted at %v; want unknown", g)
		}
		holder.cmd.Process.Signal(os.Interrupt)
		holder.exit(t)
		waiter.line(t) // the waiter holds the lock now
		for {
			d := decodeLocks(t, watch.line(t))
			h, w := pids(d)
			if len(h) == 1 && h[0] == wpid && len(w) == 0 {
				// The hand-over was seen: when, too.
				c := d.Recipes[0].Holders[0]
				if c.Granted.IsZero() || c.Granted.Before(c.Since) || c.Granted.After(time.Now()) {
					t.Errorf("corral locks --watch: the new holder, since %v, granted at %v; want the time of the hand-over", c.Since, c.Granted)
				}
				break
			}
		}
		waiter.cmd.Process.Signal(os.Interrupt)
		waiter.exit(t)
		for {
			if d := decodeLocks(t, watch.line(t)); len(d.Recipes) == 0 {
				break
			}
		}
		watch.cmd.Process.Signal(os.Interrupt)
		if code := watch.exit(t); code != exitInterrupted {
			t.Errorf("corral locks --watch after Ctrl-C: exit %d; want %d\n%s", code, exitInterrupted, watch.stderr)
		}
	})
}

// TestLocksEmpty: a path with nothing held says so, and a missing one too.
func TestLocksEmpty(t *testing.T) {
	for _, args := range [][]string{{"locks", "--store", "mem://"}, {"locks", "--store", "mem://", "/nothing/here"}} {
		p := start(t, args...)
		if l := p.line(t); !strings.HasPrefix(l, "nothing held or awaited under /") {
			t.Errorf("corral %q = %q", args, l)
		}
		if code := p.exit(t); code != 0 {
			t.Errorf("corral %q: exit %d", args, code)
		}
	}
}

// TestLocksSchema: the table and --json show the same recipes and the same
// values: session ids as the table's hex strings in JSON (a float64 JSON
// reader keeps two sessions apart), an election's value as text in both,
// and a double barrier with nobody in it in both.
func TestLocksSchema(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		holder := start(t, "lock", "--store", srv.url, "/e2e/schema/lock", "--", "sh", "-c", "echo held; exec sleep 600")
		holder.line(t)
		waiter := start(t, "lock", "--store", srv.url, "/e2e/schema/lock", "--", "true")
		waitChildren(t, srv, "/e2e/schema/lock", 2)
		lead, err := election.New(srv.st, "/e2e/schema/elect").Campaign(t.Context(), []byte("10.0.0.7:8080"))
		if err != nil {
			t.Fatal(err)
		}
		defer lead.Resign(context.WithoutCancel(t.Context()))
		if _, err := srv.st.Create(t.Context(), "/e2e/schema/gate/ready", nil, store.Persistent); err != nil {
			t.Fatal(err)
		}

		table, code := corral(t, "", "locks", "--store", srv.url, "/e2e/schema")
		if code != 0 {
			t.Fatalf("corral locks: exit %d", code)
		}
		rows := map[string][][]string{} // by path
		for l := range strings.Lines(table) {
			f := strings.Fields(l)
			rows[f[0]] = append(rows[f[0]], f)
		}
		out, code := corral(t, "", "locks", "--json", "--store", srv.url, "/e2e/schema")
		if code != 0 {
			t.Fatalf("corral locks --json: exit %d", code)
		}
		var doc struct {
			Recipes []struct {
				Path    string           `json:"path"`
				Kind    string           `json:"kind"`
				Holders []map[string]any `json:"holders"`
				Waiters []map[string]any `json:"waiters"`
			} `json:"recipes"`
		}
		// encoding/json decodes numbers into float64, as JavaScript and jq do.
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("corral locks --json = %q: %v", out, err)
		}
		if len(doc.Recipes) != 3 {
			t.Fatalf("corral locks --json shows %d recipes; want 3:\n%s", len(doc.Recipes), out)
		}
		for _, r := range doc.Recipes {
			if len(rows[r.Path]) != max(len(r.Holders)+len(r.Waiters), 1) {
				t.Errorf("%s: %d table rows for %d holders and %d waiters\n%s", r.Path, len(rows[r.Path]), len(r.Holders), len(r.Waiters), table)
				continue
			}
			switch r.Kind {
			case "lock":
				sessions := map[string]bool{}
				for i, c := range append(r.Holders, r.Waiters...) {
					s, ok := c["session"].(string)
					if !ok || s != rows[r.Path][i][5] {
						t.Errorf("%s: session %#v; want a string, the table's %s", r.Path, c["session"], rows[r.Path][i][5])
					}
					sessions[s] = true
				}
				if len(sessions) != 2 {
					t.Errorf("%s: sessions %v; want 2 different ones", r.Path, sessions)
				}
			case "election":
				if d := r.Holders[0]["data"]; d != "10.0.0.7:8080" || rows[r.Path][0][8] != `"10.0.0.7:8080"` {
					t.Errorf("%s: JSON data %#v, table %q; want the value in both", r.Path, d, rows[r.Path][0])
				}
			case "double-barrier":
				if len(r.Holders)+len(r.Waiters) != 0 || rows[r.Path][0][8] != "nobody" {
					t.Errorf("%s: %v, table %q; want nobody in both", r.Path, r, rows[r.Path][0])
				}
			default:
				t.Errorf("%s: kind %s", r.Path, r.Kind)
			}
		}
		holder.cmd.Process.Signal(os.Interrupt)
		holder.exit(t)
		waiter.exit(t)
	})
}

// TestForeignContenders: on etcd, corral locks / and ls -r find the
// contenders of etcd's own concurrency.Mutex (as "etcdctl lock" makes
// them) on a path corral never created, whose prefix is no key.
func TestForeignContenders(t *testing.T) {
	c := etcdserver.Start(t, 1)
	cli := c.Client(t)
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	m := concurrency.NewMutex(sess, "/x/elock")
	if err := m.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(context.WithoutCancel(t.Context()))
	lease := inspect.SessionString(int64(sess.Lease()))
	url := "etcd://" + strings.TrimPrefix(c.Endpoints()[0], "http://")

	for _, root := range []string{"/", "/x"} {
		out, code := corral(t, "", "locks", "--json", "--store", url, root)
		var doc struct {
			Recipes []struct {
				Path    string           `json:"path"`
				Kind    string           `json:"kind"`
				Holders []map[string]any `json:"holders"`
			} `json:"recipes"`
		}
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
			t.Fatalf("corral locks --json %s = %q, exit %d (%v)", root, out, code, err)
		}
		if len(doc.Recipes) != 1 || doc.Recipes[0].Path != "/x/elock" || doc.Recipes[0].Kind != "foreign" ||
			len(doc.Recipes[0].Holders) != 1 || doc.Recipes[0].Holders[0]["session"] != lease {
			t.Errorf("corral locks --json %s = %s; want the concurrency.Mutex at /x/elock held by lease %s", root, out, lease)
		}
		table, code := corral(t, "", "locks", "--store", url, root)
		if code != 0 || !strings.Contains(table, "/x/elock") || !strings.Contains(table, lease) {
			t.Errorf("corral locks %s = %q, exit %d; want /x/elock held by %s", root, table, code, lease)
		}
	}
	out, code := corral(t, "", "ls", "-r", "--store", url, "/")
	key := m.Key()
	if code != 0 || !strings.Contains(out, "/x\t-\tdirectory (no node)") || !strings.Contains(out, key+"\t") || !strings.Contains(out, "ephemeral("+lease+")") {
		t.Errorf("corral ls -r / = %q, exit %d; want /x and the key %s, owned by %s", out, code, key, lease)
	}
}
