package main

import (
	"fmt"
	"io"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/api/recreate"
)

// printRecreate is dlc job get NAME -o command: a shell script that recreates the job
// with dlc, and the Go program that does the same with the SDK.
func printRecreate(w io.Writer, j *api.Job) error {
	s, err := recreate.Job(&j.Spec)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(w, s.Text())
	return err
}
