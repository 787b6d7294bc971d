package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/opendlc/opendlc/client"
)

// loginData is the sign-in page's.
type loginData struct {
	Next, Error string
}

// loginPage shows the sign-in form, with a fresh CSRF token in a cookie and the form
// (double submit: there is no session yet).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, http.StatusOK, safeNext(r.URL.Query().Get("next")), "")
}

func (c *Console) showLogin(w http.ResponseWriter, status int, next, msg string) {
	tok := randomToken()
	http.SetCookie(w, c.cookie(loginCookie, tok, 3600))
	p := page{Title: "Sign in", CSRF: tok, Data: loginData{Next: next, Error: msg}}
	if err := c.render(w, status, "login", "", p); err != nil {
		c.opts.Logger.Warn("console: render sign-in page", "error", err)
	}
}

// login checks the token with the API (whoami) and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameOrigin(r) || !equalTokens(r.PostFormValue(csrfField), ck.Value) {
		c.errorPage(w, r, nil, http.StatusForbidden, "The sign-in form's CSRF token is missing or wrong: reload the page and try again.")
		return
	}
	next := safeNext(r.PostFormValue("next"))
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		c.showLogin(w, http.StatusUnprocessableEntity, next, "Enter an API token (dlc_...).")
		return
	}
	ac, err := client.New("http://console.invalid", client.WithToken(token),
		client.WithHTTPClient(&http.Client{Transport: inProcess{api: c.api, remoteAddr: r.RemoteAddr}}))
	if err != nil {
		c.errorPage(w, r, nil, http.StatusInternalServerError, err.Error())
		return
	}
	who, err := ac.Whoami(r.Context())
	if err != nil {
		status := http.StatusUnauthorized
		if ae := (*client.Error)(nil); errors.As(err, &ae) && ae.Status != http.StatusUnauthorized {
			status = ae.Status
		}
		c.showLogin(w, status, next, "Sign-in refused: "+err.Error())
		return
	}
	ss := c.sessions.create(token, *who)
	http.SetCookie(w, c.cookie(loginCookie, "", -1))
	http.SetCookie(w, c.cookie(sessionCookie, ss.id, 0))
	if next == "" {
		next = Prefix
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, k *call) error {
	c.sessions.end(k.s.id)
	http.SetCookie(w, c.cookie(sessionCookie, "", -1))
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
	return nil
}

// safeNext keeps a post-sign-in destination only when it is a console path (never
// another site).
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return ""
	}
	return next
}
