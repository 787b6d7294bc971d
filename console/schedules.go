package console

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

// nextFires is how many coming fire times a schedule page shows.
const nextFires = 5

// schedulesPage lists the workspace's schedules.
func (c *Console) schedulesPage(w http.ResponseWriter, r *http.Request, k *call) error {
	list, err := k.api.ListSchedules(r.Context(), k.ws, 100, "")
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "schedules", "", k.page("Schedules", "schedules", list))
}

// schedulePage shows a schedule: its next fire times, runs and history, with pause,
// resume and trigger-now.
func (c *Console) schedulePage(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	v, err := k.api.GetSchedule(r.Context(), k.ws, name, nextFires)
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "schedule", "", k.page("Schedule "+name, "schedules", struct {
		View *api.ScheduleView
		Runs []schemas.ScheduleRun
		Now  time.Time
	}{v, scheduleRuns(v.Status), time.Now()}))
}

// scheduleRuns are a schedule's runs, newest first, each once: the history holds the
// running runs too.
func scheduleRuns(st schemas.ScheduleStatus) []schemas.ScheduleRun {
	type key struct {
		nominal time.Time
		trigger schemas.RunTrigger
		job     string
	}
	seen := map[key]bool{}
	var out []schemas.ScheduleRun
	history := slices.Clone(st.History)
	slices.Reverse(history)
	for _, list := range [][]schemas.ScheduleRun{st.Buffered, st.Running, history} {
		for _, r := range list {
			k := key{r.NominalTime.UTC(), r.Trigger, r.Job}
			if !seen[k] {
				seen[k] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// scheduleAction runs an action on a schedule, then shows it.
func (c *Console) scheduleAction(w http.ResponseWriter, r *http.Request, k *call, act func(name string) error) error {
	name := r.PathValue("name")
	if err := act(name); err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, "schedules", name), http.StatusSeeOther)
	return nil
}

func (c *Console) pauseSchedule(w http.ResponseWriter, r *http.Request, k *call) error {
	return c.scheduleAction(w, r, k, func(name string) error {
		note := strings.TrimSpace(r.PostFormValue("note"))
		if note == "" {
			note = "paused from the console by " + k.s.who.Name
		}
		_, err := k.api.PauseSchedule(r.Context(), k.ws, name, note)
		return err
	})
}

func (c *Console) resumeSchedule(w http.ResponseWriter, r *http.Request, k *call) error {
	return c.scheduleAction(w, r, k, func(name string) error {
		_, err := k.api.ResumeSchedule(r.Context(), k.ws, name)
		return err
	})
}

// triggerSchedule starts a run now, with the schedule's overlap policy (or the one
// the form names).
func (c *Console) triggerSchedule(w http.ResponseWriter, r *http.Request, k *call) error {
	return c.scheduleAction(w, r, k, func(name string) error {
		_, err := k.api.TriggerSchedule(r.Context(), k.ws, name, schedule.OverlapPolicy(r.PostFormValue("overlapPolicy")))
		return err
	})
}
