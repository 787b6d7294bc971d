// Package console is OpenDLC's web console: server-rendered pages (html/template) with
// small scripts, served by the API server under /ui/. Its assets are embedded in the
// binary, so it needs nothing beyond Go to build.
//
// A user signs in with an API token. The console keeps the token in memory, gives the
// browser a session cookie (HttpOnly, SameSite=Strict, Secure under TLS) and calls the
// API in-process with the token (inProcess): every page reads and every action
// changes what the API lets that token read and change, through the API's own
// authentication, authorization and audit. There is no second authorization path.
// Every mutating form carries the session's CSRF token.
package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/client"
)

// Prefix is where the console is served.
const Prefix = "/ui/"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a Console.
type Options struct {
	// TLS says the server serves HTTPS: cookies are then Secure.
	TLS bool
	// SessionTTL bounds a session (a token that expires sooner ends it sooner);
	// default 12 hours.
	SessionTTL time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Console serves the web console in front of an API handler.
type Console struct {
	api      http.Handler
	opts     Options
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
}

// Mount returns a handler that serves the console under /ui/ and everything else
// with apiHandler.
func Mount(apiHandler http.Handler, opts Options) http.Handler {
	c := New(apiHandler, opts)
	mux := http.NewServeMux()
	mux.Handle(Prefix, c)
	mux.Handle("/ui", http.RedirectHandler(Prefix, http.StatusFound))
	mux.Handle("/", apiHandler)
	return mux
}

// New returns the console over the API served by apiHandler.
func New(apiHandler http.Handler, opts Options) *Console {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Console{api: apiHandler, opts: opts, sessions: newSessions(opts.SessionTTL), pages: parsePages()}
	c.routes()
	return c
}

// parsePages parses each page template with the layout.
func parsePages() map[string]*template.Template {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		pages[base] = template.Must(template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n))
	}
	return pages
}

// routes registers the console's pages. Paths under /ui/ws/{ws}/ are the objects of
// workspace ws, read with the session's token: another workspace's answer the API's
// 404.
func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticHandler(static)))
	m.HandleFunc("GET /ui/login", c.loginPage)
	m.HandleFunc("POST /ui/login", c.login)
	m.HandleFunc("POST /ui/logout", c.signedIn(c.logout))
	m.HandleFunc("GET /ui/{$}", c.signedIn(c.home))

	// Each kind's pages (consoleKinds, kinds.go).
	for _, k := range consoleKinds {
		for _, p := range k.pages {
			m.HandleFunc(p.pattern, c.signedIn(p.handler(c)))
		}
	}

	m.HandleFunc("GET /ui/ws/{ws}/nodes", c.signedIn(c.nodesPage))
	m.HandleFunc("GET /ui/ws/{ws}/workspace", c.signedIn(c.workspacePage))
	m.HandleFunc("GET /ui/ws/{ws}/history", c.signedIn(c.historyPage))
	m.HandleFunc("GET /ui/ws/{ws}/history/{kind}/{uid}", c.signedIn(c.runPage))
	m.HandleFunc("GET /ui/ws/{ws}/usage", c.signedIn(c.usagePage))
	c.mux = m
}

// ServeHTTP serves the console, with headers that keep its pages out of frames and
// off other sites' scripts.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	c.mux.ServeHTTP(w, r)
}

// staticHandler serves the embedded scripts and styles, cached for an hour.
func staticHandler(fsys fs.FS) http.Handler {
	fh := http.FileServer(http.FS(fsys))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fh.ServeHTTP(w, r)
	})
}

// call is one signed-in request: its session, the API client with the session's
// token, and the workspace the path names.
type call struct {
	s   *session
	api *client.Client
	ws  string
}

// canWrite says whether the session's role may change objects: actions it may not
// take are not shown (the API refuses them anyway).
func (k *call) canWrite() bool { return auth.Allows(k.s.who.Role, auth.VerbWrite) }

// signedIn wraps a handler of a signed-in user: without a live session a page
// redirects to the sign-in page (other requests answer 401); a POST must carry the
// session's CSRF token (403 otherwise, before anything is done). The handler's error
// is shown as an error page with the API's status and message.
func (c *Console) signedIn(h func(http.ResponseWriter, *http.Request, *call) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := c.sessionOf(r)
		if ss == nil {
			c.needSignIn(w, r)
			return
		}
		if r.Method == http.MethodPost && !checkCSRF(r, ss) {
			c.errorPage(w, r, ss, http.StatusForbidden, "The form's CSRF token is missing or wrong: reload the page and try again.")
			return
		}
		ac, err := client.New("http://console.invalid", client.WithToken(ss.token),
			client.WithHTTPClient(&http.Client{Transport: inProcess{api: c.api, remoteAddr: r.RemoteAddr}}))
		if err != nil {
			c.errorPage(w, r, ss, http.StatusInternalServerError, err.Error())
			return
		}
		k := &call{s: ss, api: ac, ws: r.PathValue("ws")}
		if err := h(w, r, k); err != nil {
			c.fail(w, r, ss, err)
		}
	}
}

// needSignIn sends a page request to the sign-in page, and answers 401 otherwise.
func (c *Console) needSignIn(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" && r.URL.Query().Get("partial") == "" {
		http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	http.Error(w, "sign in first", http.StatusUnauthorized)
}

// fail answers a handler's error: the API's status and message, or a sign-in page
// when the API no longer accepts the session's token.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, ss *session, err error) {
	if ae, ok := errors.AsType[*client.Error](err); ok {
		if ae.Status == http.StatusUnauthorized {
			c.sessions.end(ss.id)
			c.needSignIn(w, r)
			return
		}
		c.errorPage(w, r, ss, ae.Status, ae.Error())
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	c.opts.Logger.Warn("console", "path", r.URL.Path, "error", err)
	c.errorPage(w, r, ss, http.StatusBadGateway, err.Error())
}

// page is what every page template gets.
type page struct {
	Title string
	// Nav is the navigation entry to mark current.
	Nav  string
	WS   string
	CSRF string
	Who  *api.Identity
	// CanWrite shows the actions that change objects.
	CanWrite bool
	Data     any
}

func (k *call) page(title, nav string, data any) page {
	return page{Title: title, Nav: nav, WS: k.ws, CSRF: k.s.csrf, Who: &k.s.who, CanWrite: k.canWrite(), Data: data}
}

// render writes page name, or only its template partial when that is set.
func (c *Console) render(w http.ResponseWriter, status int, name, partial string, p page) error {
	t := c.pages[name]
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if partial != "" {
		return t.ExecuteTemplate(w, partial, p)
	}
	return t.ExecuteTemplate(w, "layout", p)
}

// errorPage shows an error with its status.
func (c *Console) errorPage(w http.ResponseWriter, _ *http.Request, ss *session, status int, msg string) {
	p := page{Title: http.StatusText(status), Data: struct {
		Status  int
		Message string
	}{status, msg}}
	if ss != nil {
		p.CSRF, p.Who, p.WS = ss.csrf, &ss.who, ss.who.Workspace
		if p.WS == api.AllWorkspaces {
			p.WS = ""
		}
	}
	if err := c.render(w, status, "error", "", p); err != nil {
		c.opts.Logger.Warn("console: render error page", "error", err)
	}
}

// home sends a signed-in user to the jobs of the token's workspace (an admin's token,
// of every workspace, to the list of workspaces).
func (c *Console) home(w http.ResponseWriter, r *http.Request, k *call) error {
	if k.s.who.Workspace != api.AllWorkspaces {
		http.Redirect(w, r, wsPath(k.s.who.Workspace, "jobs"), http.StatusSeeOther)
		return nil
	}
	list, err := k.api.ListWorkspaces(r.Context())
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "workspaces", "", k.page("Workspaces", "", list))
}

// wsPath is the console path of a workspace's page: /ui/ws/{ws}/{parts...}, escaped.
func wsPath(ws string, parts ...string) string {
	var b strings.Builder
	b.WriteString(Prefix + "ws/" + url.PathEscape(ws))
	for _, part := range parts {
		b.WriteString("/" + url.PathEscape(part))
	}
	return b.String()
}
