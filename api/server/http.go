package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"
)

// HTTPServer returns an http.Server for the API with its limits: headers read within 10
// seconds and at most 64 KiB, bodies read within 30 seconds (see withAuth), idle
// connections closed after 2 minutes. There is no write timeout, because logs and
// events stream for as long as the caller follows them. With tlsConfig (see LoadTLS)
// it serves HTTPS.
func (s *Server) HTTPServer(tlsConfig *tls.Config) *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		TLSConfig:         tlsConfig,
		ErrorLog:          log.New(slogWriter{s}, "", 0),
	}
}

// slogWriter sends the http.Server's own complaints (TLS handshake errors...) to the
// logger.
type slogWriter struct{ s *Server }

func (w slogWriter) Write(p []byte) (int, error) {
	w.s.opts.Logger.Warn("http server", "message", string(p))
	return len(p), nil
}

// LoadTLS reads a PEM certificate (chain) and key for serving HTTPS; nil, nil when
// both are empty. TLS 1.2 is the minimum.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("server: TLS needs both a certificate and a key file")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: load TLS certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Serve serves srv on ln (over TLS when srv.TLSConfig is set) until ctx ends, then
// shuts down gracefully within 5 seconds.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
