package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
)

// The quota is one per workspace, not a kind of named object: get and set take no name.
func newQuotaCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "quota",
		Aliases: []string{"quotas"},
		Short:   "Show or set the workspace's resource quota (jobs in the quota pool wait in Queued while it is full)",
	}
	cmd.AddCommand(newQuotaSetCmd(g), &cobra.Command{
		Use:   "get",
		Short: "Show the quota, what is in use, borrowed and lent, the admitted jobs, the queue and the cohort's members",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			st, err := c.GetQuota(cmd.Context(), g.workspace)
			if err != nil {
				return err
			}
			return g.print(cmd, st, func(w io.Writer) error { return printQuota(w, st) })
		}),
	})
	return cmd
}

// quotaSetFlags are the flags of `dlc quota set`.
type quotaSetFlags struct {
	gpu                 int64
	cpu, memory         string
	gpuModels           []string
	cohort              string
	borrowing, lending  []string
	weight              int64
	reclaimWithinCohort string
	preemptWithinWS     string
}

const limitFlagHelp = `gpu=N,cpu=Q,memory=Q,gpu/MODEL=N (comma-separated or repeated; a resource left out is not bounded)`

func newQuotaSetCmd(g *globals) *cobra.Command {
	var f quotaSetFlags
	cmd := &cobra.Command{
		Use:   "set [--gpu N] [--cpu Q] [--memory Q] [--gpu-model MODEL=N]... [--cohort NAME [--borrowing-limit ...] [--lending-limit ...] [--weight N]] [--reclaim-within-cohort P] [--preempt-within-workspace P]",
		Short: "Set the quota; it replaces the whole quota: a resource not given is unlimited, a setting not given is its default",
		Example: `  dlc -w vision quota set --gpu 16 --cpu 128 --memory 1Ti
  dlc -w vision quota set --gpu 8 --gpu-model NVIDIA-A100-SXM4-80GB=4 --cohort research \
      --borrowing-limit gpu=4 --lending-limit gpu=6,cpu=32 --weight 2 \
      --reclaim-within-cohort LowerPriority --preempt-within-workspace LowerPriority`,
		Args: cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			q, err := f.quota(cmd)
			if err != nil {
				return err
			}
			if err := c.SetQuota(cmd.Context(), g.workspace, q); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "quota of workspace %s set\n", g.workspace)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.Int64Var(&f.gpu, "gpu", 0, "nominal GPUs (all models together)")
	fl.StringVar(&f.cpu, "cpu", "", `nominal CPU cores, such as "64" or "500m"`)
	fl.StringVar(&f.memory, "memory", "", `nominal memory, such as "256Gi"`)
	fl.StringArrayVar(&f.gpuModels, "gpu-model", nil, "MODEL=N: nominal GPUs of an accelerator model, the value of the node label nvidia.com/gpu.product (such as NVIDIA-A100-SXM4-80GB=4); repeatable")
	fl.StringVar(&f.cohort, "cohort", "", "join the cohort NAME: its members share the nominal quota they leave idle")
	fl.StringArrayVar(&f.borrowing, "borrowing-limit", nil, "how much beyond its nominal quota the workspace may borrow in its cohort: "+limitFlagHelp)
	fl.StringArrayVar(&f.lending, "lending-limit", nil, "how much of its nominal quota the cohort's other members may use (default: all of it): "+limitFlagHelp)
	fl.Int64Var(&f.weight, "weight", 0, "fair-sharing weight in the cohort, 1 to 1000 (default 1)")
	fl.StringVar(&f.reclaimWithinCohort, "reclaim-within-cohort", "", "whether a job within the nominal quota preempts other members' borrowing jobs: Any (default), LowerPriority or Never")
	fl.StringVar(&f.preemptWithinWS, "preempt-within-workspace", "", "whether a job preempts the workspace's own jobs of lower priority: Never (default) or LowerPriority")
	return cmd
}

// quota is the api.Quota the flags describe; a malformed value is an error naming its
// flag. The API checks the rest (bounds, a lending limit above the nominal quota, a
// borrowing limit outside a cohort).
func (f *quotaSetFlags) quota(cmd *cobra.Command) (api.Quota, error) {
	q := api.Quota{Cohort: f.cohort}
	if cmd.Flags().Changed("gpu") {
		if f.gpu < 0 {
			return api.Quota{}, fmt.Errorf("--gpu %d: must be >= 0", f.gpu)
		}
		gpu := f.gpu
		q.GPU = &gpu
	}
	var err error
	if q.CPU, err = quantityFlag("--cpu", f.cpu); err != nil {
		return api.Quota{}, err
	}
	if q.Memory, err = quantityFlag("--memory", f.memory); err != nil {
		return api.Quota{}, err
	}
	for _, s := range f.gpuModels {
		model, n, ok := strings.Cut(s, "=")
		if !ok || model == "" {
			return api.Quota{}, fmt.Errorf("--gpu-model %q: want MODEL=N, such as NVIDIA-A100-SXM4-80GB=4", s)
		}
		v, err := countFlag("--gpu-model "+model, n)
		if err != nil {
			return api.Quota{}, err
		}
		if _, dup := q.GPUModels[model]; dup {
			return api.Quota{}, fmt.Errorf("--gpu-model %s: given twice", model)
		}
		if q.GPUModels == nil {
			q.GPUModels = map[string]int64{}
		}
		q.GPUModels[model] = v
	}
	if q.BorrowingLimit, err = limitFlag("--borrowing-limit", f.borrowing); err != nil {
		return api.Quota{}, err
	}
	if q.LendingLimit, err = limitFlag("--lending-limit", f.lending); err != nil {
		return api.Quota{}, err
	}
	if cmd.Flags().Changed("weight") {
		if f.weight < 1 || f.weight > 1000 {
			return api.Quota{}, fmt.Errorf("--weight %d: must be between 1 and 1000", f.weight)
		}
		q.Weight = f.weight
	}
	reclaim, err := policyFlag("--reclaim-within-cohort", f.reclaimWithinCohort, "Any", "LowerPriority", "Never")
	if err != nil {
		return api.Quota{}, err
	}
	within, err := policyFlag("--preempt-within-workspace", f.preemptWithinWS, "Never", "LowerPriority")
	if err != nil {
		return api.Quota{}, err
	}
	if reclaim != "" || within != "" {
		q.Preemption = &api.QuotaPreemption{ReclaimWithinCohort: reclaim, WithinWorkspace: within}
	}
	return q, nil
}

// quantityFlag checks a CPU or memory quantity ("" for none).
func quantityFlag(flag, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	v, err := resource.ParseQuantity(s)
	if err != nil || v.Sign() < 0 {
		return "", fmt.Errorf("%s %q: want a non-negative quantity such as \"64\", \"500m\" or \"256Gi\"", flag, s)
	}
	return s, nil
}

// countFlag is a whole, non-negative number of GPUs.
func countFlag(flag, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a whole number of GPUs >= 0", flag, s)
	}
	return n, nil
}

// limitFlag reads --borrowing-limit or --lending-limit: KEY=VALUE pairs, comma-separated
// or in repeated flags, the keys gpu, cpu, memory and gpu/MODEL. No value is no limit.
func limitFlag(flag string, values []string) (*api.QuotaLimit, error) {
	if len(values) == 0 {
		return nil, nil
	}
	l := &api.QuotaLimit{}
	seen := map[string]bool{}
	for _, v := range values {
		for pair := range strings.SplitSeq(v, ",") {
			key, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || key == "" {
				return nil, fmt.Errorf("%s %q: want gpu=N, cpu=Q, memory=Q or gpu/MODEL=N, comma-separated", flag, pair)
			}
			if seen[key] {
				return nil, fmt.Errorf("%s: %s given twice", flag, key)
			}
			seen[key] = true
			switch model, isModel := strings.CutPrefix(key, "gpu/"); {
			case key == "gpu":
				n, err := countFlag(flag+" gpu", val)
				if err != nil {
					return nil, err
				}
				l.GPU = &n
			case key == "cpu":
				q, err := quantityFlag(flag+" cpu", val)
				if err != nil || q == "" {
					return nil, fmt.Errorf("%s cpu=%q: want a non-negative quantity such as \"64\" or \"500m\"", flag, val)
				}
				l.CPU = q
			case key == "memory":
				q, err := quantityFlag(flag+" memory", val)
				if err != nil || q == "" {
					return nil, fmt.Errorf("%s memory=%q: want a non-negative quantity such as \"256Gi\"", flag, val)
				}
				l.Memory = q
			case isModel && model != "":
				n, err := countFlag(flag+" "+key, val)
				if err != nil {
					return nil, err
				}
				if l.GPUModels == nil {
					l.GPUModels = map[string]int64{}
				}
				l.GPUModels[model] = n
			default:
				return nil, fmt.Errorf("%s: unknown resource %q: want gpu, cpu, memory or gpu/MODEL", flag, key)
			}
		}
	}
	return l, nil
}

// policyFlag checks a preemption policy against its values, whatever the case, and
// answers it spelled as the API does.
func policyFlag(flag, s string, values ...string) (string, error) {
	if s == "" {
		return "", nil
	}
	for _, v := range values {
		if strings.EqualFold(s, v) {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s %q: want %s", flag, s, strings.Join(values, ", "))
}

// newJobPriorityCmd is `dlc job priority NAME N`: the priority of a job in the quota
// pool, queued (it moves in the queue) or admitted (it orders preemption).
func newJobPriorityCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "priority NAME N",
		Short: "Change the priority (-1000 to 1000, higher first) of a quota-pool job, queued or admitted; a negative N follows --",
		Example: `  dlc job priority train 100
  dlc job priority sweep-3 -- -50`,
		Args: cobra.ExactArgs(2),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			name := args[0]
			p, err := strconv.ParseInt(args[1], 10, 32)
			if err != nil {
				return fmt.Errorf("priority %q: want a whole number from -1000 to 1000", args[1])
			}
			r, err := c.SetJobPriority(cmd.Context(), g.workspace, name, int32(p))
			if err != nil {
				return err
			}
			return g.print(cmd, r, line("job %s: priority %d", name, r.Priority))
		}),
	}
}

// printQuota writes the quota: its settings, the figures per resource, the admitted
// jobs, the queue and, in a cohort, every member's figures.
func printQuota(w io.Writer, st *api.QuotaStatus) error {
	l := st.Limits
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if l.Cohort != "" {
		weight := l.Weight
		if weight == 0 {
			weight = 1
		}
		fmt.Fprintf(tw, "Cohort:\t%s\n", l.Cohort)
		fmt.Fprintf(tw, "Weight:\t%d\n", weight)
	}
	reclaim, within := "Any", "Never"
	if p := l.Preemption; p != nil {
		reclaim, within = orDefault(p.ReclaimWithinCohort, reclaim), orDefault(p.WithinWorkspace, within)
	}
	if l.Cohort != "" {
		fmt.Fprintf(tw, "Preemption:\treclaim within cohort %s, within workspace %s\n", reclaim, within)
	} else {
		fmt.Fprintf(tw, "Preemption:\twithin workspace %s\n", within)
	}
	fmt.Fprintln(tw)

	// The figures per resource: the GPU models named anywhere come after gpu.
	type row struct {
		name, nominal, used, borrowed, lent, borrowLimit, lendLimit string
	}
	gpuLimit := func(lim *api.QuotaLimit, none string) string {
		if lim == nil || lim.GPU == nil {
			return none
		}
		return strconv.FormatInt(*lim.GPU, 10)
	}
	strLimit := func(lim *api.QuotaLimit, get func(*api.QuotaLimit) string, none string) string {
		if lim == nil || get(lim) == "" {
			return none
		}
		return get(lim)
	}
	modelLimit := func(lim *api.QuotaLimit, model, none string) string {
		if lim == nil {
			return none
		}
		if n, ok := lim.GPUModels[model]; ok {
			return strconv.FormatInt(n, 10)
		}
		return none
	}
	const unbounded, all = "unbounded", "all"
	rows := []row{{"gpu", gpuLimit(&api.QuotaLimit{GPU: l.GPU}, "unlimited"), strconv.FormatInt(st.Used.GPU, 10),
		strconv.FormatInt(st.Borrowed.GPU, 10), strconv.FormatInt(st.Lent.GPU, 10),
		gpuLimit(l.BorrowingLimit, unbounded), gpuLimit(l.LendingLimit, all)}}
	for _, m := range st.GPUModelNames() {
		nominal := "unlimited"
		if n, ok := l.GPUModels[m]; ok {
			nominal = strconv.FormatInt(n, 10)
		}
		rows = append(rows, row{"gpu/" + m, nominal, strconv.FormatInt(st.Used.GPUModels[m], 10),
			strconv.FormatInt(st.Borrowed.GPUModels[m], 10), strconv.FormatInt(st.Lent.GPUModels[m], 10),
			modelLimit(l.BorrowingLimit, m, unbounded), modelLimit(l.LendingLimit, m, all)})
	}
	cpu := func(q *api.QuotaLimit) string { return q.CPU }
	mem := func(q *api.QuotaLimit) string { return q.Memory }
	rows = append(rows,
		row{"cpu", orDefault(l.CPU, "unlimited"), orDefault(st.Used.CPU, "0"), orDefault(st.Borrowed.CPU, "0"), orDefault(st.Lent.CPU, "0"),
			strLimit(l.BorrowingLimit, cpu, unbounded), strLimit(l.LendingLimit, cpu, all)},
		row{"memory", orDefault(l.Memory, "unlimited"), orDefault(st.Used.Memory, "0"), orDefault(st.Borrowed.Memory, "0"), orDefault(st.Lent.Memory, "0"),
			strLimit(l.BorrowingLimit, mem, unbounded), strLimit(l.LendingLimit, mem, all)})
	if l.Cohort != "" {
		fmt.Fprintln(tw, "RESOURCE\tNOMINAL\tUSED\tBORROWED\tLENT\tBORROWING-LIMIT\tLENDING-LIMIT")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.nominal, r.used, r.borrowed, r.lent, r.borrowLimit, r.lendLimit)
		}
	} else {
		// Outside a cohort nothing is borrowed or lent.
		fmt.Fprintln(tw, "RESOURCE\tNOMINAL\tUSED")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, r.nominal, r.used)
		}
	}
	fmt.Fprintln(tw)

	fmt.Fprintln(tw, "ADMITTED\tPRIORITY\tGPU\tCPU\tMEMORY\tSINCE\tBORROWING\tPREEMPTING")
	if len(st.Admitted) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	for _, j := range st.Admitted {
		preempting := "-"
		if p := j.Preempting; p != nil {
			by := "a job"
			if p.By != "" {
				by = p.By
			}
			preempting = fmt.Sprintf("by %s (workspace %s, %s)", by, p.Workspace, p.Reason)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", j.Job, j.Priority, j.Resources.GPU, j.Resources.CPU, j.Resources.Memory,
			j.Since.Format("15:04:05"), yesNo(j.Borrowing), preempting)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "QUEUED\tPOSITION\tPRIORITY\tGPU\tCPU\tMEMORY\tSINCE\tWAITING-FOR")
	if len(st.Queue) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	for i, j := range st.Queue {
		waiting := "-"
		if len(j.WaitingFor) > 0 {
			waiting = strings.Join(j.WaitingFor, ", ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", j.Job, i+1, j.Priority, j.Resources.GPU, j.Resources.CPU, j.Resources.Memory,
			j.Since.Format("15:04:05"), waiting)
	}
	if c := st.Cohort; c != nil {
		fmt.Fprintln(tw)
		fmt.Fprintf(tw, "Cohort %s: pool %s; borrowed %s\n", c.Name, usageLine(c.Pool), usageLine(c.Borrowed))
		fmt.Fprintln(tw, "WORKSPACE\tNOMINAL\tUSED\tBORROWED\tLENT\tWEIGHT\tSHARE\tADMITTED\tQUEUED\tCPU USED/NOMINAL\tMEMORY USED/NOMINAL")
		for _, m := range c.Members {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%s/%s\t%s/%s\n", m.Workspace, m.Nominal.GPU, m.Used.GPU, m.Borrowed.GPU, m.Lent.GPU,
				m.Weight, m.Share, m.Admitted, m.Queued, orDefault(m.Used.CPU, "0"), orDefault(m.Nominal.CPU, "0"),
				orDefault(m.Used.Memory, "0"), orDefault(m.Nominal.Memory, "0"))
		}
		fmt.Fprintln(tw, "(NOMINAL, USED, BORROWED and LENT count GPUs; SHARE is the weighted dominant share of borrowed capacity: idle capacity goes to the lowest first)")
	}
	return tw.Flush()
}

// usageLine writes an amount on one line: gpu 4, cpu 32, memory 128Gi (and each GPU
// model's).
func usageLine(u api.QuotaUsage) string {
	parts := []string{fmt.Sprintf("gpu %d", u.GPU)}
	for _, m := range sortedKeys(u.GPUModels) {
		parts = append(parts, fmt.Sprintf("gpu/%s %d", m, u.GPUModels[m]))
	}
	return strings.Join(append(parts, "cpu "+orDefault(u.CPU, "0"), "memory "+orDefault(u.Memory, "0")), ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
