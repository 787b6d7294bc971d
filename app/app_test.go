package app_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/app"
)

// A certificate without its key is refused before anything is dialled, and the
// listener handed to Start is closed.
func TestStartRefusesHalfTLSAndClosesListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = app.Start(context.Background(), app.Config{
		TemporalAddress: "127.0.0.1:1", NATSURL: "nats://127.0.0.1:1",
		API: &app.APIConfig{Listener: ln, TLSCertFile: "cert.pem"},
	})
	if err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("Start = %v, want a TLS error", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after a failed Start = %v, want net.ErrClosed", err)
	}
}
