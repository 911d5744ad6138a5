package shared_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/curator"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/shared"
)

// TestInteropCounter: a Counter shares one counter on ZooKeeper with
// Curator's DistributedAtomicLong (in a Java process) and with kazoo's
// Counter (in a Python process, in its own text encoding and in its
// support_curator one), each adding at the same time as the Counter: the
// counter ends at exactly the sum, in the encoding the other client
// reads. It needs Debian's libcurator-recipes-java and a JDK (see
// internal/testing/curator), and python3-kazoo; a machine without them
// skips that client.
func TestInteropCounter(t *testing.T) {
	if !backends.Selected("zk") {
		t.Skip("zk not in CORRAL_STORES")
	}
	if testing.Short() {
		t.Skip("starts Java and Python processes")
	}
	b := backends.Get(t, "zk").(*zkbackend.Backend)
	connect := strings.Join(b.Servers(), ",")
	const adds = 30
	for _, tt := range []struct {
		name string
		// start makes the node as the other client does, by one add of
		// 1, and returns the command that adds 2, adds times.
		start  func(t *testing.T, path string) func(ctx context.Context) *exec.Cmd
		encode func(v int64) []byte
	}{
		{"curator", curatorCounter(connect), func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }},
		{"kazoo", kazooCounter(connect, ""), func(v int64) []byte { return []byte(strconv.FormatInt(v, 10)) }},
		{"kazoo-curator", kazooCounter(connect, "curator"), func(v int64) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxFor(t)
			st := b.Open(t)
			t.Cleanup(func() { _ = st.Close() })
			p := fmt.Sprintf("/shared/interop-%s-%d", tt.name, time.Now().UnixNano())
			cmd := tt.start(t, p)
			c := shared.NewCounter(st, p)
			if v, err := c.Get(ctx); err != nil || v != 1 {
				t.Fatalf("Get of the counter %s made = %d, %v; want 1", tt.name, v, err)
			}
			var wg gosync.WaitGroup
			var out []byte
			var perr error
			wg.Go(func() { out, perr = cmd(ctx).Output() })
			for range adds {
				if _, err := c.Add(ctx, 1); err != nil {
					t.Fatalf("Add = %v", err)
				}
			}
			wg.Wait()
			if perr != nil {
				t.Fatalf("%s process: %v (%s)", tt.name, perr, stderrOf(perr))
			}
			want := int64(1 + adds + 2*adds)
			if v, err := c.Get(ctx); err != nil || v != want {
				t.Errorf("Get after both added = %d, %v; want %d (%s saw %s)", v, err, want, tt.name, strings.TrimSpace(string(out)))
			}
			n, err := st.Get(ctx, p)
			if err != nil || string(n.Data) != string(tt.encode(want)) {
				t.Errorf("data = %q, %v; want %q, as %s writes it", n.Data, err, tt.encode(want), tt.name)
			}
			if got, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err != nil || got < 1+2*adds || got > want {
				t.Errorf("%s read %q at its end; want between %d and %d", tt.name, out, 1+2*adds, want)
			}
		})
	}
	t.Run("curator-reads-corral", func(t *testing.T) {
		ctx := ctxFor(t)
		st := b.Open(t)
		t.Cleanup(func() { _ = st.Close() })
		p := fmt.Sprintf("/shared/interop-made-%d", time.Now().UnixNano())
		if _, err := shared.NewCounter(st, p).Add(ctx, 40); err != nil {
			t.Fatal(err)
		}
		cmd := curatorCommand(t, connect, p, 1, 2)
		out, err := cmd(ctx).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != "42" {
			t.Errorf("Curator's add of 2 to a counter corral made at 40 = %q, %v (%s); want 42", got, err, stderrOf(err))
		}
	})
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// curatorCounter returns the start of a Curator client's test.
func curatorCounter(connect string) func(t *testing.T, path string) func(ctx context.Context) *exec.Cmd {
	return func(t *testing.T, path string) func(ctx context.Context) *exec.Cmd {
		if out, err := curatorCommand(t, connect, path, 1, 1)(t.Context()).Output(); err != nil {
			t.Fatalf("Curator's first add: %v (%s, %s)", err, out, stderrOf(err))
		}
		return curatorCommand(t, connect, path, 30, 2)
	}
}

// curatorCommand compiles testdata/CuratorCounter.java and returns the
// command that runs it, adds times adding delta, or skips t without a JDK
// or Curator (internal/testing/curator says which).
func curatorCommand(t *testing.T, connect, path string, adds, delta int) func(ctx context.Context) *exec.Cmd {
	t.Helper()
	if err := curator.Available(); err != nil {
		t.Skip(err)
	}
	cp := curator.Jars
	classes := t.TempDir()
	if out, err := exec.Command("javac", "-d", classes, "-cp", strings.Join(cp, ":"), filepath.Join("testdata", "CuratorCounter.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	classPath := strings.Join(append([]string{classes}, cp...), ":")
	return func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, "java", "-cp", classPath, "CuratorCounter", connect, path, strconv.Itoa(adds), strconv.Itoa(delta))
	}
}

// kazooCounter returns the start of a kazoo client's test, in mode "" or
// "curator" (support_curator).
func kazooCounter(connect, mode string) func(t *testing.T, path string) func(ctx context.Context) *exec.Cmd {
	return func(t *testing.T, path string) func(ctx context.Context) *exec.Cmd {
		python := kazooPython(t)
		run := func(ctx context.Context, adds, delta int) *exec.Cmd {
			return exec.CommandContext(ctx, python, filepath.Join("testdata", "kazoo_counter.py"), connect, path, strconv.Itoa(adds), strconv.Itoa(delta), mode)
		}
		if out, err := run(t.Context(), 1, 1).Output(); err != nil {
			t.Fatalf("kazoo's first add: %v (%s, %s)", err, out, stderrOf(err))
		}
		return func(ctx context.Context) *exec.Cmd { return run(ctx, 30, 2) }
	}
}

// kazooPython returns a Python that has kazoo (the one on PATH, or
// Debian's, where python3-kazoo installs it), or skips t.
func kazooPython(t *testing.T) string {
	for _, python := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(python, "-c", "import kazoo").Run() == nil {
			return python
		}
	}
	t.Skip("no Python with kazoo (apt-get install python3-kazoo)")
	return ""
}
