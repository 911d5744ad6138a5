package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	gosync "sync"
	"syscall"
	"testing"

	"github.com/corral-go/corral/shared"
)

// TestValueCLI: set from DATA and from standard input, get raw and as
// JSON, compare-and-set refused once the version moved, get of a value
// never set, and watch until interrupted.
func TestValueCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		p := "/e2e/value-cli"
		if out, code := corral(t, "", "value", "get", "--store", srv.url, p); code != exitTimeout || out != "" {
			t.Errorf("value get of a value never set = %q, exit %d; want exit %d", out, code, exitTimeout)
		}
		if out, code := corral(t, "", "value", "set", "--store", srv.url, "--version", "-1", p, "one"); code != 0 || out != "0\n" {
			t.Errorf("value set --version -1 = %q, exit %d; want version 0", out, code)
		}
		if out, code := corral(t, "two\n", "value", "set", "--store", srv.url, p); code != 0 || out != "1\n" {
			t.Errorf("value set from stdin = %q, exit %d; want version 1", out, code)
		}
		if out, code := corral(t, "", "value", "get", "--store", srv.url, p); code != 0 || out != "two\n" {
			t.Errorf("value get = %q, exit %d; want the data as set", out, code)
		}
		if out, code := corral(t, "", "value", "set", "--store", srv.url, "--version", "0", p, "three"); code != exitFailure {
			t.Errorf("value set --version 0 at version 1 = %q, exit %d; want exit %d", out, code, exitFailure)
		}
		out, code := corral(t, "", "value", "set", "--json", "--store", srv.url, "--version", "1", p, "\xff")
		var j struct {
			Path       string  `json:"path"`
			Version    int64   `json:"version"`
			Data       *string `json:"data"`
			DataBase64 string  `json:"data_base64"`
		}
		if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.Path != p || j.Version != 2 || j.Data != nil || j.DataBase64 != "/w==" {
			t.Errorf("value set --json of binary data = %q, exit %d (%v)", out, code, err)
		}
		// Watch: the value now, then each change, until interrupted.
		w := start(t, "value", "watch", "--json", "--store", srv.url, p)
		if l := w.line(t); !strings.Contains(l, `"version":2`) {
			t.Errorf("first watch line %q; want version 2", l)
		}
		if _, err := shared.NewValue(srv.st, p).Set(t.Context(), []byte("four")); err != nil {
			t.Fatal(err)
		}
		if l := w.line(t); !strings.Contains(l, `"version":3`) || !strings.Contains(l, `"data":"four"`) {
			t.Errorf("watch line after a set %q; want four at version 3", l)
		}
		if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := w.exit(t); code != exitInterrupted {
			t.Errorf("value watch interrupted: exit %d; want %d\n%s", code, exitInterrupted, w.stderr)
		}
		// A path of another recipe is refused.
		if _, code := corral(t, "", "queue", "put", "--store", srv.url, "/e2e/value-queue", "x"); code != 0 {
			t.Fatalf("queue put: exit %d", code)
		}
		if _, code := corral(t, "", "value", "set", "--store", srv.url, "/e2e/value-queue", "x"); code != exitFailure {
			t.Errorf("value set on a queue: exit %d; want %d", code, exitFailure)
		}
	})
}

// TestCounterCLI: processes adding at once end at exactly the sum; get
// reads it, as JSON too; bad input is a usage error.
func TestCounterCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		p := "/e2e/counter-cli"
		if out, code := corral(t, "", "counter", "get", "--store", srv.url, p); code != 0 || out != "0\n" {
			t.Errorf("counter get of a counter never added to = %q, exit %d; want 0", out, code)
		}
		const procs, adds = 4, 5
		var wg gosync.WaitGroup
		errs := make(chan error, procs*adds)
		for range procs {
			wg.Go(func() {
				for range adds {
					out, err := exec.CommandContext(t.Context(), bin, "counter", "add", "--store", srv.url, p, "2").CombinedOutput()
					if err != nil {
						errs <- fmt.Errorf("counter add: %v: %s", err, out)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		want := strconv.Itoa(procs * adds * 2)
		if out, code := corral(t, "", "counter", "get", "--store", srv.url, p); code != 0 || out != want+"\n" {
			t.Errorf("counter get after the adds = %q, exit %d; want %s", out, code, want)
		}
		if out, code := corral(t, "", "counter", "add", "--json", "--store", srv.url, p, "--", "-40"); code != 0 || out != fmt.Sprintf("{\"path\":%q,\"value\":0}\n", p) {
			t.Errorf("counter add --json -- -40 = %q, exit %d; want value 0", out, code)
		}
		for _, args := range [][]string{
			{"counter", "add", "--store", srv.url, p, "x"},
			{"counter", "add", "--store", srv.url},
			{"counter", "sub", "--store", srv.url, p},
			{"counter", "get", "--store", srv.url, "relative"},
			{"value", "get", "--store", srv.url, "/a", "/b"},
		} {
			if _, code := corral(t, "", args...); code != exitUsage {
				t.Errorf("corral %q: exit %d; want %d", args, code, exitUsage)
			}
		}
	})
}
