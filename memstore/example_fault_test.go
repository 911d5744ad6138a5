package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// A dropped connection without the end of the session: calls fail with
// store.ErrDisconnected until Reconnect, and the ephemeral nodes stay.
func ExampleStore_Disconnect() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := memstore.New()
	defer st.Close()
	n, err := st.Create(ctx, "/workers/w", nil, store.Ephemeral)
	if err != nil {
		log.Fatal(err)
	}

	st.Disconnect()
	select {
	case <-st.Disconnected():
	case <-ctx.Done():
		return
	}
	_, err = st.Get(ctx, n.Path)
	fmt.Println("while cut off:", errors.Is(err, store.ErrDisconnected))

	st.Reconnect()
	_, err = st.Get(ctx, n.Path)
	fmt.Println("after Reconnect:", err, "session:", st.Context().Err())
	// Output:
	// while cut off: true
	// after Reconnect: <nil> session: <nil>
}

// A create whose reply is lost was applied nonetheless: the caller sees a
// lost connection and must find out for itself whether its node exists.
func ExampleStore_LoseNextCreateReply() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	st.LoseNextCreateReply()
	_, err := st.Create(ctx, "/jobs/j-", []byte("42"), store.Sequential)
	fmt.Println("create:", errors.Is(err, store.ErrDisconnected))

	kids, _ := st.Children(ctx, "/jobs")
	fmt.Println("nodes made:", len(kids))
	// Output:
	// create: true
	// nodes made: 1
}
