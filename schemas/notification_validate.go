package schemas

import (
	"math"
	"mime"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Patterns of a NotificationRule's jsonschema tags; TestNotificationPatternTags keeps the
// tags and these constants in step.
const (
	natsSubjectPattern = `^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	eventTypePattern   = `^opendlc(\.[a-z0-9]+)+\.v[0-9]+$`
	reasonPattern      = `^[A-Za-z][A-Za-z0-9]*$`
	headerNamePattern  = `^[A-Za-z0-9-]+$`
	headerValuePattern = `^[^\x00-\x1f\x7f]*$`
)

func init() {
	patternMessages[natsSubjectPattern] = "must be a NATS subject: tokens of letters, digits, '_' and '-' separated by '.', without wildcards"
	patternMessages[reasonPattern] = "must be a reason such as QuotaExceeded: a letter, then letters and digits"
	patternMessages[eventTypePattern] = "must be an OpenDLC event type such as opendlc.job.phase.v1"
}

var (
	headerNameRE  = regexp.MustCompile(headerNamePattern)
	headerValueRE = regexp.MustCompile(headerValuePattern)
)

// Bounds of a NotificationRule that its struct tags cannot express.
const (
	maxWebhookHeaders    = 16
	maxHeaderNameLength  = 128
	maxHeaderValueLength = 1024
	maxWebhookTimeout    = Duration(5 * time.Minute)
	maxBackoff           = Duration(time.Hour)
	reservedHeaderPrefix = "x-opendlc-"
)

// reservedHeaders are set by the dispatcher on every webhook request.
var reservedHeaders = []string{"connection", "content-length", "content-type", "host", "transfer-encoding"}

// GetKind returns KindNotificationRule.
func (r *NotificationRule) GetKind() Kind { return KindNotificationRule }

// GetMeta returns the rule's metadata.
func (r *NotificationRule) GetMeta() *ObjectMeta { return &r.Metadata }

// Default fills in the workspace, the delivery policy, the webhook timeout and the
// dead-letter subject.
func (r *NotificationRule) Default() {
	if r.Metadata.Workspace == "" {
		r.Metadata.Workspace = DefaultWorkspace
	}
	d := &r.Spec.Delivery
	if d.MaxAttempts == 0 {
		d.MaxAttempts = DefaultMaxAttempts
	}
	if d.Backoff.Initial == 0 {
		d.Backoff.Initial = DefaultBackoffInitial
		if d.Backoff.Max > 0 && d.Backoff.Max < d.Backoff.Initial {
			d.Backoff.Initial = d.Backoff.Max
		}
	}
	if d.Backoff.Max == 0 {
		d.Backoff.Max = max(DefaultBackoffMax, d.Backoff.Initial)
	}
	if w := r.Spec.Webhook; w != nil && w.Timeout == 0 {
		w.Timeout = DefaultWebhookTimeout
	}
	if e := r.Spec.Email; e != nil {
		s := &e.SMTP
		if s.TLS == "" {
			s.TLS = SMTPStartTLS
		}
		if s.Port == 0 {
			s.Port = 587
			if s.TLS == SMTPImplicit {
				s.Port = 465
			}
		}
		if s.Timeout == 0 {
			s.Timeout = DefaultSMTPTimeout
		}
	}
	if r.Spec.DeadLetterSubject == "" {
		r.Spec.DeadLetterSubject = DefaultDeadLetterSubject(r.Metadata.Workspace)
	}
}

// Validate returns every problem with the rule, sorted by field path, or nil. It does
// not apply defaults, and accepts the empty values that Default would fill in.
func (r *NotificationRule) Validate() ErrorList {
	var errs ErrorList
	validateHeader(r, r.APIVersion, r.Kind, &errs)
	workspace := r.Metadata.Workspace
	if workspace == "" {
		workspace = DefaultWorkspace
	}
	r.Spec.validate(workspace, NewPath("spec"), &errs)

	errs.Sort()
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func (s *NotificationRuleSpec) validate(workspace string, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }

	if s.Webhook == nil && s.Email == nil && s.Subject == "" {
		add(Invalid(p, "must set at least one of webhook, email and subject"))
	}
	validateLabels(s.Match.Labels, p.Child("match", "labels"), errs)
	validateUnique(s.Match.Types, p.Child("match", "types"), errs)
	validateUnique(s.Match.Phases, p.Child("match", "phases"), errs)
	validateUnique(s.Match.Jobs, p.Child("match", "jobs"), errs)
	validateUnique(s.Match.Reasons, p.Child("match", "reasons"), errs)
	validateUnique(s.Match.Experiments, p.Child("match", "experiments"), errs)
	validateUnique(s.Match.Pipelines, p.Child("match", "pipelines"), errs)
	validateUnique(s.Match.Schedules, p.Child("match", "schedules"), errs)
	if s.Webhook != nil {
		s.Webhook.validate(p.Child("webhook"), errs)
	}
	if s.Email != nil {
		s.Email.validate(p.Child("email"), errs)
	}
	if s.Subject != "" && natsSubjectRE.MatchString(s.Subject) {
		validateOutSubject(s.Subject, workspace, p.Child("subject"), errs)
	}
	if s.DeadLetterSubject != "" && natsSubjectRE.MatchString(s.DeadLetterSubject) &&
		!strings.HasPrefix(s.DeadLetterSubject, NotifySubjectPrefix(workspace)) {
		add(Invalid(p.Child("deadLetterSubject"), "must be under %s", NotifySubjectPrefix(workspace)))
	}

	if s.Alert != nil {
		s.Alert.validate(p.Child("alert"), errs)
		m, mp := s.Match, p.Child("match")
		for _, f := range []struct {
			name string
			set  bool
		}{{"types", len(m.Types) > 0}, {"phases", len(m.Phases) > 0}, {"reasons", len(m.Reasons) > 0},
			{"experiments", len(m.Experiments) > 0}, {"pipelines", len(m.Pipelines) > 0}, {"schedules", len(m.Schedules) > 0}} {
			if f.set {
				add(Invalid(mp.Child(f.name), "must not be set with alert: an alert's match selects jobs by jobs and labels"))
			}
		}
	}

	b, bp := s.Delivery.Backoff, p.Child("delivery", "backoff")
	if b.Initial > maxBackoff {
		add(Invalid(bp.Child("initial"), "must be at most %s", maxBackoff.D()))
	}
	if b.Max > maxBackoff {
		add(Invalid(bp.Child("max"), "must be at most %s", maxBackoff.D()))
	}
	if b.Initial > 0 && b.Max > 0 && b.Initial > b.Max {
		add(Invalid(bp.Child("initial"), "must not be greater than max (%s)", b.Max.D()))
	}
}

var natsSubjectRE = regexp.MustCompile(natsSubjectPattern)

func (a *NotificationAlert) validate(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) } // metric: required by its tags
	n := 0
	for _, set := range []bool{a.Above != nil, a.Below != nil, a.AbsentFor != 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		add(Invalid(p, "must set exactly one of above, below and absentFor"))
	}
	window := func(name string, d Duration) {
		if d < MinAlertWindow || d > MaxAlertWindow {
			add(Invalid(p.Child(name), "must be between %s and %s", MinAlertWindow.D(), MaxAlertWindow.D()))
		}
	}
	for _, v := range []struct {
		name string
		x    *float64
	}{{"above", a.Above}, {"below", a.Below}} {
		if v.x != nil && (math.IsNaN(*v.x) || math.IsInf(*v.x, 0)) {
			add(Invalid(p.Child(v.name), "must be a finite number"))
		}
	}
	switch {
	case a.AbsentFor != 0:
		window("absentFor", a.AbsentFor)
		if a.For != 0 {
			add(Invalid(p.Child("for"), "must not be set with absentFor"))
		}
	case a.Above != nil || a.Below != nil:
		if a.For == 0 {
			add(Required(p.Child("for")))
		} else {
			window("for", a.For)
		}
	}
}

// validateOutSubject keeps a forwarding subject out of other workspaces and out of the
// streams the system itself reads, so a rule can neither forge another workspace's
// events nor loop.
func validateOutSubject(subject, workspace string, p Path, errs *ErrorList) {
	if strings.HasPrefix(subject, "_") {
		// _INBOX.> and the like carry replies to other clients' requests.
		*errs = append(*errs, Invalid(p, "must not start with '_': such subjects are reserved by NATS clients"))
		return
	}
	if subject != "dlc" && !strings.HasPrefix(subject, "dlc.") {
		return
	}
	prefix := NotifySubjectPrefix(workspace)
	if !strings.HasPrefix(subject, prefix) {
		*errs = append(*errs, Invalid(p, "a subject in the dlc namespace must be under %s", prefix))
	}
}

func (w *WebhookTarget) validate(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }

	if w.URL != "" && utf8.RuneCountInString(w.URL) <= 2048 {
		if msg := validateWebhookURL(w.URL); msg != "" {
			add(Invalid(p.Child("url"), "%s", msg))
		}
	}
	switch {
	case w.Secret == "" && w.SecretRef == nil:
		add(Invalid(p.Child("secret"), "required unless secretRef is set: every webhook request is signed"))
	case w.Secret != "" && w.SecretRef != nil:
		add(Invalid(p.Child("secretRef"), "must not be set together with secret"))
	}
	hp := p.Child("headers")
	if len(w.Headers) > maxWebhookHeaders {
		add(Invalid(hp, "must have at most %d entries", maxWebhookHeaders))
	}
	for _, k := range sortedKeys(w.Headers) {
		kp := hp.Key(k)
		lower := strings.ToLower(k)
		switch {
		case len(k) > maxHeaderNameLength || !headerNameRE.MatchString(k):
			add(Invalid(kp, "header name must be at most %d letters, digits and '-'", maxHeaderNameLength))
		case strings.HasPrefix(lower, reservedHeaderPrefix) || slices.Contains(reservedHeaders, lower):
			add(Invalid(kp, "header is set by OpenDLC and cannot be given"))
		}
		v := w.Headers[k]
		if utf8.RuneCountInString(v) > maxHeaderValueLength {
			add(Invalid(kp, "value must be at most %d characters", maxHeaderValueLength))
		} else if !headerValueRE.MatchString(v) {
			add(Invalid(kp, "value must not contain control characters"))
		}
	}
	if w.Timeout > maxWebhookTimeout {
		add(Invalid(p.Child("timeout"), "must be at most %s", maxWebhookTimeout.D()))
	}
	w.validateFormat(p, errs)
}

// validateFormat checks the template and the bot secret against the format.
func (w *WebhookTarget) validateFormat(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	switch {
	case w.Format == FormatTemplate && w.Template == nil:
		add(Required(p.Child("template")))
	case w.Format != FormatTemplate && w.Template != nil:
		add(Invalid(p.Child("template"), "only for format template"))
	case w.Template != nil:
		tp := p.Child("template")
		if w.Template.Body != "" {
			if t, err := ParseNotificationTemplate(w.Template.Body); err != nil {
				add(Invalid(tp.Child("body"), "%s", templateError(err)))
			} else if _, err := ExecuteNotificationTemplate(t, SampleNotificationMessage()); err != nil {
				add(Invalid(tp.Child("body"), "fails on a sample event: %s", templateError(err)))
			}
		}
		if ct := w.Template.ContentType; ct != "" {
			if _, _, err := mime.ParseMediaType(ct); err != nil || !headerValueRE.MatchString(ct) {
				add(Invalid(tp.Child("contentType"), "must be a media type such as application/json"))
			}
		}
	}
	bot := w.BotSecret != "" || w.BotSecretRef != nil
	switch {
	case bot && w.Format != FormatDingTalk && w.Format != FormatFeishu:
		field := "botSecret"
		if w.BotSecret == "" {
			field = "botSecretRef"
		}
		add(Invalid(p.Child(field), "only for format dingtalk or feishu"))
	case w.BotSecret != "" && w.BotSecretRef != nil:
		add(Invalid(p.Child("botSecretRef"), "must not be set together with botSecret"))
	}
}

// templateError is a template error's text without the template's name.
func templateError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "template: ")
	return sanitizeTemplateText(s)
}

// sanitizeTemplateText keeps an error message on one line.
func sanitizeTemplateText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Bounds of an e-mail target.
const maxSMTPTimeout = Duration(5 * time.Minute)

func (e *EmailTarget) validate(p Path, errs *ErrorList) {
	add := func(fe *FieldError) { *errs = append(*errs, fe) }
	addr := func(v string, fp Path) {
		if v == "" {
			return // validateTags says required, or the list's check says empty
		}
		if strings.ContainsAny(v, "\r\n") {
			add(Invalid(fp, "must not contain line breaks"))
			return
		}
		if _, err := mail.ParseAddress(v); err != nil {
			add(Invalid(fp, "must be an e-mail address such as ops@example.com"))
		}
	}
	for i, v := range e.To {
		addr(v, p.Child("to").Index(i))
	}
	for i, v := range e.Cc {
		addr(v, p.Child("cc").Index(i))
	}
	validateUnique(e.To, p.Child("to"), errs)
	validateUnique(e.Cc, p.Child("cc"), errs)
	addr(e.From, p.Child("from"))

	sp := p.Child("smtp")
	if h := e.SMTP.Host; h != "" && !validSMTPHost(h) {
		add(Invalid(sp.Child("host"), "must be a host name or an IP address, without scheme or port"))
	}
	if (e.SMTP.Username == "") != (e.SMTP.PasswordRef == nil) {
		if e.SMTP.Username == "" {
			add(Invalid(sp.Child("username"), "required with passwordRef"))
		} else {
			add(Invalid(sp.Child("passwordRef"), "required with username"))
		}
	}
	if e.SMTP.TLS == SMTPNoTLS && e.SMTP.PasswordRef != nil {
		add(Invalid(sp.Child("tls"), "must be starttls or implicit when credentials are given: none would send the password in clear"))
	}
	if e.SMTP.Timeout > maxSMTPTimeout {
		add(Invalid(sp.Child("timeout"), "must be at most %s", maxSMTPTimeout.D()))
	}
}

// validSMTPHost reports whether h is an IP address or a DNS name.
func validSMTPHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if len(h) > maxDNSSubdomainLen {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || !smtpLabelRE.MatchString(label) {
			return false
		}
	}
	return true
}

var smtpLabelRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$`)

// validateWebhookURL says what is wrong with a webhook URL, or returns "".
func validateWebhookURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "must be a valid URL"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case u.User != nil:
		return "must not contain credentials; use headers or the signature instead"
	case u.Fragment != "":
		return "must not contain a fragment"
	}
	return ""
}

// validateUnique reports entries of a list that are empty or repeated.
func validateUnique[T ~string](list []T, p Path, errs *ErrorList) {
	first := map[T]int{}
	for i, v := range list {
		if v == "" {
			*errs = append(*errs, Invalid(p.Index(i), "must not be empty"))
			continue
		}
		if j, ok := first[v]; ok {
			*errs = append(*errs, Invalid(p.Index(i), "duplicate %q (first at %s)", v, p.Index(j)))
			continue
		}
		first[v] = i
	}
}
