package schemas

import (
	"fmt"
	"time"
)

// Bounds of a job step's retries and timeout.
const (
	// MaxStepRetries bounds spec.steps[*].retries.count.
	MaxStepRetries = 10
	// MaxStepBackoff bounds spec.steps[*].retries.backoff.
	MaxStepBackoff = time.Hour
	// DefaultStepBackoff is the wait before a step's first retry when backoff is not
	// given; each further retry waits twice as long as the one before, up to
	// MaxStepBackoff.
	DefaultStepBackoff = 10 * time.Second
)

// StepRetries is how often a failed job step runs again.
type StepRetries struct {
	// Count is how many more tries a failed step gets, from 1 to 10.
	Count int32 `json:"count" jsonschema:"minimum=1,maximum=10"`
	// Backoff is the wait before the first retry (default 10s); each later retry waits
	// twice as long, at most 1h.
	Backoff Duration `json:"backoff,omitempty"`
}

// StepRetryJobName is the job of a step's try: <pipeline>-<step> for the first (try 0),
// <pipeline>-<step>-r<try> for each retry.
func StepRetryJobName(pipeline, step string, try int) string {
	if try == 0 {
		return StepJobName(pipeline, step)
	}
	return fmt.Sprintf("%s-r%d", StepJobName(pipeline, step), try)
}

// StepBackoff is the wait before try (from 1) of a step with retries r.
func StepBackoff(r *StepRetries, try int) time.Duration {
	d := DefaultStepBackoff
	if r != nil && r.Backoff > 0 {
		d = r.Backoff.D()
	}
	for i := 1; i < try && d < MaxStepBackoff; i++ {
		d *= 2
	}
	return min(d, MaxStepBackoff)
}

// validateRetries checks a step's retries and timeout: only a job step has them, the
// count and durations are in bounds, and the retries' job names fit.
func (st *PipelineStep) validateRetries(runNameLen int, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if st.Job == nil {
		if st.Retries != nil {
			add(Invalid(p.Child("retries"), "only a job step can be retried"))
		}
		if st.Timeout != nil {
			add(Invalid(p.Child("timeout"), "only a job step has a timeout"))
		}
		return
	}
	if r := st.Retries; r != nil {
		rp := p.Child("retries")
		if r.Count < 1 || r.Count > MaxStepRetries {
			add(Invalid(rp.Child("count"), "must be between 1 and %d", MaxStepRetries))
		}
		if r.Backoff < 0 || r.Backoff.D() > MaxStepBackoff {
			add(Invalid(rp.Child("backoff"), "must be between 0s and %s", MaxStepBackoff))
		}
		suffix := len(fmt.Sprintf("-r%d", max(r.Count, 1)))
		if runNameLen > 0 && st.Name != "" && runNameLen+1+len(st.Name)+suffix > maxJobNameLength {
			add(Invalid(p.Child("name"), "a retry's job name <pipeline>-%s-r%d would be longer than %d characters; "+
				"shorten the pipeline's or the step's name", st.Name, r.Count, maxJobNameLength))
		}
	}
	if st.Timeout != nil && *st.Timeout <= 0 {
		add(Invalid(p.Child("timeout"), "must be a positive duration such as 30m"))
	}
}
