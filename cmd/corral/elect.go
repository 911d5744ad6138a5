package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/inspect"
)

func init() {
	commands["elect"] = command{summary: "run a command only while leader", run: runElect, runner: runsCmd}
	commands["leader"] = command{summary: "print the current leader", run: runLeader}
}

func runElect(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "elect", "[flags] PATH -- CMD [ARGS]",
		"Campaigns at PATH and runs CMD once elected, for as long as the leadership lasts.\n"+
			"If leadership is lost while CMD runs, CMD gets SIGTERM, then SIGKILL after --grace,\n"+
			"and corral exits with status 125. When CMD exits, corral resigns and exits with its status.")
	value := fs.String("value", "", "the value to proclaim while leader (an identity or address; default: corral's identity record, host and pid)")
	timeout := fs.Duration("timeout", 0, "give up campaigning after this long (exit 124); 0 waits forever")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when leadership is lost")
	keep := fs.Bool("keep-on-disconnect", false, "stay leader through a lost connection until the session expires (default: stop CMD at once)")
	path, argv, err := parsePathCmd(fs, args)
	if err != nil {
		return err
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	policy := election.LoseOnDisconnect
	if *keep {
		policy = election.KeepOnDisconnect
	}
	el := election.New(st, path, election.WithDisconnectPolicy(policy))
	actx := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	v := []byte(*value)
	if *value == "" {
		v = inspect.IdentityRecord("")
	}
	lead, err := el.Campaign(actx, v)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "corral: elected, term %d\n", lead.Token())
	return runHeld(ctx, lead.Context(), *grace, argv, "leadership", lead.Resign)
}

func runLeader(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "leader", "[flags] PATH",
		"Prints the value and term of the current leader at PATH (\"no leader\" when there\n"+
			"is none). With --watch, prints every change until interrupted.")
	watch := fs.Bool("watch", false, "follow leadership changes")
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
	sf.readOnly = true
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	el := election.New(st, pos[0])
	if !*watch {
		l, err := el.Leader(ctx)
		if err != nil && !errors.Is(err, election.ErrNoLeader) {
			return err
		}
		fmt.Fprintln(e.stdout, describe(l))
		return nil
	}
	obs := el.Observe(ctx)
	for l := range obs.Leaders() {
		fmt.Fprintln(e.stdout, describe(l))
	}
	if ctx.Err() != nil {
		return interrupted(ctx) // the normal end of --watch
	}
	if st.Context().Err() != nil {
		return fmt.Errorf("%w: %v", errUnreachable, context.Cause(st.Context()))
	}
	return obs.Err()
}

func describe(l election.Leader) string {
	if l.IsZero() {
		return "no leader"
	}
	return fmt.Sprintf("%s\tterm=%d", l.Value, l.Token)
}
