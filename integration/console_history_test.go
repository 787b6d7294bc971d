package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// The console's run record pages on the shared stack's real store, in Chromium, as a
// workspace member: the history lists the finished job, its record page shows its
// attempt, and the usage page a total.
func TestConsoleRunRecordsInChromium(t *testing.T) {
	ctx := itest.Context(t, 4*time.Minute)
	ws := workspace(t)
	tok, c := memberClient(t, ctx, ws)
	job := itest.Submit(t, ctx, c, itest.ShellJob(ws, "recorded", "echo recorded"))
	testutil.Eventually(t, 2*time.Minute, "the job's run record", func() error {
		page, err := c.History(ctx, ws, dlc.HistoryQuery{Name: "recorded"})
		if err != nil {
			return err
		}
		if len(page.Records) != 1 {
			return fmt.Errorf("%d records", len(page.Records))
		}
		return nil
	})

	p := newPage(t, ctx)
	p.signIn(tok)
	row := fmt.Sprintf(`#history tr[data-uid=%q]`, job.UID)
	p.do("open the history", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+ws+"/history"), chromedp.WaitVisible(chromedp.CSS(row)))
	if got := p.text(row); !strings.Contains(got, "recorded") || !strings.Contains(got, "Succeeded") {
		t.Errorf("history row %q, want the job's name and Succeeded", got)
	}
	p.do("open the record", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+ws+"/history/TrainingJob/"+job.UID),
		chromedp.WaitVisible(chromedp.CSS("#run-facts")))
	if got := p.text("#run-facts"); !strings.Contains(got, "recorded") || !strings.Contains(got, job.UID) {
		t.Errorf("record facts %q, want the job's name and uid", got)
	}
	p.do("open the usage", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+ws+"/usage"), chromedp.WaitVisible(chromedp.CSS("#usage-total")))
	if got := p.text("#usage-total"); !strings.Contains(got, "Total") {
		t.Errorf("usage total %q", got)
	}
}
