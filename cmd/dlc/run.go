package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

func newRunCmd(g *globals) *cobra.Command {
	var file, dir string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "run -f FILE",
		Short: "Submit a job, show its progress and logs, and exit 0 only if it succeeds",
		Long: "Submit a job, show its progress and logs, and exit 0 only if it succeeds.\n" +
			"When no API server answers (and --server is not set), run starts the embedded stack for\n" +
			"the duration of the run; its logs go to dlc-run.log in its state directory (-v: to stderr).\n" +
			"A finished job of the same name is replaced.",
		Args: cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			job, err := schemas.DecodeValid(data, schemas.DecodeTrainingJob)
			if err != nil {
				printSpecErrors(cmd, file, err)
				return exitError{1}
			}
			ctx := cmd.Context()
			out := &syncWriter{w: cmd.OutOrStdout()}
			c, cleanup, ephemeral, err := connectOrStart(ctx, g, c, dir, verbose, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer cleanup()
			return runJob(ctx, c, job, data, out, ephemeral)
		}),
	}
	fileFlag(cmd, &file, "spec")
	cmd.Flags().StringVar(&dir, "dir", embedded.DefaultDir(), "state directory of the embedded stack, when one is started")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the embedded stack's logs (info level) instead of writing them to its state directory")
	return cmd
}

// connectOrStart returns c, the client of the configured server, or starts the embedded
// stack when no server was configured and none answers at the default address.
func connectOrStart(ctx context.Context, g *globals, c *client.Client, dir string, verbose bool, errw io.Writer) (*client.Client, func(), bool, error) {
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	herr := c.Health(hctx)
	cancel()
	if herr == nil {
		return c, func() {}, false, nil
	}
	if g.server != "" {
		return nil, nil, false, fmt.Errorf("server %s does not answer: %w", g.server, herr)
	}
	fmt.Fprintf(errw, "no OpenDLC server at %s: starting the embedded stack in %s\n", g.serverURL(), dir)
	fmt.Fprintln(errw, "(the first start builds the Temporal and S3 servers from source: a few minutes)")
	logger, logFile, closeLog, err := stackLogger(verbose, dir)
	if err != nil {
		return nil, nil, false, err
	}
	start := time.Now()
	e, err := embedded.Start(withBuildProgress(ctx, errw), embedded.Config{Dir: dir, APIAddr: "127.0.0.1:0", Logger: logger})
	if err != nil {
		closeLog()
		return nil, nil, false, err
	}
	fmt.Fprintf(errw, "embedded stack up in %s (API %s, S3 %s)\n", time.Since(start).Round(100*time.Millisecond), e.APIURL, e.Stack.S3.Endpoint)
	if logFile != "" {
		fmt.Fprintf(errw, "its logs: %s (-v prints them)\n", logFile)
	}
	c, err = client.New(e.APIURL, client.WithToken(e.AdminToken))
	if err != nil {
		e.Close()
		closeLog()
		return nil, nil, false, err
	}
	return c, func() { _ = e.Close(); closeLog() }, true, nil
}

func runJob(ctx context.Context, c *client.Client, job *schemas.TrainingJob, spec []byte, out io.Writer, ephemeral bool) error {
	ws, name := job.Metadata.Workspace, job.Metadata.Name
	if old, err := c.GetJob(ctx, ws, name); err == nil {
		if !old.Status.Phase.Terminal() {
			return fmt.Errorf("job %s/%s is %s: stop it or choose another name", ws, name, old.Status.Phase)
		}
		fmt.Fprintf(out, "replacing finished job %s/%s (%s)\n", ws, name, old.Status.Phase)
		if err := c.DeleteJob(ctx, ws, name); err != nil {
			return err
		}
	} else if !client.IsNotFound(err) {
		return err
	}
	submitted := time.Now()
	j, err := c.SubmitJob(ctx, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "job %s/%s submitted (uid %s)\n", ws, name, j.UID)

	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		err := c.Logs(ctx, ws, name, client.LogOptions{Follow: true}, func(r events.LogRecord) error {
			_, err := fmt.Fprintln(out, formatRunLine(r))
			return err
		})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(out, "log stream ended: %v\n", err)
		}
	}()
	seen := 0
	final, err := c.WaitJob(ctx, ws, name, 300*time.Millisecond, func(j *api.Job) {
		for ; seen < len(j.Status.Timeline); seen++ {
			e := j.Status.Timeline[seen]
			fmt.Fprintf(out, "%s  %-10s %s\n", e.Time.Local().Format("15:04:05.000"), e.Phase, e.Message)
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(c, ws, name, out, ephemeral)
		}
		return err
	}
	select {
	case <-logsDone:
	case <-time.After(10 * time.Second):
	}
	st := final.Status
	fmt.Fprintf(out, "job %s %s in %s", name, st.Phase, time.Since(submitted).Round(10*time.Millisecond))
	if st.ExitCode != nil {
		fmt.Fprintf(out, " (exit code %d)", *st.ExitCode)
	}
	fmt.Fprintln(out)
	if st.LastCheckpoint != "" {
		fmt.Fprintf(out, "last checkpoint: %s\n", st.LastCheckpoint)
	}
	if st.Phase != schemas.JobSucceeded {
		if st.Message != "" {
			fmt.Fprintf(out, "reason: %s: %s\n", st.Reason, st.Message)
		}
		return exitError{1}
	}
	return nil
}

// interrupted handles Ctrl-C: a job on the embedded stack is stopped (the stack is
// about to go away); a job on a server keeps running.
func interrupted(c *client.Client, ws, name string, out io.Writer, ephemeral bool) error {
	if !ephemeral {
		fmt.Fprintf(out, "\ndetached; the job keeps running: dlc job logs -f %s\n", name)
		return exitError{130}
	}
	fmt.Fprintf(out, "\nstopping job %s...\n", name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := c.StopJob(ctx, ws, name, "interrupted"); err == nil {
		fmt.Fprintf(out, "job %s %s\n", name, r.Phase)
	}
	return exitError{130}
}

// formatRunLine shows metric lines as a compact progress line and other lines as they
// are, prefixed by their replica.
func formatRunLine(r events.LogRecord) string {
	if vals, ok := events.ParseMetricLine(r.Line); ok {
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%g", k, vals[k])
		}
		return fmt.Sprintf("[%s-%d] metric  %s", r.Role, r.Index, strings.Join(parts, " "))
	}
	return formatLogLine(r)
}

// syncWriter serialises writes from the log and status goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
