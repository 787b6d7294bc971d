package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
)

// tap sits between a Store and the S3 gateway: it records every request, counts the
// requests in flight per location, and lets a test hold or fail chosen requests.
type tap struct {
	next s3.HTTPClient

	mu       sync.Mutex
	reqs     []string       // "METHOD /bucket/key", in the order they were sent
	inflight map[string]int // per location (the URI's prefix, first path segment after the bucket)
	peak     map[string]int
	// hook, when set, runs before a request is sent; an error fails the request.
	hook func(*http.Request) error
}

// tapStore returns a Store on the shared S3 gateway whose requests go through a tap.
func tapStore(t *testing.T) (*Store, *tap) {
	t.Helper()
	s := testStore(t)
	tp := &tap{inflight: map[string]int{}, peak: map[string]int{}}
	s.client = s3.New(s.client.Options(), func(o *s3.Options) {
		tp.next = o.HTTPClient
		o.HTTPClient = tp
	})
	return s, tp
}

func (tp *tap) Do(req *http.Request) (*http.Response, error) {
	loc := location(req.URL.Path)
	tp.mu.Lock()
	tp.reqs = append(tp.reqs, req.Method+" "+req.URL.Path)
	tp.inflight[loc]++
	tp.peak[loc] = max(tp.peak[loc], tp.inflight[loc])
	hook := tp.hook
	tp.mu.Unlock()
	defer func() {
		tp.mu.Lock()
		tp.inflight[loc]--
		tp.mu.Unlock()
	}()
	if hook != nil {
		if err := hook(req); err != nil {
			return nil, err
		}
	}
	return tp.next.Do(req)
}

func (tp *tap) setHook(h func(*http.Request) error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.hook = h
}

// writes are the PUT and DELETE requests under the location named loc, as "METHOD
// <step>/<file>".
func (tp *tap) writes(loc string) []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	for _, r := range tp.reqs {
		method, path, _ := strings.Cut(r, " ")
		if (method == http.MethodPut || method == http.MethodDelete) && location(path) == loc {
			parts := strings.SplitN(path, "/", 4) // "", bucket, location, step/file
			out = append(out, method+" "+strings.TrimLeft(parts[3], "0"))
		}
	}
	return out
}

func (tp *tap) peakInflight(loc string) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.peak[loc]
}

// location is the first path segment after the bucket: each test URI's one prefix.
func location(path string) string {
	parts := strings.SplitN(path, "/", 4)
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

func locOf(uri string) string {
	_, prefix, _ := ParseURI(uri)
	return prefix
}

func isDone(p *Pending) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

func waitOrFail(t *testing.T, p *Pending) error {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(time.Minute):
		t.Fatalf("save of step %d under %s never ended", p.Step, p.URI)
		return nil
	}
}

// Saves to one location run one at a time, in the order they were queued, each with
// its manifest last, while SaveAsync itself returns at once; another location is not
// held up.
func TestSaveAsyncIsOrderedPerLocation(t *testing.T) {
	s, tp := tapStore(t)
	ctx := ctxFor(t)
	uri, other := testURI(t), testURI(t)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tp.setHook(func(r *http.Request) error {
		// Hold the first upload under uri: the first file of step 1.
		if r.Method == http.MethodPut && location(r.URL.Path) == locOf(uri) {
			once.Do(func() { close(held); <-release })
		}
		return nil
	})

	files := func(step int64) map[string][]byte {
		return map[string][]byte{"a.bin": []byte(fmt.Sprint("a", step)), "b.bin": []byte(fmt.Sprint("b", step))}
	}
	var ps []*Pending
	for step := int64(1); step <= 3; step++ {
		ps = append(ps, s.SaveAsync(ctx, uri, step, files(step), map[string]float64{"step": float64(step)}))
	}
	<-held
	// Every call has returned while the first upload is held.
	for _, p := range ps {
		if isDone(p) {
			t.Errorf("step %d ended while the first upload is held", p.Step)
		}
	}
	// Another location goes ahead.
	if err := waitOrFail(t, s.SaveAsync(ctx, other, 7, files(7), nil)); err != nil {
		t.Fatalf("save under another location: %v", err)
	}
	if got := tp.writes(locOf(uri)); len(got) != 2 { // DELETE old manifest, PUT a.bin (held)
		t.Errorf("writes under the held location before the release = %q, want step 1's first two", got)
	}
	close(release)
	for _, p := range ps {
		if err := waitOrFail(t, p); err != nil {
			t.Fatalf("step %d: %v", p.Step, err)
		}
		if m := p.Manifest(); m.Step != p.Step || m.Ref != RefFor(uri, p.Step) || m.Metrics["step"] != float64(p.Step) {
			t.Errorf("step %d: manifest %+v", p.Step, m)
		}
	}

	var want []string
	for _, step := range []string{"1", "2", "3"} {
		want = append(want, "DELETE "+step+"/MANIFEST.json", "PUT "+step+"/a.bin", "PUT "+step+"/b.bin", "PUT "+step+"/MANIFEST.json")
	}
	if diff := cmp.Diff(want, tp.writes(locOf(uri))); diff != "" {
		t.Errorf("writes in order (-want +got):\n%s", diff)
	}
	if n := tp.peakInflight(locOf(uri)); n != 1 {
		t.Errorf("at most %d requests in flight under one location, want 1", n)
	}
	all, err := s.List(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{1, 2, 3}, steps(all)); diff != "" {
		t.Errorf("complete checkpoints (-want +got):\n%s", diff)
	}
}

// A save that fails leaves its step incomplete, reports the error on Wait, and does not
// stop the saves queued after it.
func TestSaveAsyncFailureIsReportedAndIsolated(t *testing.T) {
	s, tp := tapStore(t)
	ctx := ctxFor(t)
	uri := testURI(t)
	injected := errors.New("injected: connection reset")
	tp.setHook(func(r *http.Request) error {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, fmt.Sprintf("/%0*d/%s", StepDigits, 20, ManifestName)) {
			return injected
		}
		return nil
	})
	tests := map[int64]struct{ wantErr bool }{10: {}, 20: {wantErr: true}, 30: {}}
	ps := map[int64]*Pending{}
	for _, step := range []int64{10, 20, 30} {
		ps[step] = s.SaveAsync(ctx, uri, step, map[string][]byte{"w": []byte("weights")}, nil)
	}
	for step, tc := range tests {
		err := waitOrFail(t, ps[step])
		if got := err != nil; got != tc.wantErr {
			t.Errorf("step %d: error %v, want error: %v", step, err, tc.wantErr)
		}
		if tc.wantErr {
			if !errors.Is(err, injected) || !strings.Contains(err.Error(), "manifest") {
				t.Errorf("step %d: error %q, want the injected manifest failure", step, err)
			}
			if m := ps[step].Manifest(); m.Ref != "" {
				t.Errorf("failed step %d has a manifest %+v", step, m)
			}
		}
	}
	all, err := s.List(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{10, 30}, steps(all)); diff != "" {
		t.Errorf("complete checkpoints (-want +got):\n%s", diff)
	}
	if _, _, err := s.Load(ctx, RefFor(uri, 20)); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("load of the failed step = %v, want ErrNoCheckpoint", err)
	}
}

// Cancelling the context aborts the saves not yet ended: nothing they leave reads as
// complete.
func TestSaveAsyncCancelled(t *testing.T) {
	s, tp := tapStore(t)
	uri := testURI(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	held := make(chan struct{})
	var once sync.Once
	tp.setHook(func(r *http.Request) error {
		if r.Method == http.MethodPut {
			once.Do(func() { close(held) })
			<-r.Context().Done()
			return r.Context().Err()
		}
		return nil
	})
	first := s.SaveAsync(ctx, uri, 1, map[string][]byte{"w": []byte("1")}, nil)
	second := s.SaveAsync(ctx, uri, 2, map[string][]byte{"w": []byte("2")}, nil)
	<-held
	cancel()
	for _, p := range []*Pending{first, second} {
		if err := waitOrFail(t, p); !errors.Is(err, context.Canceled) {
			t.Errorf("step %d: %v, want context.Canceled", p.Step, err)
		}
	}
	tp.setHook(nil)
	if _, err := s.Latest(ctxFor(t), uri); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("latest after cancelled saves = %v, want ErrNoCheckpoint", err)
	}
}

// A malformed location fails at once, without touching S3.
func TestSaveAsyncInvalidURI(t *testing.T) {
	s, tp := tapStore(t)
	p := s.SaveAsync(ctxFor(t), "s3://Bad_Bucket/x", 1, map[string][]byte{"w": nil}, nil)
	if !isDone(p) {
		t.Fatal("the save of an invalid URI is still pending")
	}
	if err := p.Wait(); !errors.Is(err, ErrInvalidURI) {
		t.Errorf("error %v, want ErrInvalidURI", err)
	}
	if len(tp.reqs) != 0 {
		t.Errorf("requests sent: %q", tp.reqs)
	}
}
