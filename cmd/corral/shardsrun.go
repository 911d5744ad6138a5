package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/corral-go/corral/partition"
)

const shardsRunHelp = `Joins the partition at PATH as the member ID, one of K shards (package
partition), and runs CMD once for every shard the member is granted, each in
its own process with the shard in its environment:

  CORRAL_SHARD        the shard's number, 0 to K-1
  CORRAL_SHARD_TOKEN  its fencing token, which grows with every new owner of
                      the shard: storage can refuse a stale owner by it
  CORRAL_SHARDS       K
  CORRAL_MEMBER       ID

A shard's CMD gets SIGTERM, then SIGKILL after --grace, the moment the shard
must stop being worked (it was reassigned to another member, the connection or
the session was lost), and the shard passes on only once CMD has exited (or
--grace and 2 s more have passed). A CMD that exits 0 while its shard is still
the member's gives the shard back: it runs again after --retry-delay. A CMD that
exits otherwise stops the member: every other CMD is stopped, corral leaves
the partition and exits with that CMD's status. Interrupted (SIGINT, SIGTERM,
SIGHUP), corral stops every CMD, leaves, and exits 128+N. The CMDs read no
standard input, and share corral's standard output and error.`

// shardsKillWait is how long a shard is held after the SIGKILL of its
// CMD: the process is gone by then unless the kernel holds it.
const shardsKillWait = 2 * time.Second

func runShardsRun(ctx context.Context, e *env, args []string) error {
	fs, sf := newFlagSet(e, "shards run", "[flags] PATH K ID -- CMD [ARGS]", shardsRunHelp)
	grace := fs.Duration("grace", partition.DefaultGrace, "time between SIGTERM and SIGKILL when a shard must stop")
	retry := fs.Duration("retry-delay", partition.DefaultRetryDelay, "how long to wait before running CMD again for a shard whose CMD exited 0")
	pos, argv, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, 3, "PATH K ID"); err != nil {
		return err
	}
	if len(argv) == 0 {
		return fmt.Errorf("%w: no command after --", errUsage)
	}
	path, id := pos[0], pos[2]
	if err := checkDir(path); err != nil {
		return err
	}
	k, err := strconv.Atoi(pos[1])
	if err != nil || k < 1 || k > partition.MaxShards {
		return fmt.Errorf("%w: K %q: want a number of shards from 1 to %d", errUsage, pos[1], partition.MaxShards)
	}
	if *grace < 0 || *retry < 0 {
		return fmt.Errorf("%w: --grace and --retry-delay must not be negative", errUsage)
	}
	if err := lookCmd(argv[0]); err != nil {
		return err
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := partition.Join(ctx, st, path, k, id,
		partition.WithGrace(*grace+shardsKillWait), partition.WithRetryDelay(*retry))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "corral: joined %s as %q, %d shards\n", path, id, k)
	env := append(os.Environ(), "CORRAL_SHARDS="+strconv.Itoa(k), "CORRAL_MEMBER="+id)
	rerr := m.Run(ctx, func(sctx context.Context, s *partition.Shard) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.Env = append(env[:len(env):len(env)],
			"CORRAL_SHARD="+strconv.Itoa(s.ID()), "CORRAL_SHARD_TOKEN="+strconv.FormatInt(s.Token(), 10))
		status, err := superviseCmd(sctx, cmd, *grace)
		switch {
		case sctx.Err() != nil:
			return nil // stopped with its shard: the end of that work, not a failure
		case err != nil:
			return err // could not start
		case status != 0:
			return &exitError{code: status, status: true,
				err: fmt.Errorf("shard %d: the command exited with status %d; member %q stopped", s.ID(), status, id)}
		}
		return nil // gives the shard back
	})
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	lerr := m.Leave(lctx)
	var ex *exitError
	switch {
	case errors.As(rerr, &ex):
		return ex
	case rerr != nil:
		return fmt.Errorf("%w: member %q stopped: %v", errLost, id, rerr)
	case ctx.Err() != nil && lerr == nil:
		return &exitError{code: signalCode(ctx), err: fmt.Errorf("%v: commands stopped, member %q left", context.Cause(ctx), id)}
	}
	return lerr
}
