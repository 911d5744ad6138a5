package zkserver

import (
	"testing"
	"time"

	"go.uber.org/goleak"
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
