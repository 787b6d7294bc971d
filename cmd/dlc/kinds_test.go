package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// Every kind is declared to the CLI (cliKinds, kinds.go): a noun named as the schemas
// package names the kind, on the root command, with a verb that takes the kind's
// document (-f FILE), get and list.
func TestEveryKindHasANoun(t *testing.T) {
	root := newRoot()
	declared := map[schemas.Kind]cliKind{}
	for _, k := range cliKinds {
		if _, dup := declared[k.kind]; dup {
			t.Errorf("kind %s is declared twice in cliKinds (cmd/dlc/kinds.go)", k.kind)
		}
		declared[k.kind] = k
		if !slices.Contains(schemas.Kinds(), k.kind) {
			t.Errorf("cliKinds declares kind %s, which is not in schemas.Kinds() (schemas/kinds.go)", k.kind)
		}
	}
	for _, kind := range schemas.Kinds() {
		k, ok := declared[kind]
		if !ok {
			t.Errorf("kind %s has no CLI noun: declare it in cliKinds (cmd/dlc/kinds.go) with a kindCommands value", kind)
			continue
		}
		info, _ := schemas.Info(kind)
		noun := k.command(&globals{})
		if noun.Name() != info.Noun {
			t.Errorf("kind %s: its CLI noun is %q, want %q (schemas/kinds.go)", kind, noun.Name(), info.Noun)
		}
		if c, _, err := root.Find([]string{info.Noun}); err != nil || c == root {
			t.Errorf("kind %s: dlc %s is not a command", kind, info.Noun)
		}
		var verbs []string
		takesDocument := false
		for _, sub := range noun.Commands() {
			verbs = append(verbs, sub.Name())
			if sub.Flags().Lookup("file") != nil && strings.Contains(sub.Use, "-f FILE") {
				takesDocument = true
			}
		}
		for _, v := range []string{"get", "list"} {
			if !slices.Contains(verbs, v) {
				t.Errorf("kind %s: dlc %s has no %s (verbs %q)", kind, info.Noun, v, verbs)
			}
		}
		if !takesDocument {
			t.Errorf("kind %s: no verb of dlc %s takes its document (-f FILE); verbs %q", kind, info.Noun, verbs)
		}
	}
}
