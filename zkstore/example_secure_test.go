package zkstore_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// A Store over ZooKeeper's secure client port, with a client certificate,
// as the digest user app, rooted at /app. It needs such a server (see
// internal/testing/zkserver's TLS for its zoo.cfg), so it is not run; TestTLS and
// TestDigestWrongPassword run the same against real servers.
func Example_secure() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	caPEM, err := os.ReadFile("ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair("client.pem", "client-key.pem")
	if err != nil {
		log.Fatal(err)
	}
	st, err := zkstore.Open(ctx, []string{"zk1:2281", "zk2:2281", "zk3:2281"},
		zkstore.WithTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}),
		zkstore.WithDigestAuth("app", os.Getenv("APP_PASSWORD")),
		zkstore.WithChroot("/app"))
	switch {
	case errors.Is(err, store.ErrAuth):
		log.Fatal("refused: a certificate, or the password of /app's owner: ", err)
	case errors.Is(err, store.ErrPermission):
		log.Fatal("/app is not ours: ", err)
	case err != nil:
		log.Fatal(err)
	}
	defer st.Close()

	// The znodes /app/locks/report/..., each with CreatorACL: app's
	// (and the certificate's subject's) to change, anyone's to read.
	m := sync.NewMutex(st, "/locks/report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	fmt.Println("locked with token", m.Token())
}
