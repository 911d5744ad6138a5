package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["locks"] = command{summary: "show who holds and who waits under PATH", run: runLocks}
}

const locksHelp = `Shows every lock, semaphore, election, double barrier, queue and group at or below
PATH (default /): who holds it and who waits, in order, with the fencing token,
the owner session, how long each waited and has held, and who it is (host, pid
and label from the identity record corral's nodes carry; another client's data
as it is). Queues show their depth by priority and their claimed items. A
partition's shards are locks ("PATH/shards/N", the owner holds, the next owner
waits) and its members a group ("PATH/members"); "corral shards" shows them
per shard.

No store records when a hold began, only when its attempt did: a holder's HELD
is "<=" the time since its attempt began, and WAITED "?", unless --watch saw it
granted (then both are known, to within one read).

With --watch the table is printed again on every change: corral sets a watch
on every directory it lists and reads again when one fires (at most every
100ms), so it never polls the store. On a terminal the screen is redrawn, and
the ages tick every second from the last read.

With --json the output is one JSON document per snapshot, one per line with
--watch: {"path","time","recipes":[...]}, a recipe being {"path","kind","limit",
"holders":[...],"waiters":[...],"queue","time"} and its holders and waiters
nodes as every --json shows them (see "corral help"): session ids (etcd lease
ids) as the table's hexadecimal strings, never numbers (they do not fit a
float64); data as text when it is UTF-8, else base64 under "data_base64".`

func runLocks(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "locks", "[flags] [PATH]", locksHelp)
	watch := fs.Bool("watch", false, "print again on every change, until interrupted")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	root := "/"
	switch len(pos) {
	case 0:
	case 1:
		root = pos[0]
	default:
		return wantArgs(pos, 1, "at most one PATH")
	}
	if err := checkPath(root); err != nil {
		return err
	}
	sf.readOnly = true
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	out := locksPrinter{w: e.stdout, root: root, json: *asJSON}
	if !*watch {
		var reps []inspect.Report
		err := inspect.Walk(ctx, st, root, func(r inspect.Report) error { reps = append(reps, r); return nil })
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			return err
		}
		return out.print(reps, time.Now())
	}
	return watchLocks(ctx, st, out, isTerminal(e.stdout))
}

func watchLocks(ctx context.Context, st store.Store, out locksPrinter, tty bool) error {
	w := inspect.Watch(ctx, st, out.root)
	defer w.Close()
	out.clear = tty && !out.json
	var (
		last []inspect.Report
		tick <-chan time.Time
	)
	if out.clear {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case reps, ok := <-w.Reports():
			if !ok {
				if ctx.Err() != nil {
					return interrupted(ctx)
				}
				if st.Context().Err() != nil {
					return fmt.Errorf("%w: %v", errUnreachable, context.Cause(st.Context()))
				}
				return w.Err()
			}
			last = reps
			if err := out.print(reps, time.Now()); err != nil {
				return err
			}
		case now := <-tick:
			if last != nil {
				if err := out.print(last, now); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return interrupted(ctx)
		}
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

type locksPrinter struct {
	w     io.Writer
	root  string
	json  bool
	clear bool // redraw the screen
	shown bool // a table was printed before
}

// locksJSON is the JSON document of one snapshot.
type locksJSON struct {
	Path    string           `json:"path"`
	Time    time.Time        `json:"time"`
	Recipes []inspect.Report `json:"recipes"`
}

func (p *locksPrinter) print(reps []inspect.Report, now time.Time) error {
	if reps == nil {
		reps = []inspect.Report{}
	}
	if p.json {
		b, err := json.Marshal(locksJSON{Path: p.root, Time: now, Recipes: reps})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	switch {
	case p.clear:
		fmt.Fprint(p.w, "\x1b[H\x1b[2J")
		fmt.Fprintf(p.w, "corral locks %s  %s\n\n", p.root, now.Format(time.TimeOnly))
	case p.shown:
		fmt.Fprintln(p.w)
	}
	p.shown = true
	if len(reps) == 0 {
		_, err := fmt.Fprintf(p.w, "nothing held or awaited under %s\n", p.root)
		return err
	}
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tKIND\tROLE\tMODE\tTOKEN\tSESSION\tWAITED\tHELD\tWHO")
	for _, r := range reps {
		kind := r.Kind.String()
		if r.Limit > 0 {
			kind += "(" + strconv.Itoa(r.Limit) + ")"
		}
		if r.Queue != nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", r.Path, kind, queueSummary(r.Queue))
			for _, c := range r.Queue.Claims {
				fmt.Fprintf(tw, "%s\t%s\tclaim\tprio %d\t-\t%s\t-\t%s\t%s (%s)\n", r.Path, kind, c.Priority,
					session(c.Session), age(c.Since, now), who(c.Identity, c.Data), c.Item)
			}
			continue
		}
		role, waitRole := "holder", "waiter"
		if r.Kind == inspect.Election {
			role, waitRole = "leader", "candidate"
		}
		if r.Kind == inspect.DoubleBarrier {
			role, waitRole = "inside", "entering"
		}
		if r.Kind == inspect.Group {
			role = "member"
		}
		if len(r.Holders)+len(r.Waiters) == 0 {
			// A recipe with nobody in it (a double barrier whose
			// members all left, say) is in the JSON too.
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\tnobody\n", r.Path, kind)
			continue
		}
		for _, c := range r.Holders {
			row(tw, r, kind, role, c, true, now)
		}
		for _, c := range r.Waiters {
			row(tw, r, kind, waitRole, c, false, now)
		}
	}
	return tw.Flush()
}

func row(w io.Writer, r inspect.Report, kind, role string, c inspect.Contender, holds bool, now time.Time) {
	waited, held := waitedHeld(c, holds, now)
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Path, kind, role, c.Mode, c.Seq,
		session(c.Session), waited, held, who(c.Identity, c.Data))
}

// waitedHeld shows how long a contender waited and has held. A waiter has
// waited since its attempt began. When a holder was granted is known only
// to --watch, which saw it; otherwise it has held for at most the time
// since its attempt began.
func waitedHeld(c inspect.Contender, holds bool, now time.Time) (waited, held string) {
	switch {
	case !holds:
		return age(c.Since, now), "-"
	case !c.Granted.IsZero() && c.Since.IsZero():
		return "?", age(c.Granted, now)
	case !c.Granted.IsZero():
		return age(c.Since, c.Granted), age(c.Granted, now)
	case c.Since.IsZero():
		return "?", "?"
	}
	return "?", "<=" + age(c.Since, now)
}

func queueSummary(q *inspect.QueueState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d items, %d claimed", q.Items, q.Claimed)
	for i, l := range q.Levels {
		if i == 0 {
			b.WriteString(":")
		} else {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " prio %d: %d", l.Priority, l.Items)
		if l.Claimed > 0 {
			fmt.Fprintf(&b, " (%d claimed)", l.Claimed)
		}
	}
	return b.String()
}

func session(id int64) string {
	if id == 0 {
		return "-"
	}
	return inspect.SessionString(id)
}

// age shows how long ago since was, "?" when unknown.
func age(since, now time.Time) string {
	if since.IsZero() {
		return "?"
	}
	d := max(now.Sub(since), 0)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// who shows the identity record, else the data as printable text.
func who(id *inspect.Identity, data []byte) string {
	switch {
	case id != nil:
		return id.String()
	case len(data) == 0:
		return "-"
	}
	return printable(data)
}
