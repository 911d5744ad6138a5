package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["watch"] = command{summary: "print a node, or a subtree, as it changes", run: runWatch}
}

const watchHelp = `Prints the node at PATH now and after every change (package cache): its
version and data, or "no node" while it is missing, until interrupted.
PATH need not exist yet.

With --tree every node at and below PATH (down to --depth) is printed as
created, then every change to them as it comes: created, changed, deleted;
"current" once every node read so far is printed, "stale" while the
connection is lost (changes made meanwhile come after it, then "current").
Changes of one node faster than they are printed may merge into one.

With --json each value or change is one JSON document on a line:
  {"event", "path", "exists", "version", "seq", "owner", "data", "stale"}
event is "value" without --tree, and created, changed, deleted, stale or
current with it; data is base64, absent for no node. Exit codes: 130/143
when interrupted, 5 when the session ends, 1 when the subtree has more
nodes than --max-nodes.`

func runWatch(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "watch", "[flags] PATH", watchHelp)
	tree := fs.Bool("tree", false, "follow the subtree below PATH")
	depth := fs.Int("depth", store.MaxPathDepth, "with --tree: how deep below PATH (1: its children)")
	maxNodes := fs.Int("max-nodes", cache.DefaultMaxNodes, "with --tree: the most nodes to follow")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, 1, "PATH"); err != nil {
		return err
	}
	if err := checkPath(pos[0]); err != nil {
		return err
	}
	var opts []cache.Option
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "depth":
			opts = append(opts, cache.WithDepth(*depth))
		case "max-nodes":
			opts = append(opts, cache.WithMaxNodes(*maxNodes))
		}
	})
	if len(opts) > 0 && !*tree {
		return fmt.Errorf("%w: --depth and --max-nodes need --tree", errUsage)
	}
	if *depth < 0 || *depth > store.MaxPathDepth || *maxNodes < 1 {
		return fmt.Errorf("%w: --depth must be 0 to %d and --max-nodes at least 1", errUsage, store.MaxPathDepth)
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	p := watchPrinter{w: e.stdout, json: *asJSON}
	if *tree {
		t := cache.NewTree(ctx, st, pos[0], opts...)
		defer t.Close()
		for ev := range t.Events() {
			if err := p.event(ev); err != nil {
				return err
			}
		}
		return watchEnd(ctx, st, t.Err())
	}
	n := cache.NewNode(ctx, st, pos[0])
	defer n.Close()
	for v := range n.Values() {
		if err := p.value(v); err != nil {
			return err
		}
	}
	return watchEnd(ctx, st, n.Err())
}

// watchEnd is the error a watch that stopped with err exits with.
func watchEnd(ctx context.Context, st store.Store, err error) error {
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx)
	case st.Context().Err() != nil:
		return fmt.Errorf("%w: %v", errUnreachable, context.Cause(st.Context()))
	}
	return err
}

// watchJSON is the JSON document of one value or change.
type watchJSON struct {
	Event   string `json:"event"`
	Path    string `json:"path,omitempty"`
	Exists  bool   `json:"exists"`
	Version int64  `json:"version"`
	Seq     int64  `json:"seq"`
	Owner   int64  `json:"owner,omitempty"`
	Data    []byte `json:"data,omitempty"`
	Stale   bool   `json:"stale,omitempty"`
}

// watchPrinter prints values and changes, as text or JSON.
type watchPrinter struct {
	w    io.Writer
	json bool
}

func (p watchPrinter) value(v cache.Value) error {
	if p.json {
		return p.doc(watchJSON{Event: "value", Path: v.Path, Exists: v.Exists, Version: v.Version, Seq: v.Seq, Owner: v.Owner, Data: v.Data, Stale: v.Stale})
	}
	stale := ""
	if v.Stale {
		stale = " (stale: connection lost)"
	}
	if !v.Exists {
		_, err := fmt.Fprintf(p.w, "%s: no node%s\n", v.Path, stale)
		return err
	}
	_, err := fmt.Fprintf(p.w, "%s: version %d %s%s\n", v.Path, v.Version, printable(v.Data), stale)
	return err
}

func (p watchPrinter) event(e cache.Event) error {
	n := e.Node
	if e.Type == cache.Deleted {
		n = store.Node{Path: e.Path}
	}
	if p.json {
		return p.doc(watchJSON{Event: e.Type.String(), Path: e.Path, Exists: e.Type == cache.Created || e.Type == cache.Changed,
			Version: n.Version, Seq: n.Seq, Owner: n.Owner, Data: n.Data})
	}
	var err error
	switch e.Type {
	case cache.Created, cache.Changed:
		_, err = fmt.Fprintf(p.w, "%s %s version %d %s\n", e.Type, e.Path, n.Version, printable(n.Data))
	case cache.Deleted:
		_, err = fmt.Fprintf(p.w, "deleted %s\n", e.Path)
	default:
		_, err = fmt.Fprintln(p.w, e.Type)
	}
	return err
}

func (p watchPrinter) doc(d watchJSON) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", b)
	return err
}
