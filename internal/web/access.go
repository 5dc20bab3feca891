package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// Who may read a trace through its server: the server may run on a
// machine shared with other users, and a browser runs pages of every
// origin. So, as Jupyter does:
//
//  1. Every request must carry the server's token, a random secret that
//     memtrail view prints in the UI's address and only its user sees:
//     in the query (token=) or in the cookie the first such request sets
//     (HttpOnly, SameSite=Strict, named after the port, as two servers on
//     one host share their cookies).
//  2. The Host it names must be localhost or an IP address: a page of
//     another site that makes its name point at 127.0.0.1 (DNS
//     rebinding) sends its own name, and is refused.
//  3. A request a page of another origin makes (Sec-Fetch-Site, or an
//     Origin that is not the server's) is refused, even with the cookie:
//     pages on other ports of localhost are the same site to a browser,
//     and SameSite=Strict would send them the cookie.
//
// The token in the address is not the page's: the first request with it
// is sent on to the same address without it, so that it stays out of the
// page's history and of what the user copies from the address bar.

// tokenBytes is the length of a token: 256 random bits.
const tokenBytes = 32

// newToken returns a random token, in hex.
func newToken() string {
	b := make([]byte, tokenBytes)
	rand.Read(b) // never fails (crypto/rand panics if it cannot)
	return hex.EncodeToString(b)
}

// Token returns the secret every request must carry: memtrail view puts it
// in the address it prints (?token=).
func (s *Server) Token() string { return s.token }

// guarded lets through the requests the server's user makes, and answers
// every other with 401 or 403 and no data.
func (s *Server) guarded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := localHost(r.Host); err != nil {
			fail(w, http.StatusForbidden, err)
			return
		}
		if err := sameOrigin(r); err != nil {
			fail(w, http.StatusForbidden, err)
			return
		}
		cookie := cookieName(r)
		if given := r.URL.Query().Get("token"); given != "" {
			if !s.isToken(given) {
				fail(w, http.StatusUnauthorized, errors.New("wrong token: use the address memtrail view printed"))
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			if r.URL.Path == "/" {
				q := r.URL.Query()
				q.Del("token")
				to := url.URL{Path: "/", RawQuery: q.Encode(), Fragment: r.URL.Fragment}
				http.Redirect(w, r, to.String(), http.StatusSeeOther)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(cookie); err != nil || !s.isToken(c.Value) {
			fail(w, http.StatusUnauthorized, errors.New("no token: open the address memtrail view printed, with its ?token="))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isToken reports whether given is the server's token, in a time that does
// not depend on how much of it is right.
func (s *Server) isToken(given string) bool {
	return subtle.ConstantTimeCompare([]byte(given), []byte(s.token)) == 1
}

// cookieName returns the name of the cookie of the server r came to: one
// per port.
func cookieName(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		return fmt.Sprintf("memtrail-%d", a.Port)
	}
	return "memtrail"
}

// localHost checks the Host of a request: localhost or an IP address,
// with or without a port. The port is not checked: a tunnel (ssh -L)
// reaches the server from another one, and a rebinding page is known by
// its name alone.
func localHost(host string) error {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if name == "localhost" || net.ParseIP(name) != nil {
		return nil
	}
	return fmt.Errorf("host %q is not this machine's: open the address memtrail view printed (localhost, 127.0.0.1 or [::1])", host)
}

// sameOrigin refuses the requests that pages of other origins make.
func sameOrigin(r *http.Request) error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none": // no browser, the page itself, or the user typing the address
	default:
		return fmt.Errorf("a request from a page of another origin (Sec-Fetch-Site: %s)", site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if u, err := url.Parse(origin); err != nil || u.Host != r.Host {
			return fmt.Errorf("a request from a page of another origin (%s)", origin)
		}
	}
	return nil
}
