package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Fan-out of a job step over a list (withItems, withParam): one child job per item,
// <pipeline>-<step>-<i>, at most parallelism at once. See docs/pipelines.md.

// Bounds of a fan-out step.
const (
	// MaxFanOutItems bounds a fan-out step's list (withItems, or withParam's value) and
	// its parallelism.
	MaxFanOutItems = 64
	// LabelPipelineItem is the label a fan-out step's child job gets: its item's index.
	LabelPipelineItem = "opendlc.io/pipeline-item"
	// OutputJobs is a fan-out step's output: a JSON list of its children's job names.
	OutputJobs = "jobs"
)

// FanOut reports whether the step fans out over a list.
func (st *PipelineStep) FanOut() bool { return st.WithItems != nil || st.WithParam != "" }

// StepItemJobName is the job of a fan-out step's child i: <pipeline>-<step>-<i>.
func StepItemJobName(pipeline, step string, i int) string {
	return StepJobName(pipeline, step) + "-" + strconv.Itoa(i)
}

// ItemValue is the text ${item} (or ${item.<key>}, key not "") stands for: a string
// item as it is, any other value as JSON. It fails when key is set and the item is not
// an object holding it.
func ItemValue(item any, key string) (string, error) {
	v := item
	if key != "" {
		obj, ok := item.(map[string]any)
		if !ok {
			return "", fmt.Errorf("${item.%s}: the item is not an object", key)
		}
		if v, ok = obj[key]; !ok {
			return "", fmt.Errorf("${item.%s}: the item has no field %q", key, key)
		}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("${item}: %w", err)
	}
	return string(b), nil
}

// ParseItemList reads withParam's value: a JSON list of 1 to MaxFanOutItems items, none
// null.
func ParseItemList(v string) ([]any, error) {
	var items []any
	if err := json.Unmarshal([]byte(v), &items); err != nil {
		return nil, fmt.Errorf("%q is not a JSON list", truncate(v, 80))
	}
	if err := checkItems(items); err != nil {
		return nil, err
	}
	return items, nil
}

func checkItems(items []any) error {
	if len(items) == 0 || len(items) > MaxFanOutItems {
		return fmt.Errorf("the list has %d items; a fan-out takes 1 to %d", len(items), MaxFanOutItems)
	}
	for i, it := range items {
		if it == nil {
			return fmt.Errorf("item %d is null", i)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// validateFanOut checks a step's withItems, withParam and parallelism: only a job step
// without retries or timeout fans out, over one list, and its children's job names fit.
func (st *PipelineStep) validateFanOut(runNameLen int, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if !st.FanOut() {
		if st.Parallelism != 0 {
			add(Invalid(p.Child("parallelism"), "only a fan-out step (withItems or withParam) has a parallelism"))
		}
		return
	}
	field := "withItems"
	if st.WithItems == nil {
		field = "withParam"
	}
	if st.Job == nil {
		add(Invalid(p.Child(field), "only a job step can fan out"))
		return
	}
	if st.WithItems != nil && st.WithParam != "" {
		add(Invalid(p.Child("withParam"), "set only one of withItems and withParam"))
	}
	if st.WithItems != nil {
		if err := checkItems(st.WithItems); err != nil {
			add(Invalid(p.Child("withItems"), "%v", err))
		}
	}
	if st.WithParam != "" {
		refs, err := ParseTemplate(st.WithParam)
		switch {
		case err != nil:
			add(Invalid(p.Child("withParam"), "%v", err))
		case len(refs) != 1 || refs[0].String() != st.WithParam ||
			(refs[0].Root != RefParams && !(refs[0].Root == RefSteps && refs[0].Field == StepOutputs)):
			add(Invalid(p.Child("withParam"), "must be exactly one reference, ${steps.<step>.outputs.<key>} or ${params.<name>}"))
		}
	}
	// parallelism's bounds are its tag's.
	if st.Retries != nil {
		add(Invalid(p.Child("retries"), "a fan-out step cannot be retried (not yet): retry the run instead"))
	}
	if st.Timeout != nil {
		add(Invalid(p.Child("timeout"), "a fan-out step has no timeout (not yet)"))
	}
	if _, ok := st.Outputs[OutputJobs]; ok {
		add(Invalid(p.Child("outputs").Key(OutputJobs), "%q is a built-in output of a fan-out step", OutputJobs))
	}
	last := MaxFanOutItems - 1
	if st.WithItems != nil {
		last = max(len(st.WithItems)-1, 0)
	}
	if runNameLen > 0 && st.Name != "" && len(StepItemJobName(st.Name, "", last))+runNameLen > maxJobNameLength {
		add(Invalid(p.Child("name"), "a child's job name <pipeline>-%s-%d would be longer than %d characters; "+
			"shorten the pipeline's or the step's name", st.Name, last, maxJobNameLength))
	}
}

// checkFanOutRef checks a reference to fan-out step src: its outputs are jobs,
// checkpointURI (with spec.checkpoint) and its declared outputs, each a JSON list; it has
// no metrics, job or checkpoint. problem is "" when the reference is fine.
func checkFanOutRef(src *PipelineStep, ref TemplateRef) string {
	if ref.Field == StepMetrics {
		return fmt.Sprintf("step %s fans out: it has no metrics", src.Name)
	}
	switch ref.Key {
	case OutputJobs:
	case OutputJob, OutputCheckpoint:
		return fmt.Sprintf("step %s fans out: it has outputs.jobs, the list of its children's jobs, and no %s", src.Name, ref.Key)
	case OutputCheckpointURI:
		if src.Job.Checkpoint == nil {
			return fmt.Sprintf("step %s has no spec.checkpoint", src.Name)
		}
	default:
		if _, ok := src.Outputs[ref.Key]; !ok {
			return fmt.Sprintf("step %s has no output %q", src.Name, ref.Key)
		}
	}
	return ""
}

// checkItemRef checks ${item.<key>} in a step with withItems: every item must be an
// object holding key.
func (st *PipelineStep) checkItemRef(ref TemplateRef) string {
	if ref.Key == "" || st.WithItems == nil {
		return ""
	}
	for i, it := range st.WithItems {
		if _, err := ItemValue(it, ref.Key); err != nil && it != nil { // a null item is refused by itself
			return fmt.Sprintf("withItems[%d] is not an object with field %q", i, ref.Key)
		}
	}
	return ""
}
