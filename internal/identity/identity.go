// Package identity is the record of who created a contender node: the
// host, the process, when its attempt started, and an optional label. corral
// writes it as the data of the nodes it creates for locks, semaphore leases
// and double barrier members, unless the caller gives data of its own, so
// that an operator (or corral's inspect package) can tell who holds and who
// waits.
//
// The record is a small JSON object, readable by any client of the store:
//
//	{"host":"web-1","pid":4242,"start":"2026-08-03T10:15:30.123Z","label":"deploy"}
//
// host is the host name (os.Hostname), pid the process ID, start the time
// the hold attempt began, in UTC with millisecond precision, and label the
// caller's label, left out when empty. A holder that records its grant (a
// partition's shard owner, whose label is its member id) adds granted, the
// time of the grant, in the same form, once it is granted:
//
//	{"host":"web-1","pid":4242,"start":"2026-08-03T10:15:30.123Z","granted":"2026-08-03T10:15:36.456Z","label":"worker-1"}
//
// Readers ignore fields they do not know, so fields can be added later.
//
// It ships: sync writes the record and inspect reads it.
package identity

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	gosync "sync"
	"time"
)

// Record is a decoded identity record.
type Record struct {
	Host  string
	PID   int
	Start time.Time
	// Granted is when the holder recorded its grant, the zero Time when
	// it did not (a waiter, or a holder that records none).
	Granted time.Time
	Label   string
}

// startLayout is RFC 3339 with milliseconds; times are written in UTC.
const startLayout = "2006-01-02T15:04:05.000Z07:00"

// MaxSize bounds the data Parse looks at: a record is far smaller, and
// foreign data of any size is not decoded.
const MaxSize = 4096

var host = gosync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// Encoder writes the records of one label. Its zero value is not usable;
// make one with NewEncoder. It is safe for concurrent use.
type Encoder struct {
	prefix []byte // {"host":...,"pid":...,"start":"
	suffix []byte // "} or ","label":...}
}

// NewEncoder returns an Encoder of records with this process's host name
// and process ID, and label.
func NewEncoder(label string) *Encoder {
	h, _ := json.Marshal(host())
	e := &Encoder{}
	e.prefix = append(e.prefix, `{"host":`...)
	e.prefix = append(e.prefix, h...)
	e.prefix = append(e.prefix, `,"pid":`...)
	e.prefix = strconv.AppendInt(e.prefix, int64(os.Getpid()), 10)
	e.prefix = append(e.prefix, `,"start":"`...)
	e.suffix = append(e.suffix, '"')
	if label != "" {
		l, _ := json.Marshal(label)
		e.suffix = append(e.suffix, `,"label":`...)
		e.suffix = append(e.suffix, l...)
	}
	e.suffix = append(e.suffix, '}')
	return e
}

// Encode returns the record of an attempt that started at start.
func (e *Encoder) Encode(start time.Time) []byte {
	b := make([]byte, 0, len(e.prefix)+len(startLayout)+len(e.suffix))
	b = append(b, e.prefix...)
	b = start.UTC().AppendFormat(b, startLayout)
	return append(b, e.suffix...)
}

// EncodeGranted returns the record of an attempt that started at start
// and was granted at granted.
func (e *Encoder) EncodeGranted(start, granted time.Time) []byte {
	b := make([]byte, 0, len(e.prefix)+2*len(startLayout)+len(grantedField)+len(e.suffix))
	b = append(b, e.prefix...)
	b = start.UTC().AppendFormat(b, startLayout)
	b = append(b, grantedField...)
	b = granted.UTC().AppendFormat(b, startLayout)
	return append(b, e.suffix...)
}

// grantedField sits between the start and the grant's time.
const grantedField = `","granted":"`

// wire is the JSON form of a record; pointers tell a missing field.
type wire struct {
	Host    *string `json:"host"`
	PID     *int    `json:"pid"`
	Start   *string `json:"start"`
	Granted string  `json:"granted"`
	Label   string  `json:"label"`
}

// Parse decodes data as an identity record. It reports false for anything
// else: no data (as etcd's own clients write), a host address (Curator's
// data), another JSON object, arbitrary bytes. A record must have host, pid
// and start; unknown fields are ignored.
func Parse(data []byte) (Record, bool) {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || len(data) > MaxSize || data[0] != '{' {
		return Record{}, false
	}
	var w wire
	if err := json.Unmarshal(data, &w); err != nil || w.Host == nil || w.PID == nil || w.Start == nil {
		return Record{}, false
	}
	start, err := time.Parse(time.RFC3339Nano, *w.Start)
	if err != nil || *w.PID <= 0 {
		return Record{}, false
	}
	r := Record{Host: *w.Host, PID: *w.PID, Start: start, Label: w.Label}
	if w.Granted != "" {
		if r.Granted, err = time.Parse(time.RFC3339Nano, w.Granted); err != nil {
			return Record{}, false
		}
	}
	return r, true
}
