package inspect

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/corral-go/corral/store"
)

// The JSON of a Contender and a Claim carries the session and the data as
// text a JSON reader cannot round (see JSON in the package doc): a session
// id or lease id is a 64-bit number that a float64 reader (JavaScript, jq)
// would round, so two sessions could print the same.

// wire is the session and the data of a Contender or a Claim as JSON.
type wire struct {
	Session    string
	Data       *string
	DataBase64 *string
}

func toWire(session int64, data []byte) wire {
	var w wire
	if session != 0 {
		w.Session = SessionString(session)
	}
	switch {
	case data == nil:
	case utf8.Valid(data):
		s := string(data)
		w.Data = &s
	default:
		s := base64.StdEncoding.EncodeToString(data)
		w.DataBase64 = &s
	}
	return w
}

func (w wire) from() (session int64, data []byte, err error) {
	if w.Session != "" {
		if session, err = strconv.ParseInt(w.Session, 0, 64); err != nil {
			return 0, nil, fmt.Errorf("inspect: session %q: %w", w.Session, err)
		}
	}
	switch {
	case w.DataBase64 != nil:
		if data, err = base64.StdEncoding.DecodeString(*w.DataBase64); err != nil {
			return 0, nil, fmt.Errorf("inspect: data_base64: %w", err)
		}
	case w.Data != nil:
		data = []byte(*w.Data)
	}
	return session, data, nil
}

// SessionString returns a session id or lease id as corral shows it, in
// "corral locks" and in JSON: hexadecimal, "0x" first (ZooKeeper's own
// tools print session ids so).
func SessionString(id int64) string { return fmt.Sprintf("%#x", id) }

// MarshalJSON encodes c with its session as a string (SessionString) and
// its data as "data" when it is UTF-8 text, else as "data_base64".
func (c Contender) MarshalJSON() ([]byte, error) {
	type fields Contender
	w := toWire(c.Session, c.Data)
	return json.Marshal(struct {
		fields
		Session    string  `json:"session,omitempty"`
		Data       *string `json:"data,omitempty"`
		DataBase64 *string `json:"data_base64,omitempty"`
	}{fields(c), w.Session, w.Data, w.DataBase64})
}

// UnmarshalJSON decodes what MarshalJSON encodes. Anything else, and a nil
// c, fail with store.ErrInvalidArgument.
func (c *Contender) UnmarshalJSON(b []byte) error {
	if c == nil {
		return fmt.Errorf("inspect: contender: %w: nil *Contender", store.ErrInvalidArgument)
	}
	return invalid("contender", c.unmarshal(b))
}

func (c *Contender) unmarshal(b []byte) error {
	type fields Contender
	var v struct {
		fields
		Session    string  `json:"session"`
		Data       *string `json:"data"`
		DataBase64 *string `json:"data_base64"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Contender(v.fields)
	var err error
	c.Session, c.Data, err = wire{v.Session, v.Data, v.DataBase64}.from()
	return err
}

// MarshalJSON encodes c as [Contender.MarshalJSON] does.
func (c Claim) MarshalJSON() ([]byte, error) {
	type fields Claim
	w := toWire(c.Session, c.Data)
	return json.Marshal(struct {
		fields
		Session    string  `json:"session,omitempty"`
		Data       *string `json:"data,omitempty"`
		DataBase64 *string `json:"data_base64,omitempty"`
	}{fields(c), w.Session, w.Data, w.DataBase64})
}

// UnmarshalJSON decodes what MarshalJSON encodes. Anything else, and a nil
// c, fail with store.ErrInvalidArgument.
func (c *Claim) UnmarshalJSON(b []byte) error {
	if c == nil {
		return fmt.Errorf("inspect: claim: %w: nil *Claim", store.ErrInvalidArgument)
	}
	return invalid("claim", c.unmarshal(b))
}

// invalid wraps err, a failure to decode what, in store.ErrInvalidArgument.
func invalid(what string, err error) error {
	if err != nil && !errors.Is(err, store.ErrInvalidArgument) {
		err = fmt.Errorf("inspect: %s: %w: %w", what, store.ErrInvalidArgument, err)
	}
	return err
}

func (c *Claim) unmarshal(b []byte) error {
	type fields Claim
	var v struct {
		fields
		Session    string  `json:"session"`
		Data       *string `json:"data"`
		DataBase64 *string `json:"data_base64"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Claim(v.fields)
	var err error
	c.Session, c.Data, err = wire{v.Session, v.Data, v.DataBase64}.from()
	return err
}
