package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["shards"] = command{summary: "owner, token and age of every shard of a partition", run: runShards, runner: shardsRunner}
}

const shardsHelp = `Shows every shard of the partition at PATH (package partition): the member id
that owns it, its fencing token, how long it has been owned, from the grant
its owner recorded ("<=" the time since the owner's attempt began where the
owner, of an earlier corral, recorded none), and the member waiting to take
it over. The number of shards is the one the members agreed on, read from their
nodes: every shard from 0 to K-1 is shown, "-" where nobody owns it. With no
member there, --shards K says how many to show; a --shards that differs from
the members' is reported on standard error, and the members' is shown.

With --watch the table is printed again on every change (a blank line between
tables), until interrupted: corral watches the partition, it does not poll.
With --json each table is one JSON document on a line (see "corral help").

"corral shards run" works the shards of a partition with a command instead:
see "corral shards run --help".`

// shardJSON is one shard in corral shards --json.
type shardJSON struct {
	Shard   int                 `json:"shard"`
	Owner   *inspect.Contender  `json:"owner"`
	Waiters []inspect.Contender `json:"waiters"`
}

// shardsJSON is the document of corral shards --json.
type shardsJSON struct {
	Path string    `json:"path"`
	Time time.Time `json:"time"`
	// Count is the number of shards, the members' (0: no member, and no
	// --shards).
	Count   int                 `json:"shard_count"`
	Members []inspect.Contender `json:"members"`
	Shards  []shardJSON         `json:"shards"`
}

// shardsRunner: "shards run" runs a CMD.
func shardsRunner(args []string) bool { return len(args) > 0 && args[0] == "run" }

func runShards(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "run" {
		return runShardsRun(ctx, e, args[1:])
	}
	fs, sf := newFlagSet(e, "shards", "[flags] PATH\n       corral shards run [flags] PATH K ID -- CMD [ARGS]", shardsHelp)
	k := fs.Int("shards", 0, "the number of shards when no member is there, to show unowned ones too")
	watch := fs.Bool("watch", false, "print again on every change, until interrupted")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, 1, "PATH"); err != nil {
		return err
	}
	if err := checkDir(pos[0]); err != nil {
		return err
	}
	if *k < 0 || *k > partition.MaxShards {
		return fmt.Errorf("%w: --shards %d: want 0 to %d", errUsage, *k, partition.MaxShards)
	}
	sf.readOnly = true
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	sp := shardsPrinter{w: e.stdout, warn: e.stderr, path: pos[0], k: *k, json: *asJSON}
	if !*watch {
		var reps []inspect.Report
		err := inspect.Walk(ctx, st, pos[0], func(r inspect.Report) error { reps = append(reps, r); return nil })
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			return err
		}
		return sp.print(reps, time.Now())
	}
	w := inspect.Watch(ctx, st, pos[0])
	defer w.Close()
	for reps := range w.Reports() {
		if err := sp.print(reps, time.Now()); err != nil {
			return err
		}
	}
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx)
	case st.Context().Err() != nil:
		return fmt.Errorf("%w: %v", errUnreachable, context.Cause(st.Context()))
	}
	return w.Err()
}

// shardsPrinter prints the shards of the partition at path, from the
// reports of a walk of it.
type shardsPrinter struct {
	w, warn io.Writer
	path    string
	k       int  // --shards
	json    bool //
	shown   bool // a table was printed before
	warned  int  // the members' K a warning was given for
}

func (p *shardsPrinter) print(reps []inspect.Report, now time.Time) error {
	doc := p.read(reps, now)
	if p.k > 0 && doc.Count != p.k && len(doc.Members) > 0 && p.warned != doc.Count {
		p.warned = doc.Count
		fmt.Fprintf(p.warn, "corral shards: warning: --shards %d, but the members of %s have %d shards: showing %d\n", p.k, p.path, doc.Count, doc.Count)
	}
	if p.json {
		return writeJSON(p.w, doc)
	}
	if p.shown {
		fmt.Fprintln(p.w)
	}
	p.shown = true
	return printShards(p.w, doc, now)
}

// read reads the document of the partition from the reports of a walk of
// its path: its members, whose node names carry the number of shards they
// agreed on, and its shards' lock directories.
func (p *shardsPrinter) read(reps []inspect.Report, now time.Time) shardsJSON {
	doc := shardsJSON{Path: p.path, Time: now, Members: []inspect.Contender{}, Shards: []shardJSON{}}
	members, shards := partition.MembersDir(p.path), partition.ShardsDir(p.path)+"/"
	byID := map[int]inspect.Report{}
	for _, r := range reps {
		if r.Path == members {
			doc.Members = append(doc.Members, r.Holders...)
			continue
		}
		rest, ok := strings.CutPrefix(r.Path, shards)
		if i, err := strconv.Atoi(rest); ok && err == nil && i >= 0 && strconv.Itoa(i) == rest {
			byID[i] = r
		}
	}
	for _, m := range doc.Members {
		// The oldest member's: those after it agreed with it.
		if k, ok := names.SettingOf(m.Name, names.Partition, 'k'); ok {
			doc.Count = k
			break
		}
	}
	if doc.Count == 0 {
		doc.Count = p.k
	}
	ids := make([]int, 0, doc.Count+len(byID))
	for i := range doc.Count {
		ids = append(ids, i)
	}
	for i := range byID {
		if i >= doc.Count {
			ids = append(ids, i) // left by members of another K, say
		}
	}
	slices.Sort(ids)
	for _, i := range ids {
		r := byID[i]
		s := shardJSON{Shard: i, Waiters: r.Waiters}
		if len(r.Holders) > 0 {
			s.Owner = &r.Holders[0]
		}
		if s.Waiters == nil {
			s.Waiters = []inspect.Contender{}
		}
		doc.Shards = append(doc.Shards, s)
	}
	return doc
}

func printShards(w io.Writer, doc shardsJSON, now time.Time) error {
	if len(doc.Shards) == 0 {
		_, err := fmt.Fprintf(w, "no shards under %s\n", doc.Path)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tOWNER\tTOKEN\tSESSION\tFOR\tNEXT")
	for _, s := range doc.Shards {
		next := "-"
		if len(s.Waiters) > 0 {
			next = memberID(s.Waiters[0])
		}
		if s.Owner == nil {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t%s\n", s.Shard, next)
			continue
		}
		o := *s.Owner
		_, held := waitedHeld(o, true, now)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", s.Shard, memberID(o), o.Seq, session(o.Session), held, next)
	}
	return tw.Flush()
}

// memberID shows the member id of a shard's contender: its identity
// record's label, or its data (a corral that wrote the id alone).
func memberID(c inspect.Contender) string {
	if c.Identity != nil && c.Identity.Label != "" {
		return printable([]byte(c.Identity.Label))
	}
	return who(c.Identity, c.Data)
}
