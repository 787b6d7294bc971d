package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/internal/testcert"
)

// The CLI talks to the API only through the SDK (client/): no file of the command
// imports net/http.
func TestCLIUsesOnlyTheSDK(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "net/http" || strings.HasPrefix(path, "net/http/") {
				t.Errorf("%s imports %s: call the API through client/ instead", f, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}

// The Temporal TLS flags give a client certificate, the CA and the server name; no
// flag gives plain text; a certificate without its key is refused.
func TestTemporalTLSFlags(t *testing.T) {
	dir := t.TempDir()
	cert, key := testcert.Write(t, dir, "temporal.internal")
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		flags   TemporalTLSConfig
		wantTLS bool
		wantErr bool
	}{
		"plain text": {},
		"mutual TLS": {flags: TemporalTLSConfig{Cert: cert, Key: key, CA: cert, ServerName: "temporal.internal"}, wantTLS: true},
		"CA only":    {flags: TemporalTLSConfig{CA: cert}, wantTLS: true},
		"no key":     {flags: TemporalTLSConfig{Cert: cert}, wantErr: true},
		"bad CA":     {flags: TemporalTLSConfig{CA: empty}, wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := (&Config{Temporal: TemporalConfig{TLS: tt.flags}}).temporalTLS()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if (cfg != nil) != tt.wantTLS {
				t.Fatalf("TLS config %v, want TLS %v", cfg, tt.wantTLS)
			}
			if cfg == nil {
				return
			}
			if tt.flags.Cert != "" && len(cfg.Certificates) != 1 {
				t.Errorf("%d client certificates", len(cfg.Certificates))
			}
			if tt.flags.CA != "" && cfg.RootCAs == nil {
				t.Errorf("no CA pool")
			}
			if cfg.ServerName != tt.flags.ServerName {
				t.Errorf("server name %q", cfg.ServerName)
			}
		})
	}
}
