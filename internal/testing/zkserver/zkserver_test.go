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
