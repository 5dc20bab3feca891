package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/memtrail/memtrail/internal/web"
)

// TestAccess asks the server without its token, with a wrong one, with
// another Host (DNS rebinding) and from another origin: no data. The
// right token in the address sets the cookie and leads to the page
// without it.
func TestAccess(t *testing.T) {
	ts := serve(t, widgetTrace(t))
	for _, c := range []struct {
		what, path string
		header     map[string]string
		status     int
	}{
		{"the page without a token", "/", nil, http.StatusUnauthorized},
		{"the script without a token", "/app.js", nil, http.StatusUnauthorized},
		{"a view without a token", "/api/view?view=summary", nil, http.StatusUnauthorized},
		{"a source without a token", "/api/source?path=/etc/passwd", nil, http.StatusUnauthorized},
		{"a wrong token", "/api/view?view=summary&token=" + strings.Repeat("0", len(ts.token)), nil, http.StatusUnauthorized},
		{"a wrong cookie", "/api/view?view=summary", map[string]string{"Cookie": "memtrail-" + ts.URL[strings.LastIndex(ts.URL, ":")+1:] + "=x"}, http.StatusUnauthorized},
		{"another host", "/api/view?view=summary&token=" + ts.token, map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"another host and port", "/api/view?view=summary&token=" + ts.token, map[string]string{"Host": "evil.example:" + ts.URL[strings.LastIndex(ts.URL, ":")+1:]}, http.StatusForbidden},
		{"a page of another site", "/api/view?view=summary&token=" + ts.token, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a page of another port", "/api/view?view=summary&token=" + ts.token, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"another origin", "/api/view?view=summary&token=" + ts.token, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"the token", "/api/view?view=summary&token=" + ts.token, nil, http.StatusOK},
		{"localhost with the token", "/api/view?view=summary&token=" + ts.token, map[string]string{"Host": "localhost"}, http.StatusOK},
	} {
		req, err := http.NewRequest("GET", ts.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		if h := c.header["Host"]; h != "" {
			req.Host = h
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.what, resp.StatusCode, c.status, body)
			continue
		}
		if c.status != http.StatusOK && (strings.Contains(string(body), "peak") || !strings.Contains(string(body), `"error"`)) {
			t.Errorf("%s: status %d with %s; want an error and no data", c.what, resp.StatusCode, body)
		}
	}

	// The address memtrail view prints: a cookie, and the page without
	// the token.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(ts.page())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || len(cookies) != 1 ||
		!cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Value != ts.token {
		t.Fatalf("the printed address: status %d to %q, cookies %v; want 303 to / and an HttpOnly, SameSite=Strict cookie of the token",
			resp.StatusCode, resp.Header.Get("Location"), cookies)
	}
	for _, path := range []string{"/", "/app.js", "/api/view?view=summary"} {
		resp, err := client.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s with the cookie: status %d", path, resp.StatusCode)
		}
	}
}

// TestOtherOriginFetch opens the UI in Chromium (which then has its
// cookie), then a page of another origin on the same host, which fetches
// the API with mode no-cors: the cookie goes with it (another port is the
// same site), and the server must answer it nothing.
func TestOtherOriginFetch(t *testing.T) {
	s, err := web.New(widgetTrace(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	answered := map[string]int{} // the status of each API request, by its path and query
	h := s.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			mu.Lock()
			answered[r.URL.RequestURI()] = rec.status
			mu.Unlock()
		}
	}))
	t.Cleanup(ts.Close)
	v := &viewer{ts, s.Token()}

	const stolen = "/api/view?view=summary&top=7"
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><script>
fetch(%q, {mode: "no-cors", credentials: "include"}).then(() => { window.done = "fetched"; }, (e) => { window.done = "failed " + e; });
</script>`, ts.URL+stolen)
	}))
	t.Cleanup(evil.Close)

	ctx := browser(t)
	do(t, ctx, "opening the UI", chromedp.Navigate(v.page()))
	waitFor(t, ctx, "the UI's header", `document.querySelector("#summary-peak") !== null && document.querySelector("#summary-peak").textContent !== ""`)
	do(t, ctx, "opening a page of another origin", chromedp.Navigate(evil.URL))
	waitFor(t, ctx, "its fetch", `window.done !== undefined`)
	mu.Lock()
	status, asked := answered[stolen]
	mu.Unlock()
	if !asked {
		t.Fatal("the other origin's fetch never reached the server")
	}
	if status != http.StatusForbidden {
		t.Errorf("the other origin's fetch of %s: status %d, want 403", stolen, status)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// TestViewBounds asks for more objects than a server can hold: a clear
// error, and the server still answers.
func TestViewBounds(t *testing.T) {
	ts := serve(t, widgetTrace(t))
	for _, q := range []string{"view=objects&top=2147483648", "view=objects&top=100001", "view=leaks&chain=1000000", "view=objects&top=0"} {
		resp := ts.get(t, "/api/view?"+q)
		var body struct{ Error string }
		err := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.Error, "out of range") {
			t.Errorf("%s: status %d, %q (%v); want 400 and an error that says the range", q, resp.StatusCode, body.Error, err)
		}
	}
	// The filters are checked as report's flags are.
	for q, want := range map[string]string{"view=objects&module=(": "-module: error parsing regexp", "view=objects&thread=0": "a thread is a number from 1"} {
		resp := ts.get(t, "/api/view?"+q)
		var body struct{ Error string }
		err := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.Error, want) {
			t.Errorf("%s: status %d, %q (%v); want 400 and %q", q, resp.StatusCode, body.Error, err, want)
		}
	}
	resp := ts.get(t, "/api/view?view=objects&top=100000")
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the most objects a request may ask for: status %d", resp.StatusCode)
	}
}
