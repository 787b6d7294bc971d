package schemas

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// MetricsSpec says where a job's metrics come from besides OpenDLC's own metric lines
// (`dlc:metric k=v`, which are always read): regular expressions over the replicas'
// output and files the training code writes. Whatever a collector reads is published as
// the job's metric events, so it reaches the job's status, an experiment's objective
// and a pipeline's conditions like a metric line does.
type MetricsSpec struct {
	// Collectors are read alongside the metric lines, at most 8.
	Collectors []MetricCollector `json:"collectors,omitempty" jsonschema:"maxItems=8"`
}

// MetricCollector is one source of metrics: set exactly one of stdout and file.
type MetricCollector struct {
	// Stdout reads metrics from the replicas' output lines with regular expressions.
	Stdout *StdoutCollector `json:"stdout,omitempty"`
	// File reads metrics from a file the first replica writes.
	File *FileCollector `json:"file,omitempty"`
}

// StdoutCollector reads metrics from output lines: each named group of a regular
// expression (RE2 syntax, `(?P<loss>[0-9.eE+-]+)`) that matches a line is a metric of
// that name; a group named step numbers the report. Set regex or regexes.
type StdoutCollector struct {
	// Regex is one regular expression with named groups.
	Regex string `json:"regex,omitempty" jsonschema:"maxLength=1024"`
	// Regexes are several, each applied to every line (at most 8).
	Regexes []string `json:"regexes,omitempty" jsonschema:"maxItems=8,maxLength=1024"`
}

// Patterns are the collector's regular expressions: Regex, then Regexes.
func (c *StdoutCollector) Patterns() []string {
	var out []string
	if c.Regex != "" {
		out = append(out, c.Regex)
	}
	return append(out, c.Regexes...)
}

// MetricFileFormat is how a metrics file is written.
type MetricFileFormat string

// Metric file formats.
const (
	// MetricFileJSONL is JSON lines: each line an object whose numeric fields are
	// metrics.
	MetricFileJSONL MetricFileFormat = "jsonl"
	// MetricFileCSV is CSV with a header row (Lightning's and Keras' CSVLogger): each
	// column a metric, empty cells skipped.
	MetricFileCSV MetricFileFormat = "csv"
	// MetricFileHFTrainerState is Hugging Face Trainer's trainer_state.json: each entry
	// of its log_history is a report.
	MetricFileHFTrainerState MetricFileFormat = "hf-trainer-state"
)

// MetricFileFormats are the formats a file collector reads.
var MetricFileFormats = []MetricFileFormat{MetricFileJSONL, MetricFileCSV, MetricFileHFTrainerState}

// FileCollector reads a metrics file while the job's first replica runs (new rows
// only) and once more when it ends.
type FileCollector struct {
	// Path is relative to the replica's working directory (spec.workingDir), without
	// ".." (local backend without the sandbox), below the replica's /tmp/ (local
	// backend), or an S3 object, s3://bucket/key, inside the workspace's storage (any
	// backend). For hf-trainer-state a relative path may be a
	// pattern (out/checkpoint-*/trainer_state.json): the newest file it matches is read.
	// In a trial template, ${params.NAME} is replaced by the trial's value.
	Path string `json:"path" jsonschema:"maxLength=1024"`
	// Format is jsonl, csv or hf-trainer-state.
	Format MetricFileFormat `json:"format" jsonschema:"enum=jsonl,enum=csv,enum=hf-trainer-state"`
}

// s3ObjectRE matches an S3 object a file collector reads: a bucket name and a key.
var s3ObjectRE = regexp.MustCompile(`^s3://[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]/[^/].*[^/]$|^s3://[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]/[^/]$`)

// metricNameRE matches a metric name (a stdout collector's group names).
var metricNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:/-]+$`)

// validateMetrics checks spec.metrics beyond its tags (which bound the collectors and
// check the format): one source per collector, regular expressions that compile and
// name at least one metric, relative file paths, no file twice.
func (s *TrainingJobSpec) validateMetrics(p Path, errs *ErrorList) {
	if s.Metrics == nil {
		return
	}
	add := func(e *FieldError) { *errs = append(*errs, e) }
	cp := p.Child("collectors")
	paths := map[string]int{}
	for i, c := range s.Metrics.Collectors {
		ip := cp.Index(i)
		switch {
		case (c.Stdout == nil) == (c.File == nil):
			add(Invalid(ip, "must set exactly one of stdout and file"))
			continue
		case !s.Logs.ForwardLogs():
			add(Invalid(ip, "needs log forwarding: collectors are read by the log forwarder (logs.forward is false)"))
		}
		if c.Stdout != nil {
			validateStdoutCollector(c.Stdout, ip.Child("stdout"), errs)
			continue
		}
		fp := ip.Child("file")
		f := c.File
		switch {
		case f.Path == "": // required by its tag
		case strings.HasPrefix(f.Path, "s3://"):
			if strings.ContainsAny(f.Path, "*?[") {
				add(Invalid(fp.Child("path"), "an s3:// path names one object: patterns are for paths relative to the working directory"))
			} else if !s3ObjectRE.MatchString(f.Path) || slices.ContainsFunc(strings.Split(f.Path[5:], "/"), func(seg string) bool { return seg == "" || seg == "." || seg == ".." }) {
				add(Invalid(fp.Child("path"), "must be an S3 object, s3://bucket/key (no empty, . or .. segments), or a path relative to the working directory"))
			} else if j, dup := paths[f.Path]; dup {
				add(Invalid(fp.Child("path"), "duplicate file (first at %s)", cp.Index(j)))
			} else {
				paths[f.Path] = i
			}
		case strings.HasPrefix(f.Path, "/tmp/") && path.Clean(f.Path) != "/tmp" && strings.HasPrefix(path.Clean(f.Path), "/tmp/"):
			// the replica's /tmp (local backend)
			if strings.ContainsAny(f.Path, "*?[") && f.Format != MetricFileHFTrainerState {
				add(Invalid(fp.Child("path"), "a pattern (*, ?, [...]) is for format hf-trainer-state only (the newest checkpoint-*/trainer_state.json)"))
			} else if j, dup := paths[path.Clean(f.Path)]; dup {
				add(Invalid(fp.Child("path"), "duplicate file (first at %s)", cp.Index(j)))
			} else {
				paths[path.Clean(f.Path)] = i
			}
		case path.IsAbs(f.Path) || strings.HasPrefix(f.Path, "\\"):
			add(Invalid(fp.Child("path"), "must be relative to the replica's working directory, in the replica's /tmp/, or an s3:// object"))
		case path.Clean(f.Path) == ".." || strings.HasPrefix(path.Clean(f.Path), "../"):
			add(Invalid(fp.Child("path"), "must stay inside the working directory (no ..)"))
		case strings.ContainsRune(f.Path, 0):
			add(Invalid(fp.Child("path"), "must not hold a NUL byte"))
		case strings.ContainsAny(f.Path, "*?[") && f.Format != MetricFileHFTrainerState:
			add(Invalid(fp.Child("path"), "a pattern (*, ?, [...]) is for format hf-trainer-state only (the newest checkpoint-*/trainer_state.json)"))
		case strings.ContainsAny(f.Path, "*?[") && !validGlob(f.Path):
			add(Invalid(fp.Child("path"), "is not a valid pattern (path.Match syntax)"))
		default:
			clean := path.Clean(f.Path)
			if j, dup := paths[clean]; dup {
				add(Invalid(fp.Child("path"), "duplicate file (first at %s)", cp.Index(j)))
			} else {
				paths[clean] = i
			}
		}
	}
}

// validGlob reports whether pattern has path.Match's syntax.
func validGlob(pattern string) bool {
	_, err := path.Match(pattern, "")
	return err == nil
}

func validateStdoutCollector(c *StdoutCollector, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if (c.Regex == "") == (len(c.Regexes) == 0) {
		add(Invalid(p, "must set exactly one of regex and regexes"))
		return
	}
	check := func(re string, rp Path) {
		x, err := regexp.Compile(re)
		if err != nil {
			add(Invalid(rp, "must be a regular expression: %v", err))
			return
		}
		metrics := 0
		for _, name := range x.SubexpNames() {
			switch {
			case name == "":
			case !metricNameRE.MatchString(name):
				add(Invalid(rp, "group %q is not a metric name", name))
			case name != StepGroup:
				metrics++
			}
		}
		if metrics == 0 {
			add(Invalid(rp, "must have a named group, (?P<name>...), for each metric it reads"))
		}
	}
	if c.Regex != "" {
		check(c.Regex, p.Child("regex"))
	}
	for i, re := range c.Regexes {
		check(re, p.Child("regexes").Index(i))
	}
}

// StepGroup is the group of a stdout collector's regular expression that numbers a
// report (it is published as the metric step).
const StepGroup = "step"
