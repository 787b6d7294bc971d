package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// python is Debian's interpreter, which has python3-torch (`task deps`).
const python = "/usr/bin/python3"

// ddpWorld is the world size of the DDP example: 1 master + 2 workers.
const ddpWorld = 3

// allReduceDone matches the line the DDP example prints after its first all-reduce.
var allReduceDone = regexp.MustCompile(`first all_reduce: rank=(\d+) world=(\d+) sum=(\S+) expected=(\d+) backend=\S+ unix_ns=(\d+)`)

// runFrameworks times the DDP example of examples/pytorch/ddp (3 processes, gloo) from
// submit to its first all-reduce completed on every rank, against the same 3 processes
// started by hand with the same environment, n runs each, interleaved, on one embedded
// stack with its worker in process.
func runFrameworks(n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, python, "-c", "import torch, boto3").CombinedOutput(); err != nil {
		return fmt.Errorf("%s cannot import torch and boto3 (run `task deps`): %w: %s", python, err, out)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	program := filepath.Join(root, "examples", "pytorch", "ddp", "train.py")
	pythonPath := filepath.Join(root, "python")
	if _, err := os.Stat(program); err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	dir, err := os.MkdirTemp("", "opendlc-bench-frameworks-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e, err := embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(dir, "stack"), APIAddr: "127.0.0.1:0", WorkDir: dir, Logger: itest.Logger(slog.LevelError),
	})
	if err != nil {
		return err
	}
	defer e.Close()
	c, err := itest.Client(e)
	if err != nil {
		return err
	}
	var s3env []string
	for _, v := range e.ReplicaEnv() {
		s3env = append(s3env, v.Name+"="+v.Value)
	}
	args := []string{program, "--steps", "1", "--checkpoint-every", "0"}
	var job, running, hand []time.Duration
	loadBefore := loadAvg()
	// Interleaved, the side that goes first alternating, so that a change in the
	// machine's load weighs on both rows alike.
	for i := range 2 * n {
		if (i/2+i)%2 == 0 {
			d, r, err := ddpJob(ctx, c, i/2, args, pythonPath)
			if err != nil {
				return fmt.Errorf("job run %d: %w", i/2, err)
			}
			job, running = append(job, d), append(running, r)
			continue
		}
		d, err := ddpByHand(ctx, args, pythonPath, dir, s3env)
		if err != nil {
			return fmt.Errorf("by-hand run %d: %w", i/2, err)
		}
		hand = append(hand, d)
	}
	fmt.Printf("PyTorch DDP example (examples/pytorch/ddp: 1 master + 2 workers, gloo on CPU), local backend, %d runs per row, interleaved\n", n)
	fmt.Printf("load average (1 min) before %s, after %s\n\n", loadBefore, loadAvg())
	fmt.Printf("%-62s %9s %9s %9s\n", "measure", "min", "median", "max")
	row := func(name string, xs []time.Duration) {
		fmt.Printf("%-62s %9s %9s %9s\n", name, minDur(xs), median(xs), slices.Max(xs).Round(time.Millisecond))
	}
	row("by hand: 3 processes started -> first all-reduce on all ranks", hand)
	row("OpenDLC: submit -> first all-reduce on all ranks", job)
	row("  of which: submit -> job Running (every replica started)", running)
	fmt.Printf("\nmedian ratio OpenDLC / by hand: %.2fx\n", float64(median(job))/float64(median(hand)))
	return nil
}

// ddpJob submits the DDP example as a TrainingJob and returns the time from submit to the
// last rank's first all-reduce, read from the job's logs once it has succeeded, and to
// the job's Running phase (every replica's process started).
func ddpJob(ctx context.Context, c *client.Client, i int, args []string, pythonPath string) (done, running time.Duration, err error) {
	name := fmt.Sprintf("ddp-%d", i)
	quoted := make([]string, len(args))
	for k, a := range args {
		quoted[k] = strconv.Quote(a)
	}
	spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":%q,"workspace":"bench-frameworks"},
"spec":{"framework":"pytorch","command":[%q],"args":[%s],
"env":[{"name":"PYTHONPATH","value":%q},{"name":"OMP_NUM_THREADS","value":"1"}],
"roles":{"master":{"replicas":1},"worker":{"replicas":2}},"timeout":"5m"}}`,
		name, python, strings.Join(quoted, ","), pythonPath)
	t0 := time.Now()
	if _, err := c.SubmitJob(ctx, []byte(spec)); err != nil {
		return 0, 0, err
	}
	for {
		j, err := c.GetJob(ctx, "bench-frameworks", name)
		if err != nil {
			return 0, 0, err
		}
		if j.Status.Phase.Terminal() {
			if j.Status.Phase != schemas.JobSucceeded {
				return 0, 0, fmt.Errorf("job %s ended %s: %s", name, j.Status.Phase, j.Status.Message)
			}
			for _, ev := range j.Status.Timeline {
				if ev.Phase == schemas.JobRunning {
					running = ev.Time.Sub(t0)
					break
				}
			}
			break
		}
		// Both figures come from the job's own records (the ranks' clocks in their log
		// lines, the timeline's Running entry), not from when this loop sees the end: a
		// slow poll costs them nothing, and a fast one (each a status query through the
		// API, Temporal and the worker) would load the cores the replicas' three
		// `import torch` share, which the by-hand side does not have to.
		time.Sleep(250 * time.Millisecond)
	}
	var lines []string
	err = c.Logs(ctx, "bench-frameworks", name, client.LogOptions{}, func(r events.LogRecord) error {
		lines = append(lines, r.Line)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	last, err := lastAllReduce(lines)
	if err != nil {
		return 0, 0, err
	}
	return last.Sub(t0), running, nil
}

// ddpByHand starts the 3 processes directly with the environment the pytorch framework
// and the local backend give them (rendezvous on a free loopback port, and the stack's S3
// variables) and returns the time from starting
// the first to the last rank's first all-reduce.
func ddpByHand(ctx context.Context, args []string, pythonPath, dir string, s3env []string) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var lines []string
	var cmds []*exec.Cmd
	var wg sync.WaitGroup
	t0 := time.Now()
	for rank := range ddpWorld {
		cmd := exec.CommandContext(ctx, python, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath, "OMP_NUM_THREADS=1",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "WORLD_SIZE="+strconv.Itoa(ddpWorld),
			"RANK="+strconv.Itoa(rank), "NODE_RANK="+strconv.Itoa(rank), "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
			"PET_MASTER_ADDR=127.0.0.1", "PET_MASTER_PORT="+strconv.Itoa(port), "PET_NNODES="+strconv.Itoa(ddpWorld),
			"PET_NODE_RANK="+strconv.Itoa(rank), "PET_NPROC_PER_NODE=1")
		cmd.Env = append(cmd.Env, s3env...)
		// A session of its own, as the local backend starts each replica (and as a
		// terminal per process would): with the kernel's autogroup scheduling a session
		// is also a CPU share, which matters on a loaded machine.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		cmds = append(cmds, cmd)
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				lines = append(lines, sc.Text())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			return 0, fmt.Errorf("rank exited: %w", err)
		}
	}
	done, err := lastAllReduce(lines)
	if err != nil {
		return 0, err
	}
	return done.Sub(t0), nil
}

// lastAllReduce checks that every rank printed a correct first all-reduce and returns
// the latest of their completion times.
func lastAllReduce(lines []string) (time.Time, error) {
	var last time.Time
	ranks := map[string]bool{}
	for _, l := range lines {
		m := allReduceDone.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if m[2] != strconv.Itoa(ddpWorld) || m[3] != m[4] {
			return time.Time{}, fmt.Errorf("wrong all-reduce: %q", l)
		}
		ns, err := strconv.ParseInt(m[5], 10, 64)
		if err != nil {
			return time.Time{}, err
		}
		ranks[m[1]] = true
		if t := time.Unix(0, ns); t.After(last) {
			last = t
		}
	}
	if len(ranks) != ddpWorld {
		return time.Time{}, fmt.Errorf("first all-reduce of %d ranks, want %d", len(ranks), ddpWorld)
	}
	return last, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return m.Round(time.Millisecond)
}

func minDur(xs []time.Duration) time.Duration { return slices.Min(xs).Round(time.Millisecond) }

func maxDur(xs []time.Duration) time.Duration { return slices.Max(xs).Round(time.Millisecond) }

// loadAvg is the machine's 1-minute load average, as /proc/loadavg gives it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}
