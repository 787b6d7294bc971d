package schemas_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

const (
	subjectMsg    = "must be a NATS subject: tokens of letters, digits, '_' and '-' separated by '.', without wildcards"
	eventTypeMsg  = "must be an OpenDLC event type such as opendlc.job.phase.v1"
	phasesEnumMsg = "must be one of Pending, Queued, HealthCheck, Launching, Running, Restarting, Succeeded, Failed, Stopped, Stopping, Skipped, Cancelled"
	testSecret    = "0123456789abcdef"
)

// rule returns a valid rule of workspace vision, changed by each mutation.
func rule(mutate ...func(r *schemas.NotificationRule)) *schemas.NotificationRule {
	r := &schemas.NotificationRule{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindNotificationRule,
		Metadata:   schemas.ObjectMeta{Name: "on-failure", Workspace: "vision"},
		Spec: schemas.NotificationRuleSpec{
			Match: schemas.NotificationMatch{
				Types:  []string{"opendlc.job.phase.v1"},
				Phases: []schemas.JobPhase{schemas.JobFailed},
			},
			Webhook: &schemas.WebhookTarget{URL: "https://hooks.example.com/dlc", Secret: testSecret},
		},
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

func webhook(mutate func(w *schemas.WebhookTarget)) func(r *schemas.NotificationRule) {
	return func(r *schemas.NotificationRule) { mutate(r.Spec.Webhook) }
}

// ruleCase is a rule and the errors Validate finds in it.
type ruleCase struct {
	rule *schemas.NotificationRule
	want schemas.ErrorList
}

func TestNotificationRuleValidate(t *testing.T) {
	d := func(s string) schemas.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return schemas.Duration(v)
	}
	// webhookURL sets the webhook's URL and wants one error on it.
	webhookURL := func(url, detail string) ruleCase {
		return ruleCase{rule: rule(webhook(func(w *schemas.WebhookTarget) { w.URL = url })),
			want: schemas.ErrorList{{Field: "spec.webhook.url", Detail: detail}}}
	}
	tests := map[string]ruleCase{
		// Valid rules.
		"webhook":              {rule: rule()},
		"empty match":          {rule: rule(func(r *schemas.NotificationRule) { r.Spec.Match = schemas.NotificationMatch{} })},
		"defaulted":            {rule: rule(func(r *schemas.NotificationRule) { r.Default() })},
		"empty workspace":      {rule: rule(func(r *schemas.NotificationRule) { r.Metadata.Workspace = ""; r.Spec.Subject = "dlc.default.notify.x" })},
		"secretRef":            {rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Secret = ""; w.SecretRef = &schemas.SecretRef{Name: "hook-key"} }))},
		"subject outside dlc":  {rule: rule(func(r *schemas.NotificationRule) { r.Spec.Webhook = nil; r.Spec.Subject = "team.alerts" })},
		"subject under notify": {rule: rule(func(r *schemas.NotificationRule) { r.Spec.Subject = "dlc.vision.notify.cv.terminal" })},
		"http URL with port":   {rule: rule(webhook(func(w *schemas.WebhookTarget) { w.URL = "http://127.0.0.1:8080/hook?x=1" }))},
		"custom headers": {rule: rule(webhook(func(w *schemas.WebhookTarget) {
			w.Headers = map[string]string{"Authorization": "Bearer x", "X-Team": ""}
		}))},
		"bounds": {rule: rule(func(r *schemas.NotificationRule) {
			r.Spec.Delivery = schemas.DeliveryPolicy{MaxAttempts: 20, Backoff: schemas.Backoff{Initial: d("1h"), Max: d("1h")}}
		})},
		"every phase": {rule: rule(func(r *schemas.NotificationRule) {
			r.Spec.Match.Phases = []schemas.JobPhase{"Pending", "Queued", "HealthCheck", "Launching", "Running", "Restarting", "Succeeded", "Failed", "Stopped"}
		})},
		"labels and jobs": {rule: rule(func(r *schemas.NotificationRule) {
			r.Spec.Match.Labels = map[string]string{"team": "cv"}
			r.Spec.Match.Jobs = []string{"a", "b-2"}
		})},
		"reasons and names": {rule: rule(func(r *schemas.NotificationRule) {
			r.Spec.Match.Reasons = []string{"QuotaExceeded", "Hang"}
			r.Spec.Match.Experiments = []string{"tune"}
			r.Spec.Match.Pipelines = []string{"nightly"}
			r.Spec.Match.Schedules = []string{"every-night"}
		})},
		"chat formats": {rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Format = schemas.FormatSlack }))},
		"dingtalk with a bot secret": {rule: rule(webhook(func(w *schemas.WebhookTarget) {
			w.Format = schemas.FormatDingTalk
			w.BotSecret = "SECabc"
		}))},
		"feishu with a bot secretRef": {rule: rule(webhook(func(w *schemas.WebhookTarget) {
			w.Format = schemas.FormatFeishu
			w.BotSecretRef = &schemas.SecretRef{Name: "lark-bot"}
		}))},
		"template": {rule: rule(webhook(func(w *schemas.WebhookTarget) {
			w.Format = schemas.FormatTemplate
			w.Template = &schemas.WebhookTemplate{Body: `{"title":{{json .Title}},"team":{{json (index .Event "data" "labels" "team")}}}`, ContentType: "application/json; charset=utf-8"}
		}))},
		"email": {rule: rule(func(r *schemas.NotificationRule) {
			r.Spec.Webhook = nil
			r.Spec.Email = &schemas.EmailTarget{To: []string{"ops@example.com", "Team <team@example.com>"}, From: "dlc@example.com",
				SMTP: schemas.SMTPServer{Host: "smtp.example.com", Username: "dlc", PasswordRef: &schemas.SecretRef{Name: "smtp"}}}
		})},
		"email defaulted": {rule: rule(func(r *schemas.NotificationRule) {
			r.Spec.Email = &schemas.EmailTarget{To: []string{"ops@example.com"}, From: "dlc@example.com",
				SMTP: schemas.SMTPServer{Host: "10.0.0.5", TLS: schemas.SMTPNoTLS}}
			r.Default()
		})},
		"max backoff without min": {rule: rule(func(r *schemas.NotificationRule) { r.Spec.Delivery.Backoff.Max = d("10ms") })},

		// Invalid rules.
		"format problems": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Format = "teams"
				w.Template = &schemas.WebhookTemplate{Body: "x"}
				w.BotSecret = "SECabc"
			})),
			want: schemas.ErrorList{
				{Field: "spec.webhook.botSecret", Detail: "only for format dingtalk or feishu"},
				{Field: "spec.webhook.format", Detail: "must be one of cloudevents, slack, dingtalk, feishu, wecom, template"},
				{Field: "spec.webhook.template", Detail: "only for format template"},
			},
		},
		"template missing": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Format = schemas.FormatTemplate })),
			want: schemas.ErrorList{{Field: "spec.webhook.template", Detail: "required"}},
		},
		"template problems": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Format = schemas.FormatTemplate
				w.Template = &schemas.WebhookTemplate{Body: "{{.Nope}}", ContentType: "not a type"}
			})),
			want: schemas.ErrorList{
				{Field: "spec.webhook.template.body", Detail: `fails on a sample event: body:1:2: executing "body" at <.Nope>: can't evaluate field Nope in type *schemas.NotificationMessage`},
				{Field: "spec.webhook.template.contentType", Detail: "must be a media type such as application/json"},
			},
		},
		"template syntax": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Format = schemas.FormatTemplate
				w.Template = &schemas.WebhookTemplate{Body: "{{if .Title}}"}
			})),
			want: schemas.ErrorList{{Field: "spec.webhook.template.body", Detail: "body:1: unexpected EOF"}},
		},
		"template without bounds": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Format = schemas.FormatTemplate
				w.Template = &schemas.WebhookTemplate{Body: "{{range 1000000000}}x{{end}}"}
			})),
			want: schemas.ErrorList{{Field: "spec.webhook.template.body", Detail: "line 1: range over a number is not allowed"}},
		},
		"template output too large": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Format = schemas.FormatTemplate
				w.Template = &schemas.WebhookTemplate{Body: `{{define "a"}}{{.Title}}{{.Title}}{{.Title}}{{.Title}}{{.Title}}{{.Title}}{{.Title}}{{.Title}}{{end}}` +
					`{{define "b"}}{{template "a" .}}{{template "a" .}}{{template "a" .}}{{template "a" .}}{{template "a" .}}{{template "a" .}}{{template "a" .}}{{template "a" .}}{{end}}` +
					`{{define "c"}}{{template "b" .}}{{template "b" .}}{{template "b" .}}{{template "b" .}}{{template "b" .}}{{template "b" .}}{{template "b" .}}{{template "b" .}}{{end}}` +
					`{{define "d"}}{{template "c" .}}{{template "c" .}}{{template "c" .}}{{template "c" .}}{{template "c" .}}{{template "c" .}}{{template "c" .}}{{template "c" .}}{{end}}` +
					`{{template "d" .}}{{template "d" .}}{{template "d" .}}{{template "d" .}}{{template "d" .}}{{template "d" .}}{{template "d" .}}{{template "d" .}}`}
			})),
			want: schemas.ErrorList{{Field: "spec.webhook.template.body", Detail: `fails on a sample event: output exceeds 262144 bytes`}},
		},
		"bot secret twice": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Format = schemas.FormatFeishu
				w.BotSecret = "x"
				w.BotSecretRef = &schemas.SecretRef{Name: "k"}
			})),
			want: schemas.ErrorList{{Field: "spec.webhook.botSecretRef", Detail: "must not be set together with botSecret"}},
		},
		"email problems": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Email = &schemas.EmailTarget{To: []string{"not an address", "a@example.com", "a@example.com", "x@example.com\r\nBcc: evil@example.com"},
					SMTP: schemas.SMTPServer{Host: "smtp://mail.example.com:25", Port: 70000, TLS: schemas.SMTPNoTLS, PasswordRef: &schemas.SecretRef{Name: "smtp"}, Timeout: d("6m")}}
			}),
			want: schemas.ErrorList{
				{Field: "spec.email.from", Detail: "required"},
				{Field: "spec.email.smtp.host", Detail: "must be a host name or an IP address, without scheme or port"},
				{Field: "spec.email.smtp.port", Detail: "must be <= 65535"},
				{Field: "spec.email.smtp.timeout", Detail: "must be at most 5m0s"},
				{Field: "spec.email.smtp.tls", Detail: "must be starttls or implicit when credentials are given: none would send the password in clear"},
				{Field: "spec.email.smtp.username", Detail: "required with passwordRef"},
				{Field: "spec.email.to[0]", Detail: "must be an e-mail address such as ops@example.com"},
				{Field: "spec.email.to[2]", Detail: `duplicate "a@example.com" (first at spec.email.to[1])`},
				{Field: "spec.email.to[3]", Detail: "must not contain line breaks"},
			},
		},
		"email without recipients": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Email = &schemas.EmailTarget{From: "dlc@example.com", SMTP: schemas.SMTPServer{Host: "smtp.example.com"}}
			}),
			want: schemas.ErrorList{{Field: "spec.email.to", Detail: "must have at least 1 items"}},
		},
		"bad reasons and names": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Match.Reasons = []string{"Hang", "not a reason", "Hang"}
				r.Spec.Match.Experiments = []string{"Tune"}
				r.Spec.Match.Pipelines = []string{""}
				r.Spec.Match.Schedules = []string{"a", "a"}
			}),
			want: schemas.ErrorList{
				{Field: "spec.match.experiments[0]", Detail: dnsLabelMsg},
				{Field: "spec.match.pipelines[0]", Detail: "must not be empty"},
				{Field: "spec.match.reasons[1]", Detail: "must be a reason such as QuotaExceeded: a letter, then letters and digits"},
				{Field: "spec.match.reasons[2]", Detail: `duplicate "Hang" (first at spec.match.reasons[0])`},
				{Field: "spec.match.schedules[1]", Detail: `duplicate "a" (first at spec.match.schedules[0])`},
			},
		},
		"no target": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Webhook = nil }),
			want: schemas.ErrorList{{Field: "spec", Detail: "must set at least one of webhook, email and subject"}},
		},
		"wrong apiVersion and kind": {
			rule: rule(func(r *schemas.NotificationRule) { r.APIVersion = "v1"; r.Kind = schemas.KindTrainingJob }),
			want: schemas.ErrorList{
				{Field: "apiVersion", Detail: "must be opendlc.io/v1alpha1"},
				{Field: "kind", Detail: "must be NotificationRule"},
			},
		},
		"name not a DNS label": {
			rule: rule(func(r *schemas.NotificationRule) { r.Metadata.Name = "On_Failure" }),
			want: schemas.ErrorList{{Field: "metadata.name", Detail: dnsLabelMsg}},
		},
		"name missing": {
			rule: rule(func(r *schemas.NotificationRule) { r.Metadata.Name = "" }),
			want: schemas.ErrorList{{Field: "metadata.name", Detail: "required"}},
		},
		"URL problems":         webhookURL("ftp://hooks.example.com/x", "must be an http or https URL"),
		"URL without host":     webhookURL("https:///hook", "must name a host"),
		"URL with credentials": webhookURL("https://u:p@hooks.example.com/", "must not contain credentials; use headers or the signature instead"),
		"URL not a URL":        webhookURL("http://[::1", "must be a valid URL"),
		"URL missing":          webhookURL("", "required"),
		"URL too long":         webhookURL("https://h.example.com/"+strings.Repeat("a", 2048), "must be at most 2048 characters"),
		"no secret": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Secret = "" })),
			want: schemas.ErrorList{{Field: "spec.webhook.secret", Detail: "required unless secretRef is set: every webhook request is signed"}},
		},
		"secret and secretRef": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) { w.SecretRef = &schemas.SecretRef{Name: "k"} })),
			want: schemas.ErrorList{{Field: "spec.webhook.secretRef", Detail: "must not be set together with secret"}},
		},
		"bad secretRef name": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Secret = ""; w.SecretRef = &schemas.SecretRef{Name: "Key"} })),
			want: schemas.ErrorList{{Field: "spec.webhook.secretRef.name", Detail: dnsLabelMsg}},
		},
		"short secret": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Secret = "short" })),
			want: schemas.ErrorList{{Field: "spec.webhook.secret", Detail: "must be at least 16 characters"}},
		},
		"headers": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Headers = map[string]string{
					"Content-Type":        "text/plain",
					"x-opendlc-signature": "sha256=00",
					"Bad Header":          "x",
					"X-Ok":                "a\r\nInjected: yes",
					"X-Long":              strings.Repeat("v", 1025),
				}
			})),
			want: schemas.ErrorList{
				{Field: "spec.webhook.headers.Content-Type", Detail: "header is set by OpenDLC and cannot be given"},
				{Field: "spec.webhook.headers.X-Long", Detail: "value must be at most 1024 characters"},
				{Field: "spec.webhook.headers.X-Ok", Detail: "value must not contain control characters"},
				{Field: "spec.webhook.headers.x-opendlc-signature", Detail: "header is set by OpenDLC and cannot be given"},
				{Field: `spec.webhook.headers["Bad Header"]`, Detail: "header name must be at most 128 letters, digits and '-'"},
			},
		},
		"too many headers": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) {
				w.Headers = map[string]string{}
				for i := range 17 {
					w.Headers[fmt.Sprintf("X-H%d", i)] = "v"
				}
			})),
			want: schemas.ErrorList{{Field: "spec.webhook.headers", Detail: "must have at most 16 entries"}},
		},
		"timeouts": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Timeout = d("6m") })),
			want: schemas.ErrorList{{Field: "spec.webhook.timeout", Detail: "must be at most 5m0s"}},
		},
		"negative timeout": {
			rule: rule(webhook(func(w *schemas.WebhookTarget) { w.Timeout = d("-1s") })),
			want: schemas.ErrorList{{Field: "spec.webhook.timeout", Detail: "must not be negative"}},
		},
		"subject with a wildcard": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Subject = "dlc.vision.notify.>" }),
			want: schemas.ErrorList{{Field: "spec.subject", Detail: subjectMsg}},
		},
		"subject with an empty token": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Subject = "team..alerts" }),
			want: schemas.ErrorList{{Field: "spec.subject", Detail: subjectMsg}},
		},
		"subject of another workspace": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Subject = "dlc.nlp.notify.x" }),
			want: schemas.ErrorList{{Field: "spec.subject", Detail: "a subject in the dlc namespace must be under dlc.vision.notify."}},
		},
		"reply subject": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Subject = "_INBOX.abc" }),
			want: schemas.ErrorList{{Field: "spec.subject", Detail: "must not start with '_': such subjects are reserved by NATS clients"}},
		},
		"subject the events stream reads": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Subject = "dlc.vision.job.x.status" }),
			want: schemas.ErrorList{{Field: "spec.subject", Detail: "a subject in the dlc namespace must be under dlc.vision.notify."}},
		},
		"dead-letter subject elsewhere": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.DeadLetterSubject = "alerts.dead" }),
			want: schemas.ErrorList{{Field: "spec.deadLetterSubject", Detail: "must be under dlc.vision.notify."}},
		},
		"attempts out of range": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = 21 }),
			want: schemas.ErrorList{{Field: "spec.delivery.maxAttempts", Detail: "must be <= 20"}},
		},
		"negative attempts": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = -1 }),
			want: schemas.ErrorList{{Field: "spec.delivery.maxAttempts", Detail: "must be >= 0"}},
		},
		"backoff": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Delivery.Backoff = schemas.Backoff{Initial: d("2m"), Max: d("1m")}
			}),
			want: schemas.ErrorList{{Field: "spec.delivery.backoff.initial", Detail: "must not be greater than max (1m0s)"}},
		},
		"backoff too long": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Delivery.Backoff = schemas.Backoff{Initial: d("2h"), Max: d("3h")}
			}),
			want: schemas.ErrorList{
				{Field: "spec.delivery.backoff.initial", Detail: "must be at most 1h0m0s"},
				{Field: "spec.delivery.backoff.max", Detail: "must be at most 1h0m0s"},
			},
		},
		"match problems": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Match = schemas.NotificationMatch{
					Types:  []string{"job.phase", "opendlc.job.phase.v1", "opendlc.job.phase.v1", ""},
					Phases: []schemas.JobPhase{"Done", "Failed"},
					Labels: map[string]string{"-bad": "x", "team": "c v"},
					Jobs:   []string{"Bad_Job", "ok"},
				}
			}),
			want: schemas.ErrorList{
				{Field: "spec.match.jobs[0]", Detail: dnsLabelMsg},
				{Field: "spec.match.labels.-bad", Detail: labelKeyMsg},
				{Field: "spec.match.labels.team", Detail: labelValueMsg},
				{Field: "spec.match.phases[0]", Detail: phasesEnumMsg},
				{Field: "spec.match.types[0]", Detail: eventTypeMsg},
				{Field: "spec.match.types[2]", Detail: `duplicate "opendlc.job.phase.v1" (first at spec.match.types[1])`},
				{Field: "spec.match.types[3]", Detail: "must not be empty"},
			},
		},
		"lists too long": {
			rule: rule(func(r *schemas.NotificationRule) {
				for i := range 65 {
					r.Spec.Match.Jobs = append(r.Spec.Match.Jobs, fmt.Sprintf("j%d", i))
				}
				for i := range 17 {
					r.Spec.Match.Types = append(r.Spec.Match.Types, fmt.Sprintf("opendlc.t%d.v1", i))
				}
			}),
			want: schemas.ErrorList{
				{Field: "spec.match.jobs", Detail: "must have at most 64 items"},
				{Field: "spec.match.types", Detail: "must have at most 16 items"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			checkValidate(t, tt.rule, tt.want)
		})
	}
}

func TestNotificationRuleDefault(t *testing.T) {
	ms := func(n int) schemas.Duration { return schemas.Duration(time.Duration(n) * time.Millisecond) }
	tests := map[string]struct {
		rule *schemas.NotificationRule
		want *schemas.NotificationRule
	}{
		"fills everything": {
			rule: rule(func(r *schemas.NotificationRule) { r.Metadata.Workspace = "" }),
			want: rule(func(r *schemas.NotificationRule) {
				r.Metadata.Workspace = "default"
				r.Spec.Delivery = schemas.DeliveryPolicy{MaxAttempts: 5, Backoff: schemas.Backoff{Initial: ms(1000), Max: ms(60000)}}
				r.Spec.Webhook.Timeout = ms(10000)
				r.Spec.DeadLetterSubject = "dlc.default.notify.deadletter"
			}),
		},
		"keeps what is set": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Delivery = schemas.DeliveryPolicy{MaxAttempts: 2, Backoff: schemas.Backoff{Initial: ms(5), Max: ms(7)}}
				r.Spec.Webhook.Timeout = ms(3)
				r.Spec.DeadLetterSubject = "dlc.vision.notify.dead"
			}),
			want: rule(func(r *schemas.NotificationRule) {
				r.Spec.Delivery = schemas.DeliveryPolicy{MaxAttempts: 2, Backoff: schemas.Backoff{Initial: ms(5), Max: ms(7)}}
				r.Spec.Webhook.Timeout = ms(3)
				r.Spec.DeadLetterSubject = "dlc.vision.notify.dead"
			}),
		},
		"short max lowers the initial wait": {
			rule: rule(func(r *schemas.NotificationRule) { r.Spec.Delivery.Backoff.Max = ms(100) }),
			want: rule(func(r *schemas.NotificationRule) {
				r.Spec.Delivery = schemas.DeliveryPolicy{MaxAttempts: 5, Backoff: schemas.Backoff{Initial: ms(100), Max: ms(100)}}
				r.Spec.Webhook.Timeout = ms(10000)
				r.Spec.DeadLetterSubject = "dlc.vision.notify.deadletter"
			}),
		},
		"long initial raises the max": {
			rule: rule(func(r *schemas.NotificationRule) {
				r.Spec.Webhook = nil
				r.Spec.Subject = "team.alerts"
				r.Spec.Delivery.Backoff.Initial = ms(120000)
			}),
			want: rule(func(r *schemas.NotificationRule) {
				r.Spec.Webhook = nil
				r.Spec.Subject = "team.alerts"
				r.Spec.Delivery = schemas.DeliveryPolicy{MaxAttempts: 5, Backoff: schemas.Backoff{Initial: ms(120000), Max: ms(120000)}}
				r.Spec.DeadLetterSubject = "dlc.vision.notify.deadletter"
			}),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.rule.Default()
			if diff := cmp.Diff(tt.want, tt.rule); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
			again := *tt.rule
			again.Default()
			if diff := cmp.Diff(tt.rule, &again); diff != "" {
				t.Errorf("Default is not idempotent (-first +second):\n%s", diff)
			}
			if diff := cmp.Diff(schemas.ErrorList(nil), tt.rule.Validate()); diff != "" {
				t.Errorf("Validate after Default (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotificationMatchMatches(t *testing.T) {
	phase := func(job, p string, labels map[string]string) schemas.EventFacts {
		return schemas.EventFacts{Type: "opendlc.job.phase.v1", Job: job, Phase: p, Labels: labels}
	}
	metric := schemas.EventFacts{Type: "opendlc.job.metric.v1", Job: "a"}
	terminal := schemas.NotificationMatch{Phases: []schemas.JobPhase{"Succeeded", "Failed"}}
	tests := map[string]struct {
		match schemas.NotificationMatch
		facts schemas.EventFacts
		want  bool
	}{
		"empty match takes everything":   {facts: metric, want: true},
		"type listed":                    {match: schemas.NotificationMatch{Types: []string{"opendlc.job.metric.v1", "opendlc.job.phase.v1"}}, facts: phase("a", "Running", nil), want: true},
		"type not listed":                {match: schemas.NotificationMatch{Types: []string{"opendlc.job.phase.v1"}}, facts: metric, want: false},
		"phase listed":                   {match: terminal, facts: phase("a", "Failed", nil), want: true},
		"phase not listed":               {match: terminal, facts: phase("a", "Running", nil), want: false},
		"no phase when phases are given": {match: terminal, facts: metric, want: false},
		"phase is case-sensitive":        {match: terminal, facts: phase("a", "failed", nil), want: false},
		"job listed":                     {match: schemas.NotificationMatch{Jobs: []string{"a", "b"}}, facts: phase("b", "Running", nil), want: true},
		"job not listed":                 {match: schemas.NotificationMatch{Jobs: []string{"a"}}, facts: phase("c", "Running", nil), want: false},
		"no job when jobs are given":     {match: schemas.NotificationMatch{Jobs: []string{"a"}}, facts: schemas.EventFacts{Type: "opendlc.node.health.v1"}, want: false},
		"all labels equal": {
			match: schemas.NotificationMatch{Labels: map[string]string{"team": "cv", "tier": "prod"}},
			facts: phase("a", "Failed", map[string]string{"team": "cv", "tier": "prod", "extra": "x"}), want: true,
		},
		"one label differs": {
			match: schemas.NotificationMatch{Labels: map[string]string{"team": "cv", "tier": "prod"}},
			facts: phase("a", "Failed", map[string]string{"team": "cv", "tier": "dev"}), want: false,
		},
		"label missing": {
			match: schemas.NotificationMatch{Labels: map[string]string{"team": "cv"}},
			facts: phase("a", "Failed", nil), want: false,
		},
		"empty label value must be present": {
			match: schemas.NotificationMatch{Labels: map[string]string{"team": ""}},
			facts: phase("a", "Failed", nil), want: false,
		},
		"reason listed": {
			match: schemas.NotificationMatch{Reasons: []string{"QuotaExceeded", "Hang"}},
			facts: schemas.EventFacts{Type: "opendlc.job.phase.v1", Job: "a", Phase: "Failed", Reason: "Hang"}, want: true,
		},
		"reason not listed": {
			match: schemas.NotificationMatch{Reasons: []string{"QuotaExceeded"}},
			facts: schemas.EventFacts{Type: "opendlc.job.phase.v1", Job: "a", Phase: "Failed", Reason: "Hang"}, want: false,
		},
		"no reason when reasons are given": {match: schemas.NotificationMatch{Reasons: []string{"Hang"}}, facts: metric, want: false},
		"experiment listed": {
			match: schemas.NotificationMatch{Experiments: []string{"tune"}},
			facts: schemas.EventFacts{Type: "opendlc.experiment.phase.v1", Experiment: "tune", Phase: "Succeeded"}, want: true,
		},
		"experiment not listed": {
			match: schemas.NotificationMatch{Experiments: []string{"tune"}},
			facts: schemas.EventFacts{Type: "opendlc.experiment.trial.v1", Experiment: "other"}, want: false,
		},
		"job event when experiments are given": {match: schemas.NotificationMatch{Experiments: []string{"tune"}}, facts: phase("tune", "Failed", nil), want: false},
		"pipeline listed": {
			match: schemas.NotificationMatch{Pipelines: []string{"nightly"}},
			facts: schemas.EventFacts{Type: "opendlc.pipeline.phase.v1", Pipeline: "nightly", Job: "nightly-train-0", Phase: "Failed"}, want: true,
		},
		"pipeline step skipped": {
			match: schemas.NotificationMatch{Pipelines: []string{"nightly"}, Phases: []schemas.JobPhase{"Skipped", "Cancelled"}},
			facts: schemas.EventFacts{Type: "opendlc.pipeline.phase.v1", Pipeline: "nightly", Phase: "Skipped"}, want: true,
		},
		"pipeline not listed": {
			match: schemas.NotificationMatch{Pipelines: []string{"nightly"}},
			facts: schemas.EventFacts{Type: "opendlc.pipeline.phase.v1", Pipeline: "weekly", Phase: "Failed"}, want: false,
		},
		"schedule listed": {
			match: schemas.NotificationMatch{Schedules: []string{"every-night"}},
			facts: schemas.EventFacts{Type: "opendlc.schedule.run.v1", Schedule: "every-night"}, want: true,
		},
		"no schedule when schedules are given": {match: schemas.NotificationMatch{Schedules: []string{"every-night"}}, facts: metric, want: false},
		"pipeline and job both hold": {
			match: schemas.NotificationMatch{Pipelines: []string{"nightly"}, Jobs: []string{"train"}, Reasons: []string{"Hang"}},
			facts: schemas.EventFacts{Type: "opendlc.pipeline.phase.v1", Pipeline: "nightly", Job: "train", Reason: "Hang"}, want: true,
		},
		"every criterion": {
			match: schemas.NotificationMatch{Types: []string{"opendlc.job.phase.v1"}, Phases: []schemas.JobPhase{"Failed"},
				Jobs: []string{"a"}, Labels: map[string]string{"team": "cv"}},
			facts: phase("a", "Failed", map[string]string{"team": "cv"}), want: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.match.Matches(tt.facts)); diff != "" {
				t.Errorf("Matches(%+v) (-want +got):\n%s", tt.facts, diff)
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	b := schemas.Backoff{Initial: schemas.Duration(time.Second), Max: schemas.Duration(10 * time.Second)}
	tests := map[string]struct {
		attempt int
		want    time.Duration
	}{
		"after the first attempt": {attempt: 1, want: time.Second},
		"doubles":                 {attempt: 2, want: 2 * time.Second},
		"doubles again":           {attempt: 4, want: 8 * time.Second},
		"capped":                  {attempt: 5, want: 10 * time.Second},
		"stays capped":            {attempt: 60, want: 10 * time.Second},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, b.Delay(tt.attempt)); diff != "" {
				t.Errorf("Delay(%d) (-want +got):\n%s", tt.attempt, diff)
			}
		})
	}
}

func TestDecodeNotificationRule(t *testing.T) {
	s := func(d time.Duration) schemas.Duration { return schemas.Duration(d) }
	full := &schemas.NotificationRule{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindNotificationRule,
		Metadata:   schemas.ObjectMeta{Name: "cv-terminal", Workspace: "vision", Labels: map[string]string{"team": "cv"}},
		Spec: schemas.NotificationRuleSpec{
			Match: schemas.NotificationMatch{
				Types:  []string{"opendlc.job.phase.v1"},
				Phases: []schemas.JobPhase{schemas.JobSucceeded, schemas.JobFailed},
				Labels: map[string]string{"team": "cv", "app.kubernetes.io/name": "resnet"},
				Jobs:   []string{"resnet-ddp", "vit-large"},
			},
			Webhook: &schemas.WebhookTarget{
				URL:     "https://hooks.example.com/opendlc?channel=cv",
				Secret:  "0123456789abcdef0123456789abcdef",
				Headers: map[string]string{"Authorization": "Bearer abc", "X-Team": "cv"},
				Timeout: s(5 * time.Second),
			},
			Subject:           "dlc.vision.notify.terminal",
			Delivery:          schemas.DeliveryPolicy{MaxAttempts: 8, Backoff: schemas.Backoff{Initial: s(2 * time.Second), Max: s(5 * time.Minute)}},
			DeadLetterSubject: "dlc.vision.notify.dead",
		},
	}
	minimal := &schemas.NotificationRule{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindNotificationRule,
		Metadata:   schemas.ObjectMeta{Name: "failures", Workspace: "default"},
		Spec: schemas.NotificationRuleSpec{
			Match: schemas.NotificationMatch{Phases: []schemas.JobPhase{schemas.JobFailed}},
			Webhook: &schemas.WebhookTarget{
				URL:       "http://127.0.0.1:8080/hook",
				SecretRef: &schemas.SecretRef{Name: "hook-key"},
				Timeout:   schemas.DefaultWebhookTimeout,
			},
			Delivery:          schemas.DeliveryPolicy{MaxAttempts: 5, Backoff: schemas.Backoff{Initial: schemas.DefaultBackoffInitial, Max: schemas.DefaultBackoffMax}},
			DeadLetterSubject: "dlc.default.notify.deadletter",
		},
	}
	tests := map[string]struct {
		file string
		want *schemas.NotificationRule
	}{
		"YAML with every field":     {file: "testdata/notificationrule-valid.yaml", want: full},
		"minimal JSON is defaulted": {file: "testdata/notificationrule-minimal.json", want: minimal},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			doc := readFile(t, tt.file)
			obj, err := schemas.Decode(doc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, obj); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			r, err := schemas.DecodeNotificationRule(doc)
			if err != nil {
				t.Fatalf("DecodeNotificationRule: %v", err)
			}
			if diff := cmp.Diff(tt.want, r); diff != "" {
				t.Errorf("DecodeNotificationRule (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(schemas.ErrorList(nil), r.Validate()); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			if r.GetKind() != schemas.KindNotificationRule || r.GetMeta() != &r.Metadata {
				t.Errorf("GetKind/GetMeta do not describe the rule")
			}
		})
	}
}

func TestDecodeNotificationRuleErrors(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want schemas.ErrorList
	}{
		"a TrainingJob": {
			doc: minimalYAML,
			want: schemas.ErrorList{
				{Field: "kind", Detail: "must be NotificationRule"},
				{Field: "spec.command", Detail: "unknown field"},
				{Field: "spec.framework", Detail: "unknown field"},
				{Field: "spec.roles", Detail: "unknown field"},
			},
		},
		"no kind": {
			doc:  "apiVersion: opendlc.io/v1alpha1\nmetadata: {name: a}\nspec: {subject: x}\n",
			want: schemas.ErrorList{{Field: "kind", Detail: "required; must be NotificationRule"}},
		},
		"misspelt and mistyped fields": {
			doc: `apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: a}
spec:
  webhok: {url: https://x.example.com}
  match: {phases: Failed, jobs: [1]}
  delivery: {maxAttempts: "5", backoff: {initial: soon}}
`,
			want: schemas.ErrorList{
				{Field: "spec.delivery.backoff.initial", Detail: `invalid duration "soon": must look like "90s", "10m" or "72h"`},
				{Field: "spec.delivery.maxAttempts", Detail: "must be an integer"},
				{Field: "spec.match.jobs[0]", Detail: "must be a string"},
				{Field: "spec.match.phases", Detail: "must be a list"},
				{Field: "spec.webhok", Detail: `unknown field; did you mean "webhook"?`},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := schemas.DecodeNotificationRule([]byte(tt.doc))
			checkErrorList(t, "DecodeNotificationRule", err, tt.want)
		})
	}
}

var refPattern = regexp.MustCompile(`"\$ref": "#/\$defs/([^"]+)"`)

// TestNotificationRuleJSONSchemaRefs checks that every $ref of the checked-in
// NotificationRule schema resolves.
func TestNotificationRuleJSONSchemaRefs(t *testing.T) {
	data, err := os.ReadFile("jsonschema/notificationrule.schema.json")
	if err != nil {
		t.Fatalf("%v; run %s", err, regenerate)
	}
	var doc struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	refs := 0
	for _, m := range refPattern.FindAllStringSubmatch(string(data), -1) {
		refs++
		if _, ok := doc.Defs[m[1]]; !ok {
			t.Errorf("$ref %q does not resolve", m[0])
		}
	}
	if refs == 0 {
		t.Fatal("no $ref found")
	}
}
