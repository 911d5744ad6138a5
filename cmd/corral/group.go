package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/store"
)

func init() {
	commands["group"] = command{summary: "the members of a group", run: runGroup, runner: groupRunner}
}

const groupHelp = `Lists the members of the group at PATH (package group, or a partition's
PATH/members), in the order they joined: token, value and node. Members of
Curator's GroupMember and kazoo's Party at PATH are listed too, first.

With --watch the list is printed again on every change (a member joined, left
or changed its value; a blank line between lists), until interrupted. With
--json each list is one JSON document on a line (see "corral help").

"corral group join" makes corral a member while a command runs: see
"corral group join --help".`

// groupRunner: "group join" runs a CMD.
func groupRunner(args []string) bool { return len(args) > 0 && args[0] == "join" }

func runGroup(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "join" {
		return runGroupJoin(ctx, e, args[1:])
	}
	fs, sf := newFlagSet(e, "group", "[flags] PATH\n       corral group join [flags] PATH VALUE -- CMD [ARGS]", groupHelp)
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
	sf.readOnly = true
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
		if err := printMembers(e.stdout, pos[0], ms, *asJSON, time.Now()); err != nil {
			return err
		}
		if !*watch {
			return nil
		}
	}
}

// groupJSON is the JSON document of one member list.
type groupJSON struct {
	Path    string              `json:"path"`
	Time    time.Time           `json:"time"`
	Members []inspect.Contender `json:"members"`
}

// memberJSON is a member as every --json shows a node (inspect.Contender):
// its name, its token as "seq", the mode "joined", its value as "data".
func memberJSON(m group.Member) inspect.Contender {
	return inspect.Contender{Name: store.Base(m.Path), Seq: m.Token, Mode: inspect.Joined, Data: m.Value}
}

func printMembers(w io.Writer, path string, ms []group.Member, asJSON bool, now time.Time) error {
	if asJSON {
		doc := groupJSON{Path: path, Time: now, Members: make([]inspect.Contender, len(ms))}
		for i, m := range ms {
			doc.Members[i] = memberJSON(m)
		}
		return writeJSON(w, doc)
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

const groupJoinHelp = `Joins the group at PATH with VALUE as the member's value (package group), runs
CMD while the membership lasts, then leaves, and exits with CMD's exit status,
as "corral lock" holds a lock. The member stays one through a lost connection
while the session lives (--lose-on-disconnect: stop CMD at once). If the
membership ends while CMD runs (the session expired, the node was deleted),
CMD gets SIGTERM, then SIGKILL after --grace, and corral exits with status 125.`

func runGroupJoin(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "group join", "[flags] PATH VALUE -- CMD [ARGS]", groupJoinHelp)
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when the membership ends")
	lose := fs.Bool("lose-on-disconnect", false, "end the membership, and stop CMD, when the connection is lost (default: only when the session ends)")
	pos, argv, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, 2, "PATH VALUE"); err != nil {
		return err
	}
	if len(argv) == 0 {
		return fmt.Errorf("%w: no command after --", errUsage)
	}
	if err := checkDir(pos[0]); err != nil {
		return err
	}
	if err := lookCmd(argv[0]); err != nil {
		return err
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	policy := group.KeepOnDisconnect
	if *lose {
		policy = group.LoseOnDisconnect
	}
	m, err := group.Join(ctx, st, pos[0], []byte(pos[1]), group.WithDisconnectPolicy(policy))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "corral: joined %s, token %d\n", pos[0], m.Token())
	return runHeld(ctx, m.Context(), *grace, argv, "membership", m.Leave)
}
