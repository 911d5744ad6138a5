package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
	corralsync "github.com/corral-go/corral/sync"
)

// nodeJSON is a node as every --json shows it.
type nodeJSON struct {
	Name       string  `json:"name"`
	Seq        int64   `json:"seq"`
	Mode       string  `json:"mode"`
	Session    string  `json:"session"`
	Data       *string `json:"data"`
	DataBase64 *string `json:"data_base64"`
	Identity   *struct {
		Label string `json:"label"`
	} `json:"identity"`
	Since   time.Time `json:"since"`
	Granted time.Time `json:"granted"`
}

// groupDoc is the document of corral group --json.
type groupDoc struct {
	Path    string     `json:"path"`
	Time    time.Time  `json:"time"`
	Members []nodeJSON `json:"members"`
}

// TestGroupCLI: corral group lists the members in the order they joined,
// and with --watch prints the list again when one joins or changes its
// value; --json shows members as every --json shows nodes (a value that
// is not UTF-8 in base64); corral locks shows the group.
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
		var doc groupDoc
		if err := json.Unmarshal([]byte(w.line(t)), &doc); err != nil || len(doc.Members) != 1 || doc.Path != path || doc.Time.IsZero() {
			t.Fatalf("corral group --watch first list: %+v, %v; want one member, the path and the time", doc, err)
		}
		if m := doc.Members[0]; m.Name != store.Base(a.Path()) || m.Seq != a.Token() || m.Mode != "joined" || m.Data == nil || *m.Data != "10.0.0.1:80" {
			t.Errorf("corral group --json member %+v; want name %s, seq %d, mode joined, data 10.0.0.1:80", m, store.Base(a.Path()), a.Token())
		}
		b, err := group.Join(t.Context(), srv.st, path, []byte{0xff, 0x00, 'b'})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Leave(t.Context())
		for len(doc.Members) != 2 {
			if err := json.Unmarshal([]byte(w.line(t)), &doc); err != nil {
				t.Fatal(err)
			}
		}
		if m := doc.Members[1]; m.Seq != b.Token() || m.Data != nil || m.DataBase64 == nil || *m.DataBase64 != "/wBi" {
			t.Errorf("corral group --watch: second member %+v; want b, token %d, data_base64 /wBi", m, b.Token())
		}
		if err := a.SetValue(t.Context(), []byte("10.0.0.9:80")); err != nil {
			t.Fatal(err)
		}
		for doc.Members[0].Data == nil || *doc.Members[0].Data != "10.0.0.9:80" {
			if err := json.Unmarshal([]byte(w.line(t)), &doc); err != nil {
				t.Fatal(err)
			}
		}

		out, _ = corral(t, "", "locks", "--store", srv.url, path)
		if !hasRow(out, path, "group", "member") || !strings.Contains(out, `"10.0.0.9:80"`) {
			t.Errorf("corral locks = %q; want the group's members", out)
		}
	})
}

// TestGroupJoinCLI: corral group join is a member while its command runs
// (the command sees itself listed), leaves when it exits, and passes its
// status through; a membership that ends under it stops it.
func TestGroupJoinCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		path := "/e2e/group-join"
		out, code := corral(t, "", "group", "join", "--store", srv.url, path, "cli-member", "--",
			bin, "group", "--store", srv.url, "--json", path)
		var doc groupDoc
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &doc); code != 0 || err != nil ||
			len(doc.Members) != 1 || doc.Members[0].Data == nil || *doc.Members[0].Data != "cli-member" {
			t.Fatalf("corral group join -- corral group = %q, exit %d, %v; want the member listed", out, code, err)
		}
		assertNoContenders(t, srv, path)

		// The membership ends under the command: its node is deleted.
		p := start(t, "group", "join", "--store", srv.url, "--grace", "5s", path, "doomed", "--", "sh", "-c", "echo in; exec sleep 600")
		if l := p.line(t); l != "in" {
			t.Fatalf("corral group join: first line %q; want in", l)
		}
		kids := backends.WaitChildren(t, srv.st, path, backends.Count(1))
		if err := srv.st.Delete(t.Context(), path+"/"+kids[0].Name); err != nil {
			t.Fatal(err)
		}
		if code := p.exit(t); code != exitRunFailed || !strings.Contains(p.stderr.String(), "membership lost") {
			t.Errorf("corral group join after its node was deleted: exit %d, stderr %q; want %d, membership lost", code, p.stderr, exitRunFailed)
		}
	})
}

// shardsDoc is the document of corral shards --json.
type shardsDoc struct {
	Path    string     `json:"path"`
	Time    time.Time  `json:"time"`
	Count   int        `json:"shard_count"`
	Members []nodeJSON `json:"members"`
	Shards  []struct {
		Shard   int        `json:"shard"`
		Owner   *nodeJSON  `json:"owner"`
		Waiters []nodeJSON `json:"waiters"`
	} `json:"shards"`
}

// workShards runs Run on a member of the partition at path that joined with
// k shards and id, and returns the channel its grants arrive on.
func workShards(t *testing.T, srv server, path string, k int, id string) (*partition.Member, <-chan *partition.Shard) {
	t.Helper()
	m, err := partition.Join(t.Context(), srv.st, path, k, id)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan *partition.Shard, k)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		m.Run(t.Context(), func(ctx context.Context, s *partition.Shard) error {
			granted <- s
			<-ctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() {
		m.Leave(context.Background())
		<-ran
	})
	return m, granted
}

// TestShardsCLI: corral shards shows the owner and token of every shard of
// the number the members agreed on (a --shards that differs is reported),
// how long each has been owned from its grant, and with --watch every
// change; corral locks lists each member once.
func TestShardsCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		path := "/e2e/shards-cli"
		_, granted := workShards(t, srv, path, 3, "worker-a")
		set := make([]*partition.Shard, 3)
		for range 3 {
			select {
			case s := <-granted:
				set[s.ID()] = s
			case <-time.After(wait):
				t.Fatal("the only member was not given its 3 shards")
			}
		}
		code, out, stderr := runSplit(t, nil, "shards", "--store", srv.url, "--shards", "4", path)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "SHARD") {
			t.Fatalf("corral shards --shards 4 = %q, exit %d; want a header and the members' 3 rows", out, code)
		}
		if !strings.Contains(stderr, "--shards 4, but the members of "+path+" have 3 shards") {
			t.Errorf("corral shards --shards 4: stderr %q; want the members' 3 shards reported", stderr)
		}
		for i, s := range set {
			f := strings.Fields(lines[1+i])
			if len(f) < 5 || f[0] != fmt.Sprint(s.ID()) || f[1] != `"worker-a"` || f[2] != fmt.Sprint(s.Token()) || strings.HasPrefix(f[4], "<=") {
				t.Errorf("corral shards row %q; want shard %d owned by worker-a, token %d, for a time from its grant", lines[1+i], s.ID(), s.Token())
			}
		}
		if out, code := corral(t, "", "shards", "--store", srv.url, path); code != 0 || strings.Count(out, "\n") != 4 {
			t.Errorf("corral shards (no --shards) = %q, exit %d; want a header and 3 rows", out, code)
		}

		// --watch: a member joins, and takes shards.
		w := start(t, "shards", "--store", srv.url, "--watch", "--json", path)
		var doc shardsDoc
		if err := json.Unmarshal([]byte(w.line(t)), &doc); err != nil || doc.Count != 3 || len(doc.Shards) != 3 || len(doc.Members) != 1 {
			t.Fatalf("corral shards --watch first document: %+v, %v; want 3 shards, 1 member", doc, err)
		}
		workShards(t, srv, path, 3, "worker-b")
		for owners := 0; owners == 0; {
			if err := json.Unmarshal([]byte(w.line(t)), &doc); err != nil {
				t.Fatal(err)
			}
			for _, s := range doc.Shards {
				if s.Owner != nil && s.Owner.Identity != nil && s.Owner.Identity.Label == "worker-b" {
					owners++
				}
			}
		}

		// Each member once: the members' directory is one group.
		out, _ = corral(t, "", "locks", "--store", srv.url, path)
		if n := strings.Count(out, " member "); n != 2 || !hasRow(out, path+"/members", "group", "member") {
			t.Errorf("corral locks = %q; want each of the 2 members once", out)
		}
		if !hasRow(out, path+"/shards/0", "lock", "holder") {
			t.Errorf("corral locks = %q; want the shards' locks", out)
		}
	})
}

// TestShardsFor: a shard's age counts from its grant, not from its owner's
// wait: the owner waited behind a lock on the shard's directory.
func TestShardsFor(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		path := "/e2e/shards-for"
		blocker := corralsync.NewMutex(srv.st, partition.ShardsDir(path)+"/0")
		if err := blocker.Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, granted := workShards(t, srv, path, 1, "worker-a")
		backends.WaitChildren(t, srv.st, partition.ShardsDir(path)+"/0", backends.Count(2))
		released := time.Now().Truncate(time.Millisecond)
		if err := blocker.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-granted:
		case <-time.After(wait):
			t.Fatal("the member was not given its shard")
		}
		out, code := corral(t, "", "shards", "--store", srv.url, "--json", path)
		var doc shardsDoc
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Shards) != 1 || doc.Shards[0].Owner == nil {
			t.Fatalf("corral shards --json = %q, exit %d, %v; want shard 0 owned", out, code, err)
		}
		o := doc.Shards[0].Owner
		if o.Granted.Before(released) || !o.Since.Before(released) {
			t.Errorf("owner since %v, granted %v; want the attempt before the blocker's release at %v, the grant after", o.Since, o.Granted, released)
		}
		out, _ = corral(t, "", "shards", "--store", srv.url, path)
		if f := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1]); len(f) < 5 || strings.HasPrefix(f[4], "<=") {
			t.Errorf("corral shards = %q; want FOR counted from the grant", out)
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

// TestShardsRunCLI: corral shards run runs the command once per granted
// shard with the shard in its environment, stops it when the shard moves to
// a member that joined, and leaves on Ctrl-C, its shards passing on.
func TestShardsRunCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		path := "/e2e/shards-run"
		work := []string{"sh", "-c", `echo "start $CORRAL_SHARD $CORRAL_SHARD_TOKEN $CORRAL_SHARDS $CORRAL_MEMBER"; ` +
			`trap 'echo "stop $CORRAL_SHARD"; kill $! 2>/dev/null; exit 0' TERM; sleep 600 & wait`}
		member := func(id string) *proc {
			return start(t, append([]string{"shards", "run", "--store", srv.url, "--grace", "10s", path, "2", id, "--"}, work...)...)
		}
		// started reads lines of p until one starts a shard, and returns
		// the shard and its token.
		started := func(p *proc, id string) (shard int, token int64) {
			t.Helper()
			for {
				f := strings.Fields(p.line(t))
				if len(f) == 5 && f[0] == "start" {
					if f[3] != "2" || f[4] != id {
						t.Errorf("command environment %q; want 2 shards, member %s", f, id)
					}
					fmt.Sscan(f[1], &shard)
					fmt.Sscan(f[2], &token)
					return shard, token
				}
			}
		}
		stopped := func(p *proc) int {
			t.Helper()
			for {
				f := strings.Fields(p.line(t))
				if len(f) == 2 && f[0] == "stop" {
					var s int
					fmt.Sscan(f[1], &s)
					return s
				}
			}
		}
		w1 := member("w1")
		tokens := map[int]int64{}
		for range 2 {
			s, tok := started(w1, "w1")
			tokens[s] = tok
		}
		if len(tokens) != 2 {
			t.Fatalf("w1 started shards %v; want 0 and 1", tokens)
		}
		w2 := member("w2")
		moved := stopped(w1)
		s, tok := started(w2, "w2")
		if s != moved || tok <= tokens[s] {
			t.Errorf("w2 started shard %d, token %d; want shard %d, which w1 stopped, with a token above %d", s, tok, moved, tokens[s])
		}
		w1.cmd.Process.Signal(os.Interrupt)
		kept := stopped(w1)
		if code := w1.exit(t); code != exitInterrupted {
			t.Errorf("corral shards run after Ctrl-C: exit %d; want %d\n%s", code, exitInterrupted, w1.stderr)
		}
		if s, _ := started(w2, "w2"); s != kept {
			t.Errorf("w2 started shard %d after w1 left; want %d", s, kept)
		}
		w2.cmd.Process.Signal(syscall.SIGTERM)
		if code := w2.exit(t); code != 128+int(syscall.SIGTERM) {
			t.Errorf("corral shards run after SIGTERM: exit %d; want %d\n%s", code, 128+int(syscall.SIGTERM), w2.stderr)
		}
		backends.WaitChildren(t, srv.st, partition.MembersDir(path), backends.Count(0))
	})
}
