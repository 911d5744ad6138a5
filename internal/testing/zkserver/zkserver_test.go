package zkserver

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/testing/testcert"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerLifecycle(t *testing.T) {
	s := ForTest(t, Config{})
	if m, err := s.Mode(); err != nil || m != "standalone" {
		t.Fatalf("Mode() = %q, %v; want standalone", m, err)
	}
	addr := s.Addr()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("Running() after Kill = true")
	}
	if _, err := s.Mode(); err == nil {
		t.Fatal("Mode() after Kill succeeded")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Errorf("Addr() after restart = %s; want %s", s.Addr(), addr)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Mode(); err != nil || m != "standalone" {
		t.Fatalf("Mode() after Restart = %q, %v; want standalone", m, err)
	}
}

func TestCloseSessionUnknown(t *testing.T) {
	s := ForTest(t, Config{})
	// A session the server never saw counts as already expired.
	if err := CloseSession(s.Addr(), 0x1234, make([]byte, 16), 5*time.Second); err != nil {
		t.Fatalf("CloseSession(unknown) = %v; want nil", err)
	}
}

func TestParse(t *testing.T) {
	resp := []byte{0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0x0f, 0xa0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 9, 8}
	id, pw, ok := ParseConnectResponse(resp)
	if !ok || id != 7 || string(pw) != "\x09\x08" {
		t.Errorf("ParseConnectResponse = %d, %v, %v; want 7, [9 8], true", id, pw, ok)
	}
	req := []byte{0, 0, 0, 20, 0, 0, 0, 5, 0, 0, 0, 15}
	if !IsCreate(req) {
		t.Errorf("IsCreate(create2) = false")
	}
	req[11] = 4
	if IsCreate(req) {
		t.Errorf("IsCreate(getData) = true")
	}
}

// A server with TLS serves its secure port with the key store given, and
// refuses a client that presents no certificate.
func TestTLS(t *testing.T) {
	ca := testcert.ForTest(t, "zk")
	srv := ca.MustServer(t, "zk-server")
	s := ForTest(t, Config{TLS: &TLS{KeyStore: srv.BundleFile, TrustStore: ca.File}})
	if s.TLSAddr() == "" || s.TLSAddr() == s.Addr() {
		t.Fatalf("TLSAddr() = %q (Addr %q); want a port of its own", s.TLSAddr(), s.Addr())
	}
	handshake := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.TLSAddr(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		// The four-letter commands work over TLS too; TLS 1.3 reports a
		// refused client certificate on the first read.
		if _, err := c.Write([]byte("srvr")); err != nil {
			return err
		}
		out, err := io.ReadAll(c)
		if err != nil {
			return err
		}
		if !strings.Contains(string(out), "Mode: standalone") {
			return fmt.Errorf("srvr over TLS = %q", out)
		}
		return nil
	}
	if err := handshake(ca.ClientTLS(ca.MustClient(t, "someone"))); err != nil {
		t.Errorf("handshake with a client certificate: %v", err)
	}
	if err := handshake(ca.ClientTLS()); err == nil {
		t.Error("handshake without a client certificate succeeded")
	}
}

// A follower partitioned from the other members goes on serving for
// SyncLimit ticks, then stops; the other two keep a quorum; once healed it
// serves again as a follower.
func TestEnsemblePartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	const tick, syncLimit = 100 * time.Millisecond, 10
	e := EnsembleForTest(t, 3, Config{TickTime: tick, SyncLimit: syncLimit, QuorumProxies: true})
	leader, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	f := (leader + 1) % 3
	if err := e.Partition(f); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The mode has no event to wait on: poll it, bounded.
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	waitMode := func(i int, want func(string, error) bool, what string) time.Duration {
		t.Helper()
		for !want(e.Members[i].Mode()) {
			select {
			case <-poll.C:
			case <-bound.C:
				t.Fatalf("member %d: %s: not after %v", i, what, time.Since(start))
			}
		}
		return time.Since(start)
	}
	stopped := waitMode(f, func(_ string, err error) bool { return err != nil }, "stops serving")
	if stopped < syncLimit*tick/2 {
		t.Errorf("partitioned follower stopped serving %v after the partition; want about %v", stopped, syncLimit*tick)
	}
	t.Logf("partitioned follower stopped serving after %v (syncLimit × tickTime = %v)", stopped, syncLimit*tick)
	if m, err := e.Members[leader].Mode(); err != nil || m != "leader" {
		t.Errorf("leader's Mode() during the partition = %q, %v; want leader", m, err)
	}
	if err := e.Heal(f); err != nil {
		t.Fatal(err)
	}
	waitMode(f, func(m string, err error) bool { return err == nil && m == "follower" }, "follows again")
	if err := (&Ensemble{}).Partition(0); err == nil {
		t.Error("Partition on an ensemble without QuorumProxies succeeded")
	}
}
