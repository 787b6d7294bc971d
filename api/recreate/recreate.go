// Package recreate writes what recreates a job: a dlc command line and a Go program that
// submits the same spec with the SDK (package client). `dlc job get NAME -o command` and
// client.JobCommand print it; it depends on the spec only, so a web console can offer
// the same text.
package recreate

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/schemas"
)

// Script is what recreates a job.
type Script struct {
	// Workspace and Name are the job's.
	Workspace string `json:"workspace"`
	Name      string `json:"name"`
	// DLC is a shell command: dlc job submit with the spec on its standard input (a
	// quoted here-document, so nothing in the spec is expanded).
	DLC string `json:"dlc"`
	// Go is a Go program that submits the spec with the SDK; it reads the server and the
	// token from DLC_SERVER and DLC_TOKEN, as dlc does.
	Go string `json:"go"`
}

// defaultServer is the API address dlc and the program use without DLC_SERVER (the
// embedded stack's, embedded.DefaultAPIAddr).
const defaultServer = "http://127.0.0.1:8480"

// Job returns the dlc command and the Go program that submit job's spec again: its
// apiVersion, kind, metadata (name, workspace, labels, annotations) and spec, without
// the status.
func Job(job *schemas.TrainingJob) (Script, error) {
	doc, err := yaml.Marshal(job)
	if err != nil {
		return Script{}, fmt.Errorf("recreate: %w", err)
	}
	spec := string(doc)
	return Script{
		Workspace: job.Metadata.Workspace, Name: job.Metadata.Name,
		DLC: dlcCommand(spec), Go: goProgram(spec),
	}, nil
}

// Text is the script as dlc prints it: a shell script whose commands recreate the job,
// with the Go program after it in a here-document that the shell skips, so the whole
// text can be run with sh as it is and the program copied out of it.
func (s Script) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# Recreates the TrainingJob %s/%s with the dlc CLI (--server or DLC_SERVER, DLC_TOKEN as usual).\n",
		s.Workspace, s.Name)
	b.WriteString(s.DLC)
	b.WriteString("\n# The same with the Go SDK: save the program below as main.go and go run it.\n")
	b.WriteString(hereDoc(": ", s.Go, "OPENDLC_GO"))
	return b.String()
}

// dlcCommand is dlc job submit with spec on its standard input.
func dlcCommand(spec string) string {
	return hereDoc("dlc job submit -f - ", spec, "OPENDLC_SPEC")
}

// hereDoc writes cmd with body as a quoted here-document, whose delimiter is tag made
// unlike any line of body.
func hereDoc(cmd, body, tag string) string {
	lines := strings.Split(body, "\n")
	for slices.Contains(lines, tag) {
		tag += "_"
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return cmd + "<<'" + tag + "'\n" + body + tag + "\n"
}

// goProgram is a Go program that submits spec.
func goProgram(spec string) string {
	return `package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/opendlc/opendlc/client"
)

// spec is the job's spec, as dlc job get -o yaml prints it.
const spec = ` + goRawString(spec) + `

func main() {
	server := os.Getenv("DLC_SERVER")
	if server == "" {
		server = "` + defaultServer + `"
	}
	c, err := client.New(server, client.WithToken(os.Getenv("DLC_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.SubmitJob(context.Background(), []byte(spec))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("job %s/%s submitted (uid %s)\n", job.Spec.Metadata.Workspace, job.Spec.Metadata.Name, job.UID)
}
`
}

// goRawString quotes s as a Go raw string literal; a backquote in s, which a raw string
// cannot hold, is spliced in as an interpreted string.
func goRawString(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "` + \"`\" + `") + "`"
}
