// Command robfigcron prints the next run times Kubernetes CronJob's schedule parser
// (github.com/robfig/cron/v3 ParseStandard, the zone given as CronJob gives spec.timeZone: a
// "CRON_TZ=<zone> " prefix) computes; built by localcluster/gotools.py for the differential
// test of our cron module.
//
// Each input line is a JSON object {"schedule", "zone", "after" (RFC 3339), "count"}; for each,
// one JSON line is printed: {"next": [RFC 3339 UTC times, at most count]} or {"error": "..."}.
// A schedule with no time within robfig's search (five years) ends its list early.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
	_ "time/tzdata" // zones without the machine's tzdata

	"github.com/robfig/cron/v3"
)

type query struct {
	Schedule string `json:"schedule"`
	Zone     string `json:"zone"`
	After    string `json:"after"`
	Count    int    `json:"count"`
}

type answer struct {
	Next  []string `json:"next,omitempty"`
	Error string   `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		var q query
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			fmt.Fprintln(os.Stderr, "robfigcron:", err)
			os.Exit(1)
		}
		if err := enc.Encode(next(q)); err != nil {
			fmt.Fprintln(os.Stderr, "robfigcron:", err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil { // one answer per question, for a caller that waits
			fmt.Fprintln(os.Stderr, "robfigcron:", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "robfigcron:", err)
		os.Exit(1)
	}
}

func next(q query) answer {
	after, err := time.Parse(time.RFC3339, q.After)
	if err != nil {
		return answer{Error: err.Error()}
	}
	spec := q.Schedule
	if q.Zone != "" {
		spec = "CRON_TZ=" + q.Zone + " " + spec
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return answer{Error: err.Error()}
	}
	a := answer{Next: []string{}}
	t := after
	for range q.Count {
		t = sched.Next(t)
		if t.IsZero() {
			break
		}
		a.Next = append(a.Next, t.UTC().Format(time.RFC3339))
	}
	return a
}
