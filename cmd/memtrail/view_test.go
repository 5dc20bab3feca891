package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
)

// TestViewToken runs memtrail view: the address it prints holds a token
// of 256 bits, which opens the UI (and sets its cookie); the address
// without it opens nothing.
func TestViewToken(t *testing.T) {
	small := writeTrace(t, t.TempDir(), "small.mtr", smallTrace)
	out, w := io.Pipe()
	// The server serves until the test binary ends.
	go run([]string{"view", small}, w, io.Discard)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`is at (http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]{64}) `).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("memtrail view printed %q; want the address with a token of 64 hex digits", line)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("%s, without the token: status %d, want 401", m[1], resp.StatusCode)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err = client.Get(m[1] + "?token=" + url.QueryEscape(m[2]))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Errorf("the printed address: status %d at %s; want the page, without the token", resp.StatusCode, resp.Request.URL)
	}
}
