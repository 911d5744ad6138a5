package group_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/memstore"
)

// A replica is a member from Join until Leave; Done and Context say when,
// and why, the membership ended.
func ExampleJoin() {
	st := memstore.New()
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	m, err := group.Join(ctx, st, "/services/api", []byte("10.0.0.1:80"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("member %s, token >= 0: %v\n", m.Value(), m.Token() >= 0)

	if err := m.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	<-m.Done()
	fmt.Println("ended:", errors.Is(context.Cause(m.Context()), group.ErrLeft))
	// Output:
	// member 10.0.0.1:80, token >= 0: true
	// ended: true
}

// A member changes what watchers see of it without leaving: a replica that
// drains, say.
func ExampleMembership_SetValue() {
	st := memstore.New()
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	w := group.Watch(ctx, st, "/services/api")
	defer w.Close()
	m, err := group.Join(ctx, st, "/services/api", []byte("10.0.0.1:80 serving"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Leave(ctx)
	for ms := range w.Members() {
		if len(ms) == 1 && string(ms[0].Value) == "10.0.0.1:80 serving" {
			break
		}
	}

	if err := m.SetValue(ctx, []byte("10.0.0.1:80 draining")); err != nil {
		log.Fatal(err)
	}
	ms := <-w.Members()
	fmt.Printf("%d member: %s\n", len(ms), ms[0].Value)
	// Output:
	// 1 member: 10.0.0.1:80 draining
}
