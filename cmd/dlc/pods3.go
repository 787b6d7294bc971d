package main

import (
	"fmt"
	"io"
	"net"
	"net/url"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/embedded"
)

// podS3EndpointUsage is the help of --pod-s3-endpoint, after the command's own words.
const podS3EndpointUsage = "S3 endpoint URL as pods reach it; pods get it, the region and the access key pair from the Secret " +
	kube.S3SecretName + " the worker writes into each workspace namespace"

// checkPodS3Endpoint refuses a --pod-s3-endpoint that is not an http(s) URL with a
// host, or that is given without --kubeconfig (it would change nothing).
func checkPodS3Endpoint(endpoint, kubeconfig string) error {
	if endpoint == "" {
		return nil
	}
	if kubeconfig == "" {
		return fmt.Errorf("--pod-s3-endpoint %q: only pods use it; add --kubeconfig", endpoint)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("--pod-s3-endpoint %q: want an http:// or https:// URL with a host and no path, such as http://s3.storage.svc:9000", endpoint)
	}
	return nil
}

// workerS3Credentials are the S3 credentials `dlc worker --pod-s3-endpoint` gives
// every workspace's pods: its own (s3, from its environment) with endpoint in place of
// its endpoint.
func workerS3Credentials(s3 checkpoint.Config, endpoint string) kube.S3CredentialsFunc {
	return kube.StaticS3Credentials(kube.S3Credentials{
		Endpoint: endpoint, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey,
	})
}

// printPodS3 says, for `dlc up --kubeconfig`, which S3 endpoint pods get, and warns
// when it is a loopback address, which no pod reaches.
func printPodS3(w io.Writer, e *embedded.Embedded) {
	fmt.Fprintf(w, "  Pod S3       %s (from Secret %s in each workspace namespace)\n", e.PodS3Endpoint, kube.S3SecretName)
	if u, err := url.Parse(e.PodS3Endpoint); err == nil {
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback()) {
			fmt.Fprintf(w, "  warning: pods cannot reach a loopback S3 endpoint; listen with --s3-addr on an address they can reach, or pass --pod-s3-endpoint\n")
		}
	}
}
