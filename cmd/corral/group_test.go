package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/partition"
)

// TestGroupCLI: corral group lists the members in the order they joined,
// and with --watch prints the list again when one joins; corral locks
// shows the group.
func TestGroupCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		path := "/e2e/group-cli"
		a, err := group.Join(t.Context(), srv.st, path, []byte("10.0.0.1:80"))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Leave(t.Context())

		out, code := corral(t, "", "group", "--store", srv.url, path)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "TOKEN") ||
			!strings.Contains(lines[1], fmt.Sprintf("%d", a.Token())) || !strings.Contains(lines[1], `"10.0.0.1:80"`) {
			t.Errorf("corral group = %q, exit %d; want a header and a's row", out, code)
		}

		w := start(t, "group", "--store", srv.url, "--watch", "--json", path)
		var doc struct {
			Members []group.Member `json:"members"`
		}
		if err := json.Unmarshal([]byte(w.line(t)), &doc); err != nil || len(doc.Members) != 1 {
			t.Fatalf("corral group --watch first list: %+v, %v; want one member", doc, err)
		}
		b, err := group.Join(t.Context(), srv.st, path, []byte("10.0.0.2:80"))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Leave(t.Context())
		for len(doc.Members) != 2 {
			if err := json.Unmarshal([]byte(w.line(t)), &doc); err != nil {
				t.Fatal(err)
			}
		}
		if string(doc.Members[1].Value) != "10.0.0.2:80" || doc.Members[1].Token != b.Token() {
			t.Errorf("corral group --watch: second member %+v; want b, token %d", doc.Members[1], b.Token())
		}

		out, _ = corral(t, "", "locks", "--store", srv.url, path)
		if !hasRow(out, path, "group", "member") || !strings.Contains(out, `"10.0.0.2:80"`) {
			t.Errorf("corral locks = %q; want the group's members", out)
		}
	})
}

// TestShardsCLI: corral shards shows the owner and token of every shard,
// "-" for a shard nobody contends for.
func TestShardsCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		path := "/e2e/shards-cli"
		m, err := partition.Join(t.Context(), srv.st, path, 3, "worker-a")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Leave(t.Context())
		granted := make(chan *partition.Shard, 3)
		go m.Run(t.Context(), func(ctx context.Context, s *partition.Shard) error {
			granted <- s
			<-ctx.Done()
			return nil
		})
		set := make([]*partition.Shard, 3)
		for range 3 {
			select {
			case s := <-granted:
				set[s.ID()] = s
			case <-time.After(30 * time.Second):
				t.Fatal("the only member was not given its 3 shards")
			}
		}
		out, code := corral(t, "", "shards", "--store", srv.url, "--shards", "4", path)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "SHARD") {
			t.Fatalf("corral shards = %q, exit %d; want a header and 4 rows", out, code)
		}
		for i, s := range set {
			f := strings.Fields(lines[1+i])
			if len(f) < 3 || f[0] != fmt.Sprint(s.ID()) || f[1] != `"worker-a"` || f[2] != fmt.Sprint(s.Token()) {
				t.Errorf("corral shards row %q; want shard %d owned by worker-a, token %d", lines[1+i], s.ID(), s.Token())
			}
		}
		if f := strings.Fields(lines[4]); len(f) < 2 || f[0] != "3" || f[1] != "-" {
			t.Errorf("corral shards row %q; want shard 3 unowned", lines[4])
		}
		out, _ = corral(t, "", "locks", "--store", srv.url, path)
		if !hasRow(out, path+"/shards/0", "lock", "holder") || !hasRow(out, path+"/members", "group", "member") {
			t.Errorf("corral locks = %q; want the shards' locks and the members", out)
		}
	})
}

// hasRow reports whether the table out has a row that starts with fields.
func hasRow(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= len(fields) && slices.Equal(f[:len(fields)], fields) {
			return true
		}
	}
	return false
}
