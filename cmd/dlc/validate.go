package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/schemas"
)

func newValidateCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a spec file of any kind and print every problem with its field path",
		Long: "Check a TrainingJob, Experiment, Schedule, Pipeline, Trigger or NotificationRule document\n" +
			"(the kind field says which) without contacting the server. Exits 1 when it has problems.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			if _, err := schemas.DecodeValid(data, schemas.Decode); err != nil {
				printSpecErrors(cmd, file, err)
				return exitError{1}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", file)
			return nil
		},
	}
	fileFlag(cmd, &file, "spec")
	return cmd
}

// fileFlag adds the required -f FILE flag: a what file (YAML or JSON), - for stdin.
func fileFlag(cmd *cobra.Command, file *string, what string) {
	cmd.Flags().StringVarP(file, "file", "f", "", what+" file (YAML or JSON); - for stdin")
	_ = cmd.MarkFlagRequired("file")
}

func readSpecFile(file string) ([]byte, error) {
	if file == "-" {
		return readAll(os.Stdin)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return data, nil
}

func printSpecErrors(cmd *cobra.Command, file string, err error) {
	w := cmd.ErrOrStderr()
	if list, ok := errors.AsType[schemas.ErrorList](err); ok {
		fmt.Fprintf(w, "%s: %d error(s)\n", file, len(list))
		for _, fe := range list {
			fmt.Fprintf(w, "  %s\n", fe.Error())
		}
		return
	}
	fmt.Fprintf(w, "%s: %v\n", file, err)
}
