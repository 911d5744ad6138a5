package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/corral-go/corral/store"
)

// watchDoc reads the next JSON line of p.
func watchDoc(t *testing.T, p *proc) watchJSON {
	t.Helper()
	var d watchJSON
	l := p.line(t)
	if err := json.Unmarshal([]byte(l), &d); err != nil {
		t.Fatalf("corral watch printed %q: %v", l, err)
	}
	return d
}

// TestWatchCLI: corral watch prints a node as it comes, changes and goes,
// from before it exists; with --tree, every node and then each change,
// "current" once the first read is printed; Ctrl-C ends it with 130;
// flags it cannot take exit 2.
func TestWatchCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		ctx, path := t.Context(), "/e2e/watch-cli"
		node := start(t, "watch", "--store", srv.url, "--json", path+"/n")
		if d := watchDoc(t, node); d.Event != "value" || d.Exists || d.Path != path+"/n" {
			t.Fatalf("first value %+v; want no node", d)
		}
		if _, err := srv.st.Create(ctx, path+"/n", []byte("one"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		if d := watchDoc(t, node); !d.Exists || string(d.Data) != "one" || d.Version != 0 {
			t.Fatalf("value after create %+v; want one at version 0", d)
		}

		tree := start(t, "watch", "--store", srv.url, "--tree", "--json", path)
		created := map[string]string{}
		for d := watchDoc(t, tree); d.Event != "current"; d = watchDoc(t, tree) {
			if d.Event != "created" {
				t.Fatalf("first read: %+v; want created, then current", d)
			}
			created[d.Path] = string(d.Data)
		}
		if len(created) != 2 || created[path+"/n"] != "one" {
			t.Errorf("first read %v; want %s and %s/n", created, path, path)
		}
		text := start(t, "watch", "--store", srv.url, "--tree", "--depth", "0", path)
		if l := text.line(t); l != "created "+path+` version 0 ""` {
			t.Errorf("text: %q; want the root created", l)
		}
		if l := text.line(t); l != "current" {
			t.Errorf("text: %q; want current", l)
		}

		if _, err := srv.st.Set(ctx, path+"/n", []byte("two"), store.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if d := watchDoc(t, node); string(d.Data) != "two" || d.Version != 1 {
			t.Errorf("value after set %+v; want two at version 1", d)
		}
		if d := watchDoc(t, tree); d.Event != "changed" || d.Path != path+"/n" || string(d.Data) != "two" {
			t.Errorf("tree after set %+v; want %s/n changed to two", d, path)
		}
		if err := srv.st.Delete(ctx, path+"/n"); err != nil {
			t.Fatal(err)
		}
		if d := watchDoc(t, node); d.Exists {
			t.Errorf("value after delete %+v; want no node", d)
		}
		if d := watchDoc(t, tree); d.Event != "deleted" || d.Path != path+"/n" || d.Exists {
			t.Errorf("tree after delete %+v; want %s/n deleted", d, path)
		}
		for _, p := range []*proc{node, tree, text} {
			p.cmd.Process.Signal(os.Interrupt)
			if code := p.exit(t); code != exitInterrupted {
				t.Errorf("corral watch after Ctrl-C: exit %d; want %d\n%s", code, exitInterrupted, p.stderr)
			}
		}

		for _, args := range [][]string{
			{"--depth", "1", path},
			{"--tree", "--depth", "-1", path},
			{"--tree", "--max-nodes", "0", path},
			{"--tree", "bad"},
			{},
		} {
			if out, code := corral(t, "", append([]string{"watch", "--store", srv.url}, args...)...); code != exitUsage {
				t.Errorf("corral watch %q: exit %d, %q; want %d", args, code, out, exitUsage)
			}
		}
		if _, err := srv.st.Create(ctx, path+"/a", nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		if _, code := corral(t, "", "watch", "--store", srv.url, "--tree", "--max-nodes", "1", path); code != exitFailure {
			t.Errorf("corral watch --max-nodes 1 of 2 nodes: exit %d; want %d", code, exitFailure)
		}
	})
}
