package devstack

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Options.Host: on the unspecified address the gateway answers on this host's
// other addresses too (where pods of a cluster can reach it), and Endpoint stays the
// loopback one for the control plane.
func TestS3ListensOnHost(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	srv, err := StartS3(ctx, S3Options{Dir: t.TempDir() + "/s3", Host: "0.0.0.0", Buckets: []string{"dlc"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, err := url.Parse(srv.Endpoint)
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("endpoint %q, want the loopback address", srv.Endpoint)
	}
	other := nonLoopbackIPv4(t)
	if other == "" {
		t.Fatal("this host has no non-loopback IPv4 address to reach the gateway at")
	}
	remote := *srv
	remote.Endpoint = "http://" + net.JoinHostPort(other, u.Port())
	if _, err := remote.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("dlc")}); err != nil {
		t.Errorf("bucket through %s: %v", remote.Endpoint, err)
	}
}

func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !strings.HasPrefix(n.IP.String(), "169.254.") {
			return n.IP.String()
		}
	}
	return ""
}
