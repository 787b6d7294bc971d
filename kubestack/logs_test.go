package kubestack

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/internal/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The API server's pods/log reaches kwok's server through the node's kubelet
// endpoint, and kwok serves the files of the pod's Logs object with the
// options of a kubelet: timestamps, sinceTime, follow, previous.
func TestPodLogsServedFromFiles(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	createPod(t, ctx, ns, gpuPod("talker", 0))
	waitPod(t, ctx, ns, "talker", "Running", phaseIs(corev1.PodRunning))

	dir := t.TempDir()
	cur, prev := filepath.Join(dir, "0.log"), filepath.Join(dir, "previous.log")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s)*time.Second + 123456789) }
	if err := AppendLog(prev, LogRecord{Time: at(-10), Text: "before the restart"}); err != nil {
		t.Fatal(err)
	}
	if err := AppendLog(cur, LogRecord{Time: at(0), Text: "one"}, LogRecord{Time: at(1), Stream: "stderr", Text: "two"},
		LogRecord{Time: at(2), Text: "three"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.SetPodLogs(ctx, ns, "talker", PodLogs{Container: "train", File: cur, PreviousFile: prev}); err != nil {
		t.Fatal(err)
	}
	pods := cluster.Client.CoreV1().Pods(ns)
	read := func(opts *corev1.PodLogOptions) (string, error) {
		b, err := pods.GetLogs("talker", opts).DoRaw(ctx)
		return string(b), err
	}
	// kwok picks the Logs object up from its watch.
	testutil.Eventually(t, 30*time.Second, "log served", func() error {
		got, err := read(&corev1.PodLogOptions{Container: "train"})
		if err != nil {
			return err
		}
		if got != "one\ntwo\nthree\n" {
			return fmt.Errorf("log %q", got)
		}
		return nil
	})

	since := metav1.NewTime(at(1))
	got, err := read(&corev1.PodLogOptions{Container: "train", Timestamps: true, SinceTime: &since})
	if err != nil {
		t.Fatal(err)
	}
	// sinceTime travels with whole seconds; kwok keeps lines at or after it.
	want := at(1).Format(time.RFC3339Nano) + " two\n" + at(2).Format(time.RFC3339Nano) + " three\n"
	if got != want {
		t.Fatalf("since %s with timestamps: got %q, want %q", since.Format(time.RFC3339), got, want)
	}
	if got, err := read(&corev1.PodLogOptions{Container: "train", Previous: true}); err != nil || got != "before the restart\n" {
		t.Fatalf("previous: %q, %v", got, err)
	}

	// A followed stream delivers what is appended after it opened.
	stream, err := pods.GetLogs("talker", &corev1.PodLogOptions{Container: "train", Follow: true, SinceTime: &since}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("follow stream ended")
			}
			return l
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		return ""
	}
	for _, w := range []string{"two", "three"} {
		if l := next(); l != w {
			t.Fatalf("followed line %q, want %q", l, w)
		}
	}
	if err := AppendLog(cur, LogRecord{Time: at(3), Text: "four"}); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "four" {
		t.Fatalf("appended line %q, want four", l)
	}
	stream.Close()
	for range lines { //nolint:revive // drain until the reader sees the close
	}

	// A pod without a Logs object has no log: an error, not an empty log.
	createPod(t, ctx, ns, gpuPod("mute", 0))
	waitPod(t, ctx, ns, "mute", "Running", phaseIs(corev1.PodRunning))
	if got, err := read2(pods.GetLogs("mute", &corev1.PodLogOptions{Container: "train"}).Stream(ctx)); err == nil {
		t.Fatalf("log of a pod without files: %q, want an error", got)
	} else {
		t.Logf("pod without files: %v", err)
	}
}

func read2(r io.ReadCloser, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return strings.TrimSpace(string(b)), err
}
