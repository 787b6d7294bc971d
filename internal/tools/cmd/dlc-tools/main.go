// Command dlc-tools builds and locates the pinned tool binaries for the
// Taskfile and for humans:
//
//	dlc-tools install [NAME...]   build the named tools or groups (default: all) and print their paths
//	dlc-tools path NAME           print the path of one tool, building it if needed
//	dlc-tools run NAME [ARG...]   run a tool, building it if needed
//	dlc-tools list                print every pinned tool, its version and whether it is built
//	dlc-tools dir                 print the cache directory
//	dlc-tools bin PACKAGE         print the path of one of OpenDLC's own programs (./cmd/dlc),
//	                              built static once per state of the tree (internal/gobuild)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/opendlc/opendlc/internal/gobuild"
	"github.com/opendlc/opendlc/internal/tools"
)

const usage = `usage:
  dlc-tools install [NAME...]   build the named tools (default: all) and print their paths;
                                a group name stands for its tools ("kube": etcd, kube-apiserver,
                                kube-controller-manager, kube-scheduler, kwok)
  dlc-tools path NAME           print the path of one tool, building it if needed
  dlc-tools run NAME [ARG...]   run a tool, building it if needed
  dlc-tools list                print every pinned tool and whether it is built
  dlc-tools dir                 print the cache directory ($` + tools.EnvDir + `)
  dlc-tools bin PACKAGE         print the path of one of OpenDLC's own programs (such as
                                ./cmd/dlc), built static once per state of the source tree
`

var errUsage = errors.New("bad usage")

// exitCode passes on the exit status of a tool run with "run".
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, errUsage) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if code, ok := errors.AsType[exitCode](err); ok {
		os.Exit(int(code))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlc-tools:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch cmd, args := args[0], args[1:]; cmd {
	case "install":
		names, err := tools.Expand(args...)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			for _, t := range tools.List() {
				names = append(names, t.Name)
			}
		}
		return install(ctx, names, buildJobs(), stdout)
	case "path":
		if len(args) != 1 {
			return errUsage
		}
		path, err := tools.Ensure(ctx, args[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, path)
		return nil
	case "run":
		if len(args) == 0 {
			return errUsage
		}
		path, err := tools.Ensure(ctx, args[0])
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, path, args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			if exit, ok := errors.AsType[*exec.ExitError](err); ok {
				return exitCode(exit.ExitCode())
			}
			return err
		}
		return nil
	case "bin":
		if len(args) != 1 {
			return errUsage
		}
		root, err := tools.SourceRoot()
		if err != nil {
			return err
		}
		path, err := gobuild.Static(ctx, root, args[0], gobuild.Options{})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, path)
		return nil
	case "list":
		if len(args) != 0 {
			return errUsage
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tVERSION\tPACKAGE\tBUILT")
		for _, t := range tools.List() {
			_, err := os.Stat(t.Path(tools.Dir()))
			fmt.Fprintf(w, "%s\t%s\t%s\t%t\n", t.Name, t.Version, t.Package, err == nil)
		}
		return w.Flush()
	case "dir":
		if len(args) != 0 {
			return errUsage
		}
		fmt.Fprintln(stdout, tools.Dir())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return errUsage
	}
}

// envJobs names the environment variable that sets how many builds install runs at
// once (default 2). A go build keeps both cores of a small machine busy only part of
// the time: module downloads wait on the network and each binary links on one core,
// so two builds at once finish sooner than one after the other.
const envJobs = "DLC_TOOLS_JOBS"

func buildJobs() int {
	if n, err := strconv.Atoi(os.Getenv(envJobs)); err == nil && n > 0 {
		return n
	}
	return 2
}

// install ensures every named tool, up to jobs builds at a time, and prints each
// tool's path in the order given. The tools of one Module are one build, so they
// are ensured one after another on the same worker: the first builds them all and the
// rest find them cached, instead of a second worker waiting on the first's lock.
func install(ctx context.Context, names []string, jobs int, stdout io.Writer) error {
	var units [][]int // indexes into names, one slice per build
	byModule := map[string]int{}
	for i, name := range names {
		if t, ok := tools.Lookup(name); ok && t.Module != "" {
			if u, seen := byModule[t.Module]; seen {
				units[u] = append(units[u], i)
				continue
			}
			byModule[t.Module] = len(units)
		}
		units = append(units, []int{i})
	}
	lines := make([]string, len(names))
	errs := make([]error, len(names))
	work := make(chan []int)
	var wg sync.WaitGroup
	for range min(jobs, len(units)) {
		wg.Go(func() {
			for unit := range work {
				for _, i := range unit {
					start := time.Now()
					path, err := tools.Ensure(ctx, names[i])
					if err != nil {
						errs[i] = err
						break
					}
					lines[i] = fmt.Sprintf("%s\t%s\t(%s)\n", names[i], path, time.Since(start).Round(time.Millisecond))
				}
			}
		})
	}
	for _, u := range units {
		work <- u
	}
	close(work)
	wg.Wait()
	for i := range names {
		if errs[i] != nil {
			return errs[i]
		}
		fmt.Fprint(stdout, lines[i])
	}
	return nil
}
