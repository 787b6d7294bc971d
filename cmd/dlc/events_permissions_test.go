package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// `dlc event permissions` prints a workspace's grant, and refuses a -w that is not a
// workspace name (a wildcard would grant every workspace), naming the flag.
func TestEventPermissionsRefusesWildcards(t *testing.T) {
	for _, ws := range []string{"*", ">", "a.b", "a.*", "", "UPPER", "-a", strings.Repeat("a", 64)} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"event", "permissions", "-w", ws})
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "--workspace") {
			t.Errorf("-w %q: error %v, want one naming --workspace", ws, err)
		}
		if out.Len() != 0 {
			t.Errorf("-w %q printed %s", ws, out.String())
		}
	}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"event", "permissions", "-w", "vision"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Permissions struct {
			Publish, Subscribe struct{ Allow, Deny []string }
		}
		InboxPrefix string `json:"inbox_prefix"`
		APIPrefix   string `json:"api_prefix"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	for _, s := range append(got.Permissions.Publish.Allow, got.Permissions.Subscribe.Allow...) {
		if strings.Contains(s, "DELETE") || strings.Contains(s, "STREAM.") || strings.Contains(s, "LIST") || strings.Contains(s, "NAMES") {
			t.Errorf("grant holds %s", s)
		}
	}
	if got.InboxPrefix != "_INBOX_vision" || len(got.Permissions.Subscribe.Allow) != 2 {
		t.Errorf("grant %+v", got)
	}
	// JetStream only through the reader gate, no audit, no trigger events without
	// --trigger (issue 33, findings 7 and 8).
	if got.APIPrefix != "$DLC.JS.vision.API" || !slices.Equal(got.Permissions.Subscribe.Deny, []string{"dlc.vision.audit"}) {
		t.Errorf("api prefix %q, subscribe deny %v", got.APIPrefix, got.Permissions.Subscribe.Deny)
	}
	for _, s := range got.Permissions.Publish.Allow {
		if strings.HasPrefix(s, "$JS.") || strings.Contains(s, ".trigger.") {
			t.Errorf("grant holds %s", s)
		}
	}
	root = newRoot()
	out.Reset()
	root.SetOut(&out)
	root.SetArgs([]string{"event", "permissions", "-w", "vision", "--trigger"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"dlc.vision.trigger.*"`) {
		t.Errorf("--trigger grants no trigger events:\n%s", out.String())
	}
}
