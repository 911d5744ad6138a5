package etcdstore_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/testcert"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// A Store on a cluster that wants TLS client certificates and a password,
// as a user whose role grants the prefix /app/ and nothing else: with
// WithChroot("/app") every key corral reads or writes is below /app/.
func Example_secure() {
	// The cluster, its certificates and its users, as an operator would
	// have set them up.
	dir, err := os.MkdirTemp("", "etcdstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ca, err := testcert.New(dir, "example")
	if err != nil {
		log.Fatal(err)
	}
	server, err := ca.Server("etcd")
	if err != nil {
		log.Fatal(err)
	}
	client, err := ca.Client("app")
	if err != nil {
		log.Fatal(err)
	}
	cluster, err := etcdserver.New(dir, 1, etcdserver.WithTLS(ca, server))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	if err := cluster.EnableAuth(ctx, "root-password"); err != nil {
		log.Fatal(err)
	}
	if err := cluster.AddUser(ctx, "app", "app-password", "/app/"); err != nil {
		log.Fatal(err)
	}

	// The application: the CA's certificate and its own from files.
	caPEM, err := os.ReadFile(ca.File)
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
	if err != nil {
		log.Fatal(err)
	}
	cfg := clientv3.Config{
		Endpoints:   cluster.Endpoints(), // https://...
		TLS:         &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}},
		Username:    "app",
		Password:    "app-password",
		DialTimeout: 5 * time.Second,
	}
	st, err := etcdstore.Dial(ctx, cfg, etcdstore.WithChroot("/app"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	m := sync.NewMutex(st, "/locks/report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked, token > 0:", m.Token() > 0)
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	// Without the chroot the role is not enough, and a wrong password
	// never gets a session.
	_, err = etcdstore.Dial(ctx, cfg)
	fmt.Println("no chroot:", errors.Is(err, store.ErrPermission))
	cfg.Password = "guess"
	_, err = etcdstore.Dial(ctx, cfg, etcdstore.WithChroot("/app"))
	fmt.Println("wrong password:", errors.Is(err, store.ErrAuth))
	// Output:
	// locked, token > 0: true
	// no chroot: true
	// wrong password: true
}
