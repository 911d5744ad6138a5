package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/testcert"
	"github.com/corral-go/corral/internal/testing/zkserver"
)

// runSplit runs corral with args and the extra environment env, and
// returns its exit code, standard output and standard error.
func runSplit(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// TestNoIdentity: a ZooKeeper session with neither a digest user nor a
// client certificate the server authenticated says so on standard error,
// once (the nodes it creates are open to everyone); with an identity, and
// on etcd and mem://, corral says nothing. --require-identity, or
// $CORRAL_REQUIRE_IDENTITY, refuses such a session with exit 6, and is a
// usage error where there are no identities.
func TestNoIdentity(t *testing.T) {
	zkserver.Require(t)
	ca := testcert.ForTest(t, "identity")
	// ssl.clientAuth=want: the TLS port takes a session without a
	// certificate, which then holds no identity.
	zs := zkserver.ForTest(t, zkserver.Config{TLS: &zkserver.TLS{
		KeyStore: ca.MustServer(t, "zk").BundleFile, TrustStore: ca.File, ClientAuth: "want"}})
	es := etcdserver.Start(t, 1)
	client := ca.MustClient(t, "app")
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("app-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := []string{"--store", "zk://" + zs.Addr()}
	tlsNoCert := []string{"--store", "zk://" + zs.TLSAddr(), "--cacert", ca.File}
	withCert := append(tlsNoCert[:len(tlsNoCert):len(tlsNoCert)], "--cert", client.CertFile, "--key", client.KeyFile)
	digest := append(plain[:len(plain):len(plain)], "--user", "app", "--password-file", pwFile)
	etcd := []string{"--store", "etcd://" + strings.TrimPrefix(es.Endpoints()[0], "http://")}
	mem := []string{"--store", "mem://"}
	required := func(args []string) []string { return append(args[:len(args):len(args)], "--require-identity") }

	const warning = "corral: warning: zkstore: the session holds no identity"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		says string // on stderr; "": stderr is empty
	}{
		{"plain, no credentials", nil, plain, exitOK, warning + ": no credentials and no TLS client certificate"},
		{"TLS, no certificate", nil, tlsNoCert, exitOK, warning + ": the server did not authenticate a client certificate"},
		{"digest user", nil, digest, exitOK, ""},
		{"certificate", nil, withCert, exitOK, ""},
		{"etcd", nil, etcd, exitOK, ""},
		{"mem", nil, mem, exitOK, ""},

		{"required, plain", nil, required(plain), exitDenied, "holds no identity"},
		{"required by the environment, TLS", []string{"CORRAL_REQUIRE_IDENTITY=true"}, tlsNoCert, exitDenied, "holds no identity"},
		{"required, digest user", nil, required(digest), exitOK, ""},
		{"required by the environment, certificate", []string{"CORRAL_REQUIRE_IDENTITY=1"}, withCert, exitOK, ""},
		{"not required by the environment", []string{"CORRAL_REQUIRE_IDENTITY=false"}, withCert, exitOK, ""},
		{"required on etcd", nil, required(etcd), exitUsage, "--require-identity ($CORRAL_REQUIRE_IDENTITY) is for zk:// stores"},
		{"required on mem", []string{"CORRAL_REQUIRE_IDENTITY=true"}, mem, exitUsage, "--require-identity ($CORRAL_REQUIRE_IDENTITY) is for zk:// stores"},
		{"$CORRAL_REQUIRE_IDENTITY not a boolean", []string{"CORRAL_REQUIRE_IDENTITY=maybe"}, plain, exitUsage, `$CORRAL_REQUIRE_IDENTITY="maybe": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// queue put creates nodes, and tells a refusal (6) from a
			// usage error (2).
			cmd := append([]string{"queue", "put", "--connect-timeout", "20s"}, tc.args...)
			cmd = append(cmd, "/identity/q", "job")
			code, stdout, stderr := runSplit(t, tc.env, cmd...)
			if code != tc.code {
				t.Errorf("corral %q: exit %d; want %d\nstderr: %s", cmd, code, tc.code, stderr)
			}
			switch {
			case tc.says == "" && stderr != "":
				t.Errorf("corral %q: stderr %q; want nothing", cmd, stderr)
			case tc.says != "" && !strings.Contains(stderr, tc.says):
				t.Errorf("corral %q: stderr %q; want %q", cmd, stderr, tc.says)
			case tc.code == exitOK && tc.says != "" && strings.Count(stderr, "holds no identity") != 1:
				t.Errorf("corral %q: stderr %q; want the warning once", cmd, stderr)
			case tc.code == exitDenied && (strings.Contains(stderr, "warning") || !strings.Contains(stderr, "--require-identity: give --user")):
				t.Errorf("corral %q: stderr %q; want the refusal saying what to give, and no warning", cmd, stderr)
			}
			if strings.Contains(stdout, "identity") {
				t.Errorf("corral %q: stdout %q; want the warning on stderr only", cmd, stdout)
			}
			t.Logf("exit %d, stderr: %s", code, stderr)
		})
	}
	// Commands that create no node have nothing open to everyone: no
	// warning. --require-identity still refuses the session.
	for _, cmd := range [][]string{
		{"locks", "/identity"}, {"ls", "/"}, {"leader", "/identity/l"}, {"group", "/identity/g"},
		{"shards", "/identity/p"}, {"queue", "len", "/identity/q"}, {"queue", "peek", "/identity/q"},
		{"barrier", "wait", "/identity/b"},
	} {
		args := append(append([]string{cmd[0], "--connect-timeout", "20s"}, plain...), cmd[1:]...)
		code, _, stderr := runSplit(t, nil, args...)
		if code != exitOK && !(cmd[1] == "peek" && code == exitTimeout) || stderr != "" {
			t.Errorf("corral %q: exit %d, stderr %q; want success and nothing on stderr", args, code, stderr)
		}
		if code, _, stderr := runSplit(t, nil, required(args)...); code != exitDenied || !strings.Contains(stderr, "holds no identity") {
			t.Errorf("corral %q --require-identity: exit %d, stderr %q; want %d, holds no identity", args, code, stderr, exitDenied)
		}
	}
}
