// Package curator runs Apache Curator's recipes (the real ones, Java) beside
// corral's: its DistributedQueue for the queue's benchmarks ([Queue]), and
// its GroupMember for the group's interoperability test ([Group]). It
// compiles a small program of this package's own (CuratorQueue.java,
// CuratorGroup.java) against Debian's Curator jars into a temporary
// directory, starts it in a JVM of its own connected to a ZooKeeper
// server, and drives it one command at a time.
//
// It needs java and javac (a JDK, such as Debian's default-jdk-headless) and
// the package libcurator-recipes-java, which brings Curator's framework and
// client, Guava and SLF4J; the jars' Class-Path names what they need.
// [Available] says what is missing; benchmarks skip with that message, and
// the project's test command never needs any of it.
//
// It is test-only, like every package under internal/testing: _test.go
// files import it; code that ships never does (test.sh checks).
package curator

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral-go/corral/internal/testing/lineproc"
)

//go:embed CuratorQueue.java
var queueSource []byte

//go:embed CuratorGroup.java
var groupSource []byte

// Jars are the class path the program is compiled and run with: Curator's
// recipes (whose manifest brings Curator's framework and client, ZooKeeper's
// client and Guava) and SLF4J's no-op binding, so that the JVM logs nothing.
var Jars = []string{
	"/usr/share/java/curator-recipes.jar",
	"/usr/share/java/curator-framework.jar",
	"/usr/share/java/slf4j-nop.jar",
}

// Available returns nil when the program can be compiled and run here, and
// otherwise an error that says what is missing.
func Available() error {
	for _, tool := range []string{"javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("curator: %s not found (apt-get install -y default-jdk-headless): %w", tool, err)
		}
	}
	for _, jar := range Jars {
		if _, err := os.Stat(jar); err != nil {
			return fmt.Errorf("curator: Curator not installed (apt-get install -y libcurator-recipes-java libslf4j-java): %w", err)
		}
	}
	return nil
}

// Queue is the DistributedQueue program, running: a Curator client with
// its own session. Its methods must not be called concurrently (one
// command at a time).
type Queue struct{ *lineproc.Proc }

// Start compiles the queue program into dir (a temporary directory of the
// caller's, such as testing.TB.TempDir) and starts it, connected to the
// ZooKeeper server at addr ("host:port"). It returns once the client has
// its session. Close stops it; the JVM also dies with this process.
func Start(ctx context.Context, dir, addr string) (*Queue, error) {
	p, err := start(ctx, dir, addr, "CuratorQueue", queueSource)
	if err != nil {
		return nil, err
	}
	return &Queue{p}, nil
}

// start compiles the program class, whose source is source, into dir and
// starts it, connected to addr; it returns once the client has its
// session.
func start(ctx context.Context, dir, addr, class string, source []byte) (*lineproc.Proc, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	src := filepath.Join(dir, class+".java")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return nil, err
	}
	cp := strings.Join(Jars, ":")
	if out, err := exec.CommandContext(ctx, "javac", "-nowarn", "-cp", cp, "-d", dir, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("curator: javac: %w\n%s", err, out)
	}
	return lineproc.Start(ctx, "curator", exec.Command("java", "-Xmx512m", "-cp", dir+":"+cp, class, addr))
}

// Put puts items into the queue at path from producers threads, with
// Curator's DistributedQueue.put, in the background (Curator's default) or,
// with foreground set, each put returning once its item is stored, then
// waits for them with flushPuts. It returns the time from the first put to
// the flush's return, the most puts in flight at once, and their mean in
// flight over that time.
func (q *Queue) Put(ctx context.Context, path string, producers, items int, foreground bool) (took time.Duration, peak int, mean float64, err error) {
	mode := "bg"
	if foreground {
		mode = "fg"
	}
	f, err := do(ctx, q.Proc, fmt.Sprintf("put %s %d %d %s", path, producers, items, mode), 4)
	if err != nil {
		return 0, 0, 0, err
	}
	took = time.Duration(f[1])
	return took, int(f[2]), float64(f[3]) / float64(took), nil
}

// Drain starts a consumer of Curator's on the queue at path and returns
// once it consumed items, with the time from its start (its first listing
// included) to the last item.
func (q *Queue) Drain(ctx context.Context, path string, items int) (time.Duration, error) {
	f, err := do(ctx, q.Proc, fmt.Sprintf("drain %s %d", path, items), 2)
	if err != nil {
		return 0, err
	}
	return time.Duration(f[1]), nil
}

// do sends a command and returns the n numbers of its answer.
func do(ctx context.Context, p *lineproc.Proc, command string, n int) ([]int64, error) {
	line, err := p.Send(ctx, command)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(line)
	if len(f) != n {
		return nil, fmt.Errorf("curator: %s: answer %q", command, line)
	}
	out := make([]int64, n)
	for i, s := range f {
		if out[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("curator: %s: answer %q: %w", command, line, err)
		}
	}
	return out, nil
}
