package recipe_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/memstore"
)

// logBuffer is a goroutine-safe log sink: the session's cleaner logs from
// its own goroutine.
type logBuffer struct {
	mu      gosync.Mutex
	buf     bytes.Buffer
	written chan struct{} // a token after each write
}

func newLogBuffer() *logBuffer { return &logBuffer{written: make(chan struct{}, 1)} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer func() {
		select {
		case b.written <- struct{}{}:
		default:
		}
	}()
	return b.buf.Write(p)
}

// waitFor waits until the logs hold s, or the timeout.
func (b *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(timeout)
	for !strings.Contains(b.String(), s) {
		select {
		case <-b.written:
		case <-deadline:
			t.Fatalf("logs lack %q:\n%s", s, b.String())
		}
	}
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRemovalLogsToRecorder: the recorder a primitive passes, to Remove or
// in HoldOptions.Rec, receives the logs of a removal handed to the
// session's cleaner and of the cleaner's removal; no context carries it.
func TestRemovalLogsToRecorder(t *testing.T) {
	for _, via := range []string{"Remove", "Hold.Release"} {
		t.Run(via, func(t *testing.T) {
			logs := newLogBuffer()
			rec := telemetry.New(telemetry.Config{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
				telemetry.KindMutex, "/rec", errDeleted)
			st := memstore.New()
			defer st.Close()
			n, err := acquire(t.Context(), st, rec, dir(t), names.Lock, recipe.Predecessor)
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			h := recipe.NewHold(st, n, recipe.HoldOptions{Deleted: errDeleted, Lazy: true, Rec: rec})
			st.Disconnect()
			cctx, cancel := context.WithCancel(t.Context())
			cancel()
			if via == "Remove" {
				err = recipe.Remove(cctx, st, rec, n)
				h.Stop(errReleased)
			} else {
				_, err = h.Release(cctx, errReleased)
			}
			if err == nil {
				t.Fatalf("%s(disconnected) = nil; want the removal left to the cleaner", via)
			}
			st.Reconnect()
			select {
			case <-recipe.Pending(st, n):
			case <-time.After(timeout):
				t.Fatal("removal still pending after the reconnection")
			}
			for _, want := range []string{"cleanup handed to the session's cleaner", "cleanup done by the session's cleaner", "node=" + n.Path} {
				logs.waitFor(t, want)
			}
			if _, err := st.Get(t.Context(), n.Path); err == nil {
				t.Errorf("node %q still there after the cleaner ran", n.Path)
			}
		})
	}
}
