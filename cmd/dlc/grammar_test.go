package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeAPI answers the API calls of the commands under test with canned JSON, and
// records every request as "METHOD PATH?QUERY BODY".
type fakeAPI struct {
	mu       sync.Mutex
	requests []string
}

const jobJSON = `{"uid":"u1","spec":{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob",` +
	`"metadata":{"name":"train","workspace":"ml"},"spec":{"framework":"custom","command":["true"],"roles":{"worker":{"replicas":1}}}},` +
	`"status":{"phase":"Running","attempt":1}}`

var fakeAnswers = map[string]string{
	"POST /v1/jobs":                                  jobJSON,
	"GET /v1/workspaces/ml/jobs":                     `{"items":[{"name":"train","workspace":"ml","uid":"u1","phase":"Running"}]}`,
	"GET /v1/workspaces/ml/jobs/train":               jobJSON,
	"POST /v1/workspaces/ml/jobs/train/stop":         `{"phase":"Stopped"}`,
	"DELETE /v1/workspaces/ml/jobs/train":            ``,
	"POST /v1/workspaces/ml/jobs/train/clone":        strings.ReplaceAll(jobJSON, `"name":"train"`, `"name":"bigger"`),
	"GET /v1/workspaces/ml/notificationrules":        `{"items":[{"metadata":{"name":"r1","workspace":"ml"},"spec":{"subject":"s.x","match":{"types":["t"]}}}]}`,
	"DELETE /v1/workspaces/ml/experiments/tune":      ``,
	"GET /v1/workspaces/ml/experiments":              `{"items":[{"name":"tune","workspace":"ml","phase":"Running"}],"nextPageToken":"p2"}`,
	"GET /v1/workspaces/ml/experiments?pageToken=p2": `{"items":[{"name":"tune2","workspace":"ml","phase":"Succeeded"}]}`,
	"GET /v1/workspaces/ml/triggers":                 `{"items":[{"metadata":{"name":"t1","workspace":"ml"},"spec":{"subject":"dlc.ml.trigger.x"}}]}`,
	"GET /v1/workspaces/ml/triggers/t1":              `{"metadata":{"name":"t1","workspace":"ml"},"spec":{"subject":"dlc.ml.trigger.x"}}`,
	"GET /v1/workspaces/ml/pipelines":                `{"items":[{"name":"p1","workspace":"ml","phase":"Running","startTime":"2026-01-01T00:00:00Z"}]}`,
	"GET /v1/tokens":                                 `{"items":[{"name":"alice","workspace":"ml","role":"viewer"}]}`,
	"DELETE /v1/tokens/alice":                        ``,
	"DELETE /v1/workspaces/ml/pipelines/p1":          ``,
	"DELETE /v1/workspaces/old":                      ``,
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		key += "?" + r.URL.RawQuery
	}
	f.mu.Lock()
	f.requests = append(f.requests, strings.TrimSpace(key+" "+string(body)))
	f.mu.Unlock()
	answer, ok := fakeAnswers[key]
	if !ok { // the answer to the path, whatever the query
		answer, ok = fakeAnswers[r.Method+" "+r.URL.Path]
	}
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"NotFound","message":"no route `+key+`"}}`)
		return
	}
	if answer == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, answer)
}

// dlcAgainst runs the CLI with args against the fake API; it returns the output and
// the requests the command made.
func dlcAgainst(t *testing.T, f *fakeAPI, url string, args ...string) (string, []string) {
	t.Helper()
	f.mu.Lock()
	f.requests = nil
	f.mu.Unlock()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--server", url, "--token", "tok", "-w", "ml"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("dlc %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return out.String(), append([]string(nil), f.requests...)
}

// The noun-first commands and the spellings that came before them (verb first, plural
// nouns, rules) make the same calls and print the same.
func TestOldAndNewSpellingsAgree(t *testing.T) {
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("kind: TrainingJob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		spellings [][]string
		want      string // in the output
		calls     []string
	}{
		{
			spellings: [][]string{{"job", "submit", "-f", spec}, {"job", "apply", "-f", spec}, {"jobs", "create", "-f", spec}},
			want:      "job ml/train submitted (uid u1)\n",
			calls:     []string{"POST /v1/jobs kind: TrainingJob"},
		},
		{
			spellings: [][]string{{"job", "list"}, {"jobs", "ls"}},
			want:      "NAME   PHASE    AGE  DURATION\ntrain  Running  -    -\n",
			calls:     []string{"GET /v1/workspaces/ml/jobs"},
		},
		{
			spellings: [][]string{{"job", "list", "--phase", "Running", "-l", "a=b"}, {"jobs", "list", "--phase", "Running", "--label", "a=b"}},
			want:      "train",
			calls:     []string{"GET /v1/workspaces/ml/jobs?label=a%3Db&phase=Running"},
		},
		{
			spellings: [][]string{{"job", "get", "train", "-o", "yaml"}, {"jobs", "get", "train", "-o", "yaml"}},
			want:      "kind: TrainingJob\nmetadata:\n  name: train\n  workspace: ml\n",
			calls:     []string{"GET /v1/workspaces/ml/jobs/train"},
		},
		{
			spellings: [][]string{{"job", "describe", "train"}},
			want:      "Phase:       Running\n",
			calls:     []string{"GET /v1/workspaces/ml/jobs/train"},
		},
		{
			spellings: [][]string{{"job", "stop", "train", "--reason", "why"}},
			want:      "job train: Stopped\n",
			calls:     []string{`POST /v1/workspaces/ml/jobs/train/stop {"reason":"why"}`},
		},
		{
			spellings: [][]string{{"job", "delete", "train"}, {"jobs", "delete", "train"}},
			want:      "job train deleted\n",
			calls:     []string{"DELETE /v1/workspaces/ml/jobs/train"},
		},
		{
			spellings: [][]string{{"job", "clone", "train", "--name", "bigger"}},
			want:      "job ml/bigger cloned from train (uid u1)\n",
			calls:     []string{`POST /v1/workspaces/ml/jobs/train/clone {"name":"bigger"}`},
		},
		{
			spellings: [][]string{{"rule", "list"}, {"rules", "list"}, {"notificationrules", "ls"}},
			want:      "NAME  TYPES  PHASES  TARGET  ALERT\nr1    t              s.x     \n",
			calls:     []string{"GET /v1/workspaces/ml/notificationrules"},
		},
		{
			spellings: [][]string{{"experiment", "delete", "tune"}, {"experiments", "delete", "tune"}, {"exp", "delete", "tune"}},
			want:      "experiment tune deleted\n",
			calls:     []string{"DELETE /v1/workspaces/ml/experiments/tune"},
		},
		{ // every page
			spellings: [][]string{{"experiment", "list"}, {"experiments", "list"}},
			want:      "tune2  Succeeded",
			calls:     []string{"GET /v1/workspaces/ml/experiments", "GET /v1/workspaces/ml/experiments?pageToken=p2"},
		},
		{ // --selector, pipeline list's name of --label before
			spellings: [][]string{{"pipeline", "list", "-l", "a=b"}, {"pipelines", "list", "--selector", "a=b"}, {"pipeline", "ls", "--label", "a=b"}},
			want:      "p1    Running",
			calls:     []string{"GET /v1/workspaces/ml/pipelines?label=a%3Db"},
		},
		{
			spellings: [][]string{{"pipeline", "delete", "p1"}, {"pipelines", "delete", "p1"}},
			want:      "pipeline p1 deleted\n",
			calls:     []string{"DELETE /v1/workspaces/ml/pipelines/p1"},
		},
		{ // the name is the workspace, whatever -w says
			spellings: [][]string{{"workspace", "delete", "old"}, {"workspaces", "delete", "old"}, {"ws", "delete", "old"}},
			want:      "workspace old deleted\n",
			calls:     []string{"DELETE /v1/workspaces/old"},
		},
		{ // a trigger or a rule is shown as YAML
			spellings: [][]string{{"trigger", "get", "t1"}, {"triggers", "get", "t1"}},
			want:      "subject: dlc.ml.trigger.x\n",
			calls:     []string{"GET /v1/workspaces/ml/triggers/t1"},
		},
		{ // revoke, and delete as its other name
			spellings: [][]string{{"token", "revoke", "alice"}, {"tokens", "delete", "alice"}},
			want:      "token alice revoked\n",
			calls:     []string{"DELETE /v1/tokens/alice"},
		},
		{
			spellings: [][]string{{"event", "permissions"}, {"events", "permissions"}},
			want:      `"inbox_prefix"`,
		},
	}
	for _, tt := range tests {
		first, _ := dlcAgainst(t, f, srv.URL, tt.spellings[0]...)
		for _, args := range tt.spellings {
			out, calls := dlcAgainst(t, f, srv.URL, args...)
			if !strings.Contains(out, tt.want) {
				t.Errorf("dlc %s printed\n%s\nwant it to contain\n%s", strings.Join(args, " "), out, tt.want)
			}
			if out != first {
				t.Errorf("dlc %s printed\n%s\nbut dlc %s\n%s", strings.Join(args, " "), out, strings.Join(tt.spellings[0], " "), first)
			}
			if diff := cmp.Diff(tt.calls, calls); diff != "" {
				t.Errorf("dlc %s: calls (-want +got):\n%s", strings.Join(args, " "), diff)
			}
		}
	}
}

// -o json and -o yaml print the object or the list wherever a command prints one.
func TestOutputFormats(t *testing.T) {
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	for _, args := range [][]string{
		{"job", "list"}, {"experiment", "list"}, {"trigger", "list"}, {"rule", "list"}, {"token", "list"},
		{"job", "get", "train"}, {"job", "describe", "train"}, {"job", "stop", "train"}, {"job", "clone", "train", "--name", "bigger"},
		{"trigger", "get", "t1"},
	} {
		out, _ := dlcAgainst(t, f, srv.URL, append(args, "-o", "json")...)
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("dlc %s -o json: %v\n%s", strings.Join(args, " "), err, out)
		}
		if strings.HasSuffix(args[1], "list") {
			if _, ok := v["items"]; !ok {
				t.Errorf("dlc %s -o json has no items: %s", strings.Join(args, " "), out)
			}
		}
		yout, _ := dlcAgainst(t, f, srv.URL, append(args, "-o", "yaml")...)
		if strings.HasPrefix(yout, "{") || !strings.Contains(yout, ": ") {
			t.Errorf("dlc %s -o yaml:\n%s", strings.Join(args, " "), yout)
		}
	}
	// Tokens: every workspace's unless -w is given.
	_, calls := dlcAgainst(t, f, srv.URL, "token", "list")
	if diff := cmp.Diff([]string{"GET /v1/tokens?workspace=ml"}, calls); diff != "" {
		t.Errorf("token list -w ml (-want +got):\n%s", diff)
	}
}

// The old spellings are hidden from help; the nouns are listed.
func TestHelpListsNouns(t *testing.T) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, noun := range []string{"job", "experiment", "schedule", "pipeline", "trigger", "rule", "workspace", "token", "quota", "event"} {
		if !strings.Contains(help, "\n  "+noun+" ") {
			t.Errorf("help lacks %s:\n%s", noun, help)
		}
	}
	for _, old := range []string{"submit", "describe", "rules", "clone"} {
		if strings.Contains(help, "\n  "+old+" ") {
			t.Errorf("help lists the old %s:\n%s", old, help)
		}
	}
}

// The verb-first spellings from before the nouns (dlc submit, dlc get job NAME) were
// dropped before the first release: each is an unknown command now.
func TestNoVerbFirstSpellings(t *testing.T) {
	for _, verb := range []string{"submit", "list", "ls", "describe", "logs", "stop", "delete", "clone", "apply", "create", "get"} {
		root := newRoot()
		if cmd, _, err := root.Find([]string{verb}); err == nil && cmd != root {
			t.Errorf("dlc %s is a command (%s), want unknown", verb, cmd.CommandPath())
		}
	}
}
