package zkstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// Example opens a session, takes a place in a line of contenders and
// watches the session. It needs a ZooKeeper server, so it is not run.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := zkstore.Open(ctx, []string{"127.0.0.1:2181"}, zkstore.WithSessionTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// Named _c_<uuid>-lock-<10 digits>, created exactly once even if the
	// reply is lost.
	me, err := st.Create(ctx, "/app/lock/lock-", nil, store.EphemeralSequential)
	if err != nil {
		log.Fatal(err)
	}
	line, err := st.Children(ctx, "/app/lock")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first in line:", line[0].Name == me.Name())

	select {
	case <-st.Disconnected():
		fmt.Println("ownership unknown until reconnected")
	case <-st.Context().Done():
		fmt.Println("session over:", context.Cause(st.Context()))
	case <-ctx.Done():
	}
}
