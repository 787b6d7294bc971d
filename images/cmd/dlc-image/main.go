// Command dlc-image builds OpenDLC's images without Docker (package images) and prints
// each one's reference and docker-archive tarball:
//
//	go run ./images/cmd/dlc-image [-layout DIR] dlc   # OpenDLC's image (task image)
//	go run ./images/cmd/dlc-image training            # the training image, both variants
//	go run ./images/cmd/dlc-image pause               # kubestack's sandbox image
//
// Load a tarball with `ctr -n k8s.io images import FILE` or `docker load -i FILE`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/opendlc/opendlc/images"
)

func main() {
	layoutDir := flag.String("layout", "", "dlc: also write the image as an OCI image layout in this directory")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: dlc-image [-layout DIR] dlc|training|pause|busybox\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var built []images.Image
	var err error
	switch flag.Arg(0) {
	case "dlc":
		var img images.Image
		img, err = images.DLC(ctx, *layoutDir)
		built = append(built, img)
	case "training":
		var t images.TrainingImages
		t, err = images.Training(ctx)
		built = append(built, t.Root, t.NonRoot)
	case "busybox":
		var img images.Image
		img, err = images.Busybox(ctx)
		built = append(built, img)
	case "pause":
		var img images.Image
		img, err = images.Pause(ctx)
		built = append(built, img)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlc-image:", err)
		os.Exit(1)
	}
	for _, img := range built {
		fmt.Printf("%s\t%s\n", img.Ref, img.Tarball)
	}
	if *layoutDir != "" {
		fmt.Printf("OCI layout: %s\n", *layoutDir)
	}
}
