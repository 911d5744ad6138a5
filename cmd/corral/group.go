package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["group"] = command{summary: "the members of a group", run: runGroup}
}

const groupHelp = `Lists the members of the group at PATH (package group, or a partition's
PATH/members), in the order they joined: token, value and node. Members of
Curator's GroupMember and kazoo's Party at PATH are listed too.

With --watch the list is printed again on every change (a blank line between
lists), until interrupted. With --json each list is one JSON document
({"path","members"}) on a line.`

func runGroup(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "group", "[flags] PATH", groupHelp)
	watch := fs.Bool("watch", false, "print again on every change, until interrupted")
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
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	w := group.Watch(ctx, st, pos[0])
	defer w.Close()
	for n := 0; ; n++ {
		ms, ok := <-w.Members()
		switch {
		case !ok && ctx.Err() != nil:
			return interrupted(ctx)
		case !ok && st.Context().Err() != nil:
			return fmt.Errorf("%w: %v", errUnreachable, context.Cause(st.Context()))
		case !ok:
			return w.Err()
		}
		if *watch && n > 0 && !*asJSON {
			fmt.Fprintln(e.stdout)
		}
		if err := printMembers(e.stdout, pos[0], ms, *asJSON); err != nil {
			return err
		}
		if !*watch {
			return nil
		}
	}
}

// groupJSON is the JSON document of one member list.
type groupJSON struct {
	Path    string         `json:"path"`
	Members []group.Member `json:"members"`
}

func printMembers(w io.Writer, path string, ms []group.Member, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(groupJSON{Path: path, Members: ms})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if len(ms) == 0 {
		_, err := fmt.Fprintf(w, "no members in %s\n", path)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOKEN\tVALUE\tNODE")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Token, printable(m.Value), store.Base(m.Path))
	}
	return tw.Flush()
}
