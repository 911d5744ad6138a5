package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-go/corral/inspect"
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
		if h, _ := pids(decodeLocks(t, watch.line(t))); len(h) != 1 || h[0] != hpid {
			t.Fatalf("corral locks --watch: first holders %v; want [%d]", h, hpid)
		}
		holder.cmd.Process.Signal(os.Interrupt)
		holder.exit(t)
		waiter.line(t) // the waiter holds the lock now
		for {
			h, w := pids(decodeLocks(t, watch.line(t)))
			if len(h) == 1 && h[0] == wpid && len(w) == 0 {
				break // the hand-over was seen
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
