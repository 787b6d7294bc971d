// Command etcd is a minimal single-member etcd server around
// go.etcd.io/etcd/server/v3/embed, built at the version that k8s.io/kubernetes
// itself is tested with, for the test control plane started by kubestack.
//
//	etcd --data-dir DIR --listen-client-urls http://127.0.0.1:PORT --listen-peer-urls http://127.0.0.1:PORT
//
// It serves until SIGINT or SIGTERM, then closes the server cleanly.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	var (
		name      = flag.String("name", "default", "member name")
		dataDir   = flag.String("data-dir", "", "directory for the member's data (required)")
		clientURL = flag.String("listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to serve clients on; also advertised")
		peerURL   = flag.String("listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to serve peers on; also advertised")
		noFsync   = flag.Bool("unsafe-no-fsync", false, "skip fsync: faster, loses data on a machine crash (tests only)")
		quota     = flag.Int64("quota-backend-bytes", 0, "backend size quota in bytes (0: etcd's default)")
		logLevel  = flag.String("log-level", "warn", "debug, info, warn or error")
		startWait = flag.Duration("start-timeout", time.Minute, "how long to wait for the server to be ready")
	)
	flag.Parse()
	if *dataDir == "" {
		fail("--data-dir is required")
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = parseURLs(*clientURL)
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = parseURLs(*peerURL)
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = *noFsync
	cfg.QuotaBackendBytes = *quota
	cfg.LogLevel = *logLevel
	// Only etcd's own flag parsing sets this default; left at zero, every
	// request would be logged as slow.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fail(err.Error())
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", *clientURL)
	case <-time.After(*startWait):
		e.Server.Stop()
		fail("server took longer than " + startWait.String() + " to start")
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %s, stopping\n", s)
		e.Close()
	case err := <-e.Err():
		e.Close()
		fail(err.Error())
	}
}

func parseURLs(s string) []url.URL {
	var urls []url.URL
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil {
			fail(fmt.Sprintf("bad URL %q: %v", part, err))
		}
		urls = append(urls, *u)
	}
	return urls
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "etcd:", msg)
	os.Exit(1)
}
