// Command corral runs commands under distributed locks and leadership, and
// inspects and drives corral's primitives on ZooKeeper or etcd. Its demo runs
// every primitive in-process with nothing installed.
//
// Run "corral help" for the commands, the store URLs and the exit codes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Exit codes, documented in "corral help". The commands that run CMD
// (lock, elect, barrier enter) pass CMD's status through and keep 124 to
// 127 for their own outcomes, as timeout(1) does (see runnerCode).
const (
	exitOK          = 0
	exitFailure     = 1 // an operation failed
	exitUsage       = 2 // bad command line
	exitTimeout     = 3 // --timeout passed before the lock/barrier/item came
	exitLost        = 4 // the lock or leadership was lost while the command ran
	exitUnreachable = 5 // the store could not be reached, or the session ended
	exitDenied      = 6 // the store refused the credentials, or the permission
	exitInterrupted = 130

	exitRunTimeout = 124 // CMD runners: --timeout passed before the lock, leadership or barrier came
	exitRunFailed  = 125 // CMD runners: corral itself failed (the message says how)
	exitCannotRun  = 126 // CMD cannot be run
	exitNotFound   = 127 // CMD was not found
	exitSignalled  = 128 // + the signal's number: corral was stopped by it
)

const usage = `corral: distributed locks, leader election, barriers, queues, groups, shards, shared values and counters on ZooKeeper or etcd.

Usage:
  corral demo                               run every primitive in-process (no server needed)
  corral lock [flags] PATH -- CMD [ARGS]    run CMD while holding the lock at PATH
  corral elect [flags] PATH -- CMD [ARGS]   run CMD only while leader at PATH
  corral leader [flags] PATH                print the current leader at PATH
  corral barrier set|remove|wait PATH       a barrier
  corral barrier enter N PATH -- CMD        a double barrier of N around CMD
  corral queue ACTION [flags] PATH          put, take, consume, peek or len
  corral locks [flags] [PATH]               who holds and who waits, at or below PATH
  corral group [--watch] PATH               the members of a group, in the order they joined
  corral group join PATH VALUE -- CMD       run CMD while a member of the group at PATH
  corral shards [--watch] PATH              owner, token and age of every shard of a partition
  corral shards run PATH K ID -- CMD        work the shards granted to member ID with CMD
  corral value get|set|watch PATH           a shared value: read, set (--version N: if unchanged), follow
  corral counter add|get PATH [DELTA]       a shared counter: add to it, read it
  corral ls [flags] PATH                    list what is stored under PATH
  corral watch [--tree] [--json] PATH       print a node, or a subtree, as it changes
  corral help                               this text

"corral COMMAND --help" describes each command's flags.

Stores (--store, or the environment variable CORRAL_STORE):
  zk://[USER@]HOST:PORT[,HOST:PORT...][/CHROOT][?session=10s&tls=true]
                        ZooKeeper servers; session timeout; the subtree to work in
  etcd://[USER@]HOST:PORT[,HOST:PORT...][/CHROOT][?session=10s&tls=true]
                        etcd endpoints; lease TTL; every key below /CHROOT/
  mem://                in-process memory (for trying things)

Credentials and TLS (flags of every command that talks to a store):
  --user NAME           etcd user, or ZooKeeper digest user ($CORRAL_USER, or USER@ in the URL)
  --password-file FILE  its password, from FILE ($CORRAL_PASSWORD_FILE); else $CORRAL_PASSWORD;
                        else a prompt on the terminal. A password in the URL or in --user is refused.
  --cacert FILE         CA bundle to verify the servers by; talks TLS ($CORRAL_CACERT)
  --cert FILE --key FILE  client certificate and key ($CORRAL_CERT, $CORRAL_KEY)
  ?tls=true             TLS with the system's CAs, when there is no --cacert
  --require-identity    ZooKeeper: refuse a session that holds no identity (no --user, and no
                        --cert the server authenticated), exit 6, instead of warning on standard
                        error that the nodes it creates are open to everyone ($CORRAL_REQUIRE_IDENTITY)

JSON (--json of locks, group and shards; queue's --format json): one document
per line, every one {"path","time",...} with the command's own list:
"recipes" (locks), "members" (group), "shards" with "shard_count" and
"members" (shards). Every node in them is one object with the same fields:
  name          the node's name
  seq           its Seq: the fencing token of a holder or member
  mode          exclusive, read, write, lease, candidate, member or joined
  session       the owner session (an etcd lease id) in hexadecimal, as text
  identity      corral's identity record: {"host","pid","start","label"}
  data          the node's data (a member's value) as text when it is UTF-8;
  data_base64   otherwise, instead of data, its bytes in standard base64
  since         when its attempt began, where known (RFC 3339)
  granted       when it was granted, where known (RFC 3339)
A field with nothing to say is left out. queue items are {"id","priority",
"deliveries","data" or "data_base64"}.

Exit codes of lock, elect, barrier enter, group join and shards run, which run
CMD (as timeout(1)):
  CMD's own exit status, passed through (128+N when a signal N ended CMD)
  124  --timeout passed before the lock, leadership or barrier came
  125  corral failed: bad command line, store unreachable or refusing, the lock,
       leadership or membership lost while CMD ran (CMD was stopped), the
       release refused
  126  CMD cannot be run
  127  CMD was not found (looked up before the lock is taken)

Exit codes of the other commands:
  0    success
  1    an operation failed
  2    bad command line
  3    --timeout passed before the barrier or item came; peek of an empty queue;
       value get of a value never set
  5    the store could not be reached, or the session ended
  6    the store refused the credentials, the certificate or the permission;
       a ZooKeeper session without identity under --require-identity

Signals, for every command: SIGINT, SIGTERM and SIGHUP stop CMD (SIGTERM, then
SIGKILL after --grace), remove the nodes corral created, and exit 128+N:
130 (SIGINT, Ctrl-C), 143 (SIGTERM), 129 (SIGHUP: a closed terminal or ssh
session). The message on standard error says what failed, whatever the code.
`

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) error
	// runner reports whether the command line args runs a CMD, and so
	// exits with runnerCode.
	runner func(args []string) bool
}

var commands = map[string]command{}

// env is what a command needs from the outside world.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

func main() {
	ctx, stop := notifyContext()
	code := run(ctx, &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// signalled is the cause of the context of a corral stopped by a signal.
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string {
	switch s.sig {
	case syscall.SIGINT:
		return "interrupted (SIGINT)"
	case syscall.SIGTERM:
		return "terminated (SIGTERM)"
	case syscall.SIGHUP:
		return "hung up (SIGHUP)"
	}
	return s.sig.String()
}

// notifyContext returns a context cancelled, with a signalled cause, by
// the first SIGINT, SIGTERM or SIGHUP. A SIGHUP (the terminal or the ssh
// session closed) must stop corral as a SIGTERM does, releasing what it
// holds, rather than kill it with its nodes left behind. stop stops
// catching them.
func notifyContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case s := <-ch:
			cancel(signalled{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		<-ended
		cancel(nil)
	}
}

// signalCode is the exit code of a corral whose ctx ended: 128 + the
// number of the signal that ended it.
func signalCode(ctx context.Context) int {
	var s signalled
	if errors.As(context.Cause(ctx), &s) {
		return exitSignalled + int(s.sig)
	}
	return exitInterrupted
}

// interrupted ends a command that runs until a signal stops it (consume,
// leader --watch, locks --watch, watch): exit 128+N, nothing more to say.
func interrupted(ctx context.Context) error {
	return &exitError{code: signalCode(ctx)}
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(e.stdout, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(e.stderr, "corral: unknown command %q (commands: %s; see corral help)\n", args[0], strings.Join(names, ", "))
		return exitUsage
	}
	err := c.run(ctx, e, args[1:])
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	code, status := exitCode(ctx, err), false
	var ex *exitError
	if errors.As(err, &ex) {
		code, status = ex.code, ex.status
		err = ex.err
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "corral %s: %v\n", args[0], err)
	}
	if c.runner != nil && c.runner(args[1:]) {
		return runnerCode(code, status)
	}
	return code
}

// runnerCode is the exit code of a command that runs CMD, given the code
// other commands would exit with: CMD's own status as it is, and corral's
// own outcomes kept apart from it, as timeout(1) keeps them (124 timed
// out, 125 failed, 126 cannot run, 127 not found), so that a CMD exiting
// 1 to 6 is never taken for corral's failure. A signal keeps its 128+N.
func runnerCode(code int, status bool) int {
	switch {
	case status, code == exitOK, code >= exitCannotRun:
		return code
	case code == exitTimeout:
		return exitRunTimeout
	}
	return exitRunFailed
}

// exitError carries an exit code chosen by a command, such as the exit
// status of the command it ran.
type exitError struct {
	code   int
	err    error // printed if non-nil
	status bool  // code is the exit status of the command corral ran
}

func (e *exitError) Error() string { return fmt.Sprintf("exit %d: %v", e.code, e.err) }

// exitCode maps an error to the documented exit codes.
func exitCode(ctx context.Context, err error) int {
	switch {
	case errors.Is(err, errUsage), errors.Is(err, store.ErrInvalidPath):
		// A path the library refuses (the root, for a recipe that
		// needs a directory of its own) is a bad command line too.
		return exitUsage
	case ctx.Err() != nil:
		return signalCode(ctx)
	case errors.Is(err, errLost):
		return exitLost
	case errors.Is(err, store.ErrAuth), errors.Is(err, store.ErrPermission):
		return exitDenied
	case errors.Is(err, context.DeadlineExceeded):
		return exitTimeout
	case errors.Is(err, store.ErrSessionExpired), errors.Is(err, store.ErrDisconnected), errors.Is(err, errUnreachable):
		return exitUnreachable
	}
	return exitFailure
}

var errUnreachable = errors.New("store unreachable")

// storeFlags are the flags every command that talks to a store has.
type storeFlags struct {
	url     string
	connect time.Duration
	secure  secureFlags
	e       *env
	// readOnly: the command creates no node, so a ZooKeeper session's
	// lack of identity (its nodes open to everyone) is not worth a
	// warning. --require-identity still refuses such a session.
	readOnly bool
}

func newFlagSet(e *env, name, args, help string) (*flag.FlagSet, *storeFlags) {
	fs := flag.NewFlagSet("corral "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	sf := &storeFlags{e: e}
	fs.StringVar(&sf.url, "store", e.getenv("CORRAL_STORE"), "store `URL`: zk://host:port[,...][/chroot], etcd://host:port[,...][/chroot] or mem:// (default $CORRAL_STORE)")
	fs.DurationVar(&sf.connect, "connect-timeout", 10*time.Second, "how long to try to reach the store")
	sf.secure.register(fs, e.getenv)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: corral %s %s\n\n%s\n\nFlags:\n", name, args, help)
		fs.PrintDefaults()
	}
	return fs, sf
}

// parse parses args; flags may come before or between the positional
// arguments, and everything after "--" is returned apart as the command.
func parse(fs *flag.FlagSet, args []string) (pos, argv []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, argv = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, argv, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// openStore opens a session, giving up after --connect-timeout.
func (sf *storeFlags) open(ctx context.Context) (store.Store, error) {
	su, err := parseStoreURL(sf.url)
	if err != nil {
		return nil, err
	}
	creds, err := sf.secure.resolve(sf.e, su.user, su.tls)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, sf.connect)
	defer cancel()
	warn := sf.e.stderr
	if sf.readOnly {
		warn = io.Discard
	}
	st, err := su.open(cctx, creds, warn)
	switch {
	case err == nil:
		return st, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, errUsage), errors.Is(err, store.ErrAuth), errors.Is(err, store.ErrPermission), errors.Is(err, store.ErrInvalidArgument):
		return nil, fmt.Errorf("%s: %w", sf.url, err)
	}
	return nil, fmt.Errorf("%w: %s: %v", errUnreachable, sf.url, err)
}

// parsePathCmd parses the "[flags] PATH -- CMD [ARGS]" of lock and elect.
func parsePathCmd(fs *flag.FlagSet, args []string) (string, []string, error) {
	pos, argv, err := parse(fs, args)
	if err != nil {
		return "", nil, err
	}
	if err := wantArgs(pos, 1, "PATH"); err != nil {
		return "", nil, err
	}
	if len(argv) == 0 {
		return "", nil, fmt.Errorf("%w: no command after --", errUsage)
	}
	if err := checkPath(pos[0]); err != nil {
		return "", nil, err
	}
	return pos[0], argv, lookCmd(argv[0])
}

// lookCmd looks the command up before anything is held: a command that
// cannot run must not take the lock, even briefly. As shells do, it
// fails with 127 when the command is not found, 126 when it cannot be run.
func lookCmd(name string) error {
	_, err := exec.LookPath(name)
	if err == nil {
		return nil
	}
	code := exitCannotRun
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		code = exitNotFound
	}
	return &exitError{code: code, err: fmt.Errorf("command %s: %w", name, err)}
}

func checkPath(p string) error {
	if err := store.ValidatePath(p); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// checkDir is checkPath for the path of a recipe, which must be a directory
// of its own: not the root, with room for the names below it.
func checkDir(p string) error {
	if err := recipe.ValidateDir(p); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// writeJSON writes v as one JSON document on a line: what every --json
// prints (see "JSON" in corral help).
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func wantArgs(pos []string, n int, what string) error {
	if len(pos) != n {
		return fmt.Errorf("%w: want %s, got %d argument(s): %q", errUsage, what, len(pos), pos)
	}
	return nil
}
