package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// floodAddr is the loopback address the flood comes from, so that the other tests'
// calls from 127.0.0.1 keep their own limits.
const floodAddr = "127.0.0.2"

// TestBadTokenFloodIsLimited floods the real API with bad-token submissions from one
// address: after the failed-authentication burst (20 by default) the answers are 429
// with Retry-After, and the audit stream in NATS holds at most the audit burst (10) of
// single records from that address plus summary records that count every other call.
func TestBadTokenFloodIsLimited(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(floodAddr)}}).DialContext}}
	const flood = 300
	bad := "dlc_" + strings.Repeat("0", 64)
	status := map[int]int{}
	first429 := -1
	start := time.Now()
	for i := range flood {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.e.APIURL+"/v1/jobs",
			strings.NewReader(floodJob(fmt.Sprintf("flood-%d", i))))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bad)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		status[resp.StatusCode]++
		switch resp.StatusCode {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			if first429 < 0 {
				first429 = i
			}
			if resp.Header.Get("Retry-After") == "" || eb.Error.Code != api.CodeTooManyRequests {
				t.Fatalf("429 without Retry-After or with code %q", eb.Error.Code)
			}
		default:
			t.Fatalf("call %d: %d %+v, want 401 or 429", i, resp.StatusCode, eb)
		}
	}
	elapsed := time.Since(start)
	t.Logf("flood of %d in %v: %v; first 429 at call %d", flood, elapsed, status, first429)
	// 20 failures, then one more every 2 s of the flood.
	if maxFailures := 20 + int(elapsed.Seconds()/2) + 1; first429 < 20 || status[http.StatusUnauthorized] > maxFailures {
		t.Fatalf("first 429 at call %d and %d answered 401; want the first 429 after 20 and at most %d", first429, status[http.StatusUnauthorized], maxFailures)
	}

	// Every call is accounted for in the audit stream: a bounded number of records of
	// single calls, and summaries for the rest.
	var singles int
	var suppressed int64
	testutil.Eventually(t, time.Minute, fmt.Sprintf("every one of the %d calls accounted for in the audit stream", flood), func() error {
		singles, suppressed = 0, 0
		err := env.events.ReadUntil(ctx, jetstream.AuditStream, events.AuditSubject("system"), nil, func(_ string, data []byte) error {
			var ev events.Event
			var d events.AuditData
			if json.Unmarshal(data, &ev) != nil || json.Unmarshal(ev.Data, &d) != nil {
				return nil //nolint:nilerr // another kind of record on the subject: skip it
			}
			switch {
			case d.Suppressed > 0 && d.RemoteAddr == floodAddr:
				suppressed += d.Suppressed
			case strings.HasPrefix(d.RemoteAddr, floodAddr+":") && d.Route == "POST /v1/jobs":
				singles++
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read audit events: %v", err)
		}
		if int64(singles)+suppressed < flood {
			return fmt.Errorf("%d single records and %d calls counted in summaries", singles, suppressed)
		}
		return nil
	}, 200*time.Millisecond)
	t.Logf("audit stream: %d single records, %d calls counted in summaries", singles, suppressed)
	if maxSingles := 10 + int(elapsed.Seconds()/10) + 1; singles > maxSingles || int64(singles)+suppressed != flood {
		t.Fatalf("%d single records and %d suppressed for %d calls; want at most %d records and every call counted",
			singles, suppressed, flood, maxSingles)
	}

	// The other addresses are not limited: a bad token from 127.0.0.1 is still 401.
	resp, err := http.Post(env.e.APIURL+"/v1/jobs", "application/yaml", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a call from 127.0.0.1 after the flood: %d, want 401", resp.StatusCode)
	}
}

func floodJob(name string) string {
	return fmt.Sprintf("apiVersion: opendlc.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: %s}\n", name)
}

// TestBillionLaughsIsRefused submits alias bombs within the 1 MiB size limit through
// the real API: each is refused with 400 or 422 naming the expansion, and the server
// (in this process) allocates far less than the expansion would need.
func TestBillionLaughsIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var laughs strings.Builder
	laughs.WriteString("apiVersion: opendlc.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: lol}\na0: &a0 \"lol\"\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&laughs, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9), ", "))
	}
	// One 400 KB value aliased 1000 times: 400 MB once expanded.
	wide := "apiVersion: opendlc.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: wide}\nx: &x \"" +
		strings.Repeat("y", 400_000) + "\"\nl: [" + strings.TrimSuffix(strings.Repeat("*x,", 1000), ",") + "]\n"
	for name, doc := range map[string]string{"billion laughs": laughs.String(), "wide": wide} {
		if len(doc) > 1<<20 {
			t.Fatalf("%s: %d bytes, over the limit", name, len(doc))
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		resp := itest.Do(t, ctx, http.MethodPost, env.e.APIURL+"/v1/jobs", env.e.AdminToken, bytes.NewReader([]byte(doc)))
		var eb api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s (%d bytes): %d %s %q in %v, %d MiB allocated", name, len(doc), resp.StatusCode, eb.Error.Code, eb.Error.Message, took, allocated>>20)
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d, want 400 or 422", name, resp.StatusCode)
		}
		if !strings.Contains(eb.Error.Message, "aliases expand the document") {
			t.Fatalf("%s: message %q does not name the alias expansion", name, eb.Error.Message)
		}
		if allocated > 256<<20 {
			t.Fatalf("%s: %d MiB allocated while refusing it, want under 256 MiB", name, allocated>>20)
		}
	}
}
