package etcdserver

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// childEnv makes a test binary a single-member etcd with its data in the
// directory it names (see ServeChild).
const childEnv = "CORRAL_ETCD_CHILD"

// ServeChild makes the test binary an etcd server when StartChild started
// it: it then serves a single member until its stdin closes, and returns
// the exit code and true. Otherwise it returns at once, with false. Call it
// first in TestMain:
//
//	func TestMain(m *testing.M) {
//		if code, ok := etcdserver.ServeChild(); ok {
//			os.Exit(code)
//		}
//		goleak.VerifyTestMain(m)
//	}
func ServeChild() (code int, ok bool) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return 0, false
	}
	c, err := New(dir, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	defer c.Close()
	fmt.Println(c.Endpoints()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0, true
}

// StartChild starts a single-member etcd in a child process, the test
// binary started again (its TestMain must call ServeChild), and returns its
// client URL. The server runs outside the test's process, as it would in
// production: a test that measures the client's heap or its scheduling
// delays measures the client's alone. It stops when the test ends (its
// stdin is closed; it is killed 30 s later if it has not exited).
func StartChild(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		stdin.Close()
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case <-exited:
		case <-timer.C:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	timer := time.NewTimer(2 * time.Minute)
	defer timer.Stop()
	select {
	case ep, ok := <-line:
		if !ok {
			t.Fatal("etcdserver: the etcd child exited before it served")
		}
		return ep
	case <-timer.C:
		t.Fatal("etcdserver: the etcd child did not serve within 2 minutes")
	}
	return ""
}
