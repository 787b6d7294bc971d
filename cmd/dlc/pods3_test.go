package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/embedded"
)

// A bad --pod-s3-endpoint, or one without --kubeconfig, is refused before anything
// starts, naming the flag.
func TestPodS3EndpointIsChecked(t *testing.T) {
	for _, tc := range []struct{ endpoint, kubeconfig, want string }{
		{"s3.storage.svc:9000", "kc", "want an http:// or https:// URL"},
		{"ftp://s3.storage.svc", "kc", "want an http:// or https:// URL"},
		{"http://", "kc", "want an http:// or https:// URL"},
		{"http://s3.storage.svc:9000/bucket", "kc", "no path"},
		{"http://s3.storage.svc:9000", "", "add --kubeconfig"},
	} {
		for _, cmd := range []string{"up", "worker"} {
			c := newRoot()
			args := []string{cmd, "--pod-s3-endpoint", tc.endpoint}
			if tc.kubeconfig != "" {
				args = append(args, "--kubeconfig", tc.kubeconfig)
			}
			if cmd == "up" {
				args = append(args, "--dir", t.TempDir())
			}
			c.SetArgs(args)
			err := c.Execute()
			if err == nil || !strings.Contains(err.Error(), "--pod-s3-endpoint") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("dlc %s %v: error %v, want one naming the flag and %q", cmd, args[1:], err, tc.want)
			}
		}
	}
	for _, ok := range []string{"", "http://s3.storage.svc:9000", "https://s3.example.com/", "http://10.0.0.5:9000"} {
		if err := checkPodS3Endpoint(ok, "kc"); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// `dlc worker --pod-s3-endpoint` gives every workspace its own S3 account with the pod
// endpoint in place of its own.
func TestWorkerS3Credentials(t *testing.T) {
	f := workerS3Credentials(checkpoint.Config{Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", AccessKey: "k", SecretKey: "s"}, "http://s3.storage.svc:9000")
	for _, ws := range []string{"vision", "nlp"} {
		c, err := f(context.Background(), ws)
		if err != nil || c.Endpoint != "http://s3.storage.svc:9000" || c.Region != "eu-west-1" || c.AccessKeyID != "k" || c.SecretAccessKey != "s" {
			t.Errorf("%s: %+v, %v", ws, c, err)
		}
	}
}

// The banner of `dlc up --kubeconfig` names the pods' endpoint, and warns when no pod
// can reach it.
func TestPrintPodS3WarnsOnLoopback(t *testing.T) {
	for endpoint, warn := range map[string]bool{
		"http://127.0.0.1:41234": true, "http://localhost:9000": true, "http://[::1]:9000": true,
		"http://s3.storage.svc:9000": false, "http://192.168.1.10:9000": false,
	} {
		var b bytes.Buffer
		printPodS3(&b, &embedded.Embedded{PodS3Endpoint: endpoint})
		if !strings.Contains(b.String(), "Pod S3       "+endpoint) || strings.Contains(b.String(), "warning") != warn {
			t.Errorf("%s: %q", endpoint, b.String())
		}
	}
}

// A bad --s3-addr is refused before anything starts.
func TestUpRefusesBadS3Addr(t *testing.T) {
	for _, addr := range []string{"nonsense", "127.0.0.1:http", "127.0.0.1:70000"} {
		c := newRoot()
		c.SetArgs([]string{"up", "--s3-addr", addr, "--dir", t.TempDir(), "--addr", "127.0.0.1:0"})
		if err := c.Execute(); err == nil || !strings.Contains(err.Error(), "S3 address \""+addr+"\"") {
			t.Errorf("--s3-addr %s: error %v", addr, err)
		}
	}
}
